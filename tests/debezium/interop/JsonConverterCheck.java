// Reads Debezium JSON messages (one per line, with schema) and hands each to Kafka Connect's own
// JsonConverter, the way a Kafka Connect sink would, then writes the Connect value back as schemaless JSON.
// A line that Connect refuses is written as "ERROR: <reason>".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.json.JsonConverter;

public class JsonConverterCheck {
    public static void main(String[] args) throws Exception {
        JsonConverter withSchema = new JsonConverter();
        withSchema.configure(Map.of("schemas.enable", "true", "converter.type", "value"));
        JsonConverter plain = new JsonConverter();
        plain.configure(Map.of("schemas.enable", "false", "converter.type", "value"));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            try {
                SchemaAndValue sv = withSchema.toConnectData("t", line.getBytes(StandardCharsets.UTF_8));
                byte[] out = plain.fromConnectData("t", sv.schema(), sv.value());
                System.out.println(new String(out, StandardCharsets.UTF_8));
            } catch (Exception e) {
                System.out.println("ERROR: " + e.getClass().getSimpleName() + ": " + e.getMessage().replace('\n', ' '));
            }
        }
    }
}
