"""TiCDC's Kafka security options mapped to librdkafka and to Spark's Kafka source; secrets redacted."""

from __future__ import annotations

from pathlib import Path

import pytest

from changefeed.config import ConfigError
from changefeed.redact import redact, remember
from changefeed.security import kafka_security, librdkafka_config, spark_kafka_options
from changefeed.sinkconfig import codec_options, kafka_settings, resolve

PKCS8 = "-----BEGIN PRIVATE KEY-----\nMIIBVQIBADANBgkqhkiG9w0BAQEFAASCAT8wggE7\n-----END PRIVATE KEY-----\n"
CERT = "-----BEGIN CERTIFICATE-----\nMIIBszCCAV2gAwIBAgIU\n-----END CERTIFICATE-----\n"


@pytest.fixture
def pem(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "ca.pem").write_text(CERT)
    (tmp_path / "client.pem").write_text(CERT)
    (tmp_path / "client.key").write_text(PKCS8)
    (tmp_path / "rsa.key").write_text(PKCS8.replace("PRIVATE KEY", "RSA PRIVATE KEY"))
    return {k: str(tmp_path / f) for k, f in (("ca", "ca.pem"), ("cert", "client.pem"), ("key", "client.key"),
                                               ("rsa", "rsa.key"))}


def test_scram_over_tls_on_both_clients(pem: dict[str, str]) -> None:
    sec = kafka_security({"enable-tls": "true", "ca": pem["ca"], "sasl-user": "alice", "sasl-password": 'p"w\\x',
                          "sasl-mechanism": "scram-sha-512", "protocol": "canal-json"})
    assert librdkafka_config(sec) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
        "sasl.password": 'p"w\\x', "ssl.ca.location": pem["ca"]}
    assert spark_kafka_options(sec) == {
        "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                  'username="alice" password="p\\"w\\\\x";',
        "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": pem["ca"]}


def test_plain_without_tls_mutual_tls_and_skip_verify(pem: dict[str, str]) -> None:
    plain = kafka_security({"sasl-user": "u", "sasl-password": "pw12"})
    assert librdkafka_config(plain)["security.protocol"] == "SASL_PLAINTEXT"
    assert "PlainLoginModule" in spark_kafka_options(plain)["kafka.sasl.jaas.config"]
    mtls = kafka_security({"ca": pem["ca"], "cert": pem["cert"], "key": pem["key"], "insecure-skip-verify": "true"})
    lib = librdkafka_config(mtls)
    assert lib["security.protocol"] == "SSL" and lib["ssl.certificate.location"] == pem["cert"]
    assert lib["ssl.key.location"] == pem["key"] and lib["enable.ssl.certificate.verification"] is False
    sp = spark_kafka_options(mtls)
    assert sp["kafka.ssl.keystore.type"] == "PEM" and sp["kafka.ssl.keystore.key"] == PKCS8
    assert sp["kafka.ssl.keystore.certificate.chain"] == CERT
    assert sp["kafka.ssl.endpoint.identification.algorithm"] == ""
    assert redact(f"key is {PKCS8}") == "key is -----*** PRIVATE KEY-----\n"


def test_gssapi_keytab_and_oauthbearer(tmp_path: Path) -> None:
    keytab = tmp_path / "u.keytab"
    keytab.write_bytes(b"\x05\x02")
    g = kafka_security({"sasl-mechanism": "GSSAPI", "sasl-gssapi-auth-type": "keytab", "sasl-gssapi-user": "cdc",
                        "sasl-gssapi-realm": "EXAMPLE.COM", "sasl-gssapi-keytab-path": str(keytab),
                        "enable-tls": "true"})
    assert librdkafka_config(g)["sasl.kerberos.principal"] == "cdc@EXAMPLE.COM"
    jaas = spark_kafka_options(g)["kafka.sasl.jaas.config"]
    assert jaas.startswith("com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true")
    assert 'principal="cdc@EXAMPLE.COM"' in jaas
    o = kafka_security({"sasl-mechanism": "OAUTHBEARER", "sasl-oauth-client-id": "id",
                        "sasl-oauth-client-secret": "s3cr3t-oauth", "sasl-oauth-token-url": "https://idp/token",
                        "sasl-oauth-scopes": "a,b"})
    assert librdkafka_config(o)["sasl.oauthbearer.scope"] == "a b"
    sp = spark_kafka_options(o)
    assert sp["kafka.sasl.oauthbearer.token.endpoint.url"] == "https://idp/token"
    assert 'clientSecret="s3cr3t-oauth" scope="a b";' in sp["kafka.sasl.jaas.config"]


@pytest.mark.parametrize("options, words", [
    ({"sasl-mechanism": "SCRAM-SHA-1", "sasl-user": "u"}, "expected one of"),
    ({"sasl-mechanism": "GSSAPI", "sasl-gssapi-auth-type": "user", "sasl-gssapi-password": "x"}, "not supported"),
    ({"sasl-mechanism": "OAUTHBEARER", "sasl-oauth-client-id": "i", "sasl-oauth-client-secret": "s",
      "sasl-oauth-token-url": "u", "sasl-oauth-audience": "aud"}, "sasl-oauth-audience"),
    ({"ca": "/no/such/ca.pem"}, "no such file"),
    ({"sasl-mechanism": "SCRAM-SHA-256"}, "needs sasl-user"),
])
def test_what_a_client_cannot_do_is_refused_in_one_line(options: dict[str, str], words: str) -> None:
    with pytest.raises(ConfigError, match=words) as e:
        kafka_security(options)
    assert "\n" not in str(e.value)


def test_a_pkcs1_key_is_refused_for_spark_with_the_command_that_converts_it(pem: dict[str, str]) -> None:
    sec = kafka_security({"cert": pem["cert"], "key": pem["rsa"]})
    with pytest.raises(ConfigError, match="openssl pkcs8 -topk8"):
        spark_kafka_options(sec)


def test_toml_kafka_config_under_the_uri(tmp_path: Path) -> None:
    toml = tmp_path / "cf.toml"
    toml.write_text('[sink.kafka-config]\nsasl-user = "toml-user"\nsasl-password = "toml-Secret-1"\n'
                    'sasl-mechanism = "SCRAM-SHA-256"\nenable-tls = true\n')
    got = kafka_settings("kafka://h:9092/t?protocol=canal-json&sasl-user=uri-user", toml)
    assert got == {"sasl-user": "uri-user", "sasl-password": "toml-Secret-1", "sasl-mechanism": "SCRAM-SHA-256",
                   "enable-tls": "true"}
    sink, _, _ = resolve("kafka://h:9092/t?protocol=canal-json", toml)
    assert librdkafka_config(kafka_security(sink.kafka))["security.protocol"] == "SASL_SSL"
    assert "toml-Secret-1" not in redact(f"login failed for {got}")


def test_an_https_registry_takes_the_endpoints_ca_unless_given_its_own(pem: dict[str, str]) -> None:
    _, opts = codec_options(f"kafka://h/t?protocol=avro&schema-registry=https://r:8081&ca={pem['ca']}")
    assert opts["schema-registry-ca"] == pem["ca"]
    _, opts = codec_options(f"kafka://h/t?protocol=avro&schema-registry=https://r:8081&ca={pem['ca']}"
                            "&schema-registry-ca=/other.pem")
    assert opts["schema-registry-ca"] == "/other.pem"
    _, opts = codec_options(f"kafka://h/t?protocol=avro&schema-registry=http://r:8081&ca={pem['ca']}")
    assert "schema-registry-ca" not in opts


def test_redaction_of_every_shape_a_secret_takes() -> None:
    remember("bare-Value-42")
    text = ("kafka://alice:pa55word@h:9092/t?sasl-user=alice&sasl-password=Zq1-secret&sasl-oauth-client-secret=oc"
            " http://reg:RegPw9@r:8081/apis {'sasl.password': 'dictpw1'} password=\"jaaspw\"; and bare-Value-42")
    out = redact(text)
    for s in ("pa55word", "Zq1-secret", "sasl-oauth-client-secret=oc", "RegPw9", "dictpw1", "jaaspw",
              "bare-Value-42"):
        assert s not in out, out
    assert "kafka://alice:***@h:9092/t?sasl-user=alice&sasl-password=***" in out
    assert "http://reg:***@r:8081/apis" in out
