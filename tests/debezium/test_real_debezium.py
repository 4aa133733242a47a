"""Messages written by the real Debezium MySQL connector (tests/debezium/golden/debezium/README.md and
ticdc/testdata/, Debezium 2.4.0.Final output that TiCDC's own tests compare against)."""

from __future__ import annotations

import base64
from pathlib import Path

import orjson
import pytest

from changefeed.debezium import DebeziumDecoder
from changefeed.errors import DecodeError
from changefeed.model import Kind

REAL = Path(__file__).parent / "golden" / "debezium"
REF = Path(__file__).parent / "golden" / "ticdc" / "testdata"


def test_doc_create_with_schema():
    [ev] = DebeziumDecoder().decode((REAL / "doc-create.value.json").read_bytes(),
                                    (REAL / "doc-create.key.json").read_bytes())
    assert ev.kind is Kind.INSERT and ev.before is None
    assert ev.after == {"id": 1004, "first_name": "Anne", "last_name": "Kretchmar", "email": "annek@noanswer.org"}
    assert ev.table.qualified == "inventory.customers" and ev.table.pk_names == ["id"]
    assert ev.table.by_name["id"].type.name == "int" and ev.table.by_name["id"].nullable is False
    assert ev.commit_ts == 0  # no commit_ts in real Debezium: source.ts_ms << 18 (0 in the doc)


@pytest.mark.parametrize(("name", "kind"), [("doc-update", Kind.UPDATE), ("doc-delete", Kind.DELETE)])
def test_doc_update_and_delete(name, kind):
    [ev] = DebeziumDecoder().decode((REAL / f"{name}.value.json").read_bytes())
    assert ev.kind is kind
    assert ev.before["id"] == 1004 and ev.before["email"] == "annek@noanswer.org"
    if kind is Kind.UPDATE:
        assert ev.after["email"] == "annek@noanswer.org" or ev.after["id"] == 1004


def test_tutorial_message_of_an_old_connector():
    [ev] = DebeziumDecoder().decode((REAL / "tutorial-create.value.json").read_bytes(),
                                    (REAL / "tutorial-create.key.json").read_bytes())
    assert ev.kind is Kind.INSERT and ev.after


def test_tombstone_gives_no_event():
    assert DebeziumDecoder().decode(None, (REAL / "doc-create.key.json").read_bytes()) == []


def test_reference_datatypes_of_real_debezium():
    v = (REF / "datatype.dbz.json").read_bytes()
    [ev] = DebeziumDecoder().decode(v, (REF / "datatype.dbz.key.json").read_bytes())
    after = ev.after
    assert after["col_d_2023"] == "2023-11-30"  # io.debezium.time.Date: days since the epoch (datatype.dml.sql)
    assert after["col_d_0000"] is None
    t = ev.table
    assert t.by_name["col_dt_fsp_6"].type.compact_str() == "datetime(6)"


def test_bad_input_is_named():
    dec = DebeziumDecoder()
    msg = orjson.loads((REAL / "doc-create.value.json").read_bytes())
    msg["payload"]["op"] = "x"
    with pytest.raises(DecodeError, match="unknown op 'x'") as e:
        dec.decode(orjson.dumps(msg))
    assert e.value.field == "payload.op"
    msg = orjson.loads((REAL / "doc-create.value.json").read_bytes())
    msg["payload"]["after"]["surprise"] = 1
    with pytest.raises(DecodeError, match="does not match its schema"):
        dec.decode(orjson.dumps(msg))
    with pytest.raises(DecodeError, match="not JSON"):
        dec.decode(b"{")


def test_schema_change_event_of_real_debezium():
    [ev] = DebeziumDecoder().decode((REAL / "doc-schema-change.value.json").read_bytes(),
                                    (REAL / "doc-schema-change.key.json").read_bytes())
    assert ev.kind is Kind.DDL and ev.query
    assert ev.ddl_type != "ActionNone"


def test_real_debezium_events_carry_their_binlog_position():
    [ev] = DebeziumDecoder().decode((REAL / "doc-create.value.json").read_bytes(),
                                    (REAL / "doc-create.key.json").read_bytes())
    assert ev.position["file"].endswith("-bin.000003") and ev.position["pos"] == 154 and ev.position["row"] == 0


def test_a_ticdc_message_without_its_key_is_an_error():
    from pathlib import Path as _P

    line = (_P(__file__).parent / "golden" / "ticdc" / "default.messages.jsonl").read_bytes().splitlines()
    ref = next(orjson.loads(x) for x in line if b'"insert-1"' in x)
    with pytest.raises(DecodeError, match="without its key") as e:
        DebeziumDecoder().decode(ref["value"].encode(), None)
    assert e.value.field == "key"


def test_option_to_leave_out_ddl_and_watermark():
    from changefeed.config import build_config
    from changefeed.debezium import DebeziumEncoder
    from changefeed.model import Event, TableInfo

    cfg = build_config("debezium", {"debezium-output-ddl-and-watermark": "false", "enable-tidb-extension": "true"})
    enc = DebeziumEncoder(cfg)
    assert enc.encode(Event(kind=Kind.WATERMARK, commit_ts=5)) == []
    assert enc.encode(Event(kind=Kind.DDL, commit_ts=5, table=TableInfo("d", "t"), query="TRUNCATE TABLE t",
                            ddl_type="ActionTruncateTable")) == []


def _connect_message(fields: list[dict], after: dict, op: str = "c") -> bytes:
    """A real Debezium MySQL connector's value as Kafka Connect's JsonConverter writes it (schemas enabled)."""
    value = {"type": "struct", "optional": True, "name": "dbserver1.inventory.t.Value", "fields": fields}
    schema = {"type": "struct", "optional": False, "name": "dbserver1.inventory.t.Envelope", "version": 1, "fields": [
        dict(value, field="before"), dict(value, field="after"),
        {"type": "struct", "optional": False, "name": "io.debezium.connector.mysql.Source", "fields": [],
         "field": "source"},
        {"type": "string", "optional": False, "field": "op"}, {"type": "int64", "optional": True, "field": "ts_ms"}]}
    source = {"version": "2.4.0.Final", "connector": "mysql", "name": "dbserver1", "ts_ms": 1701347696000,
              "snapshot": "false", "db": "inventory", "table": "t", "server_id": 223344, "gtid": None,
              "file": "mysql-bin.000005", "pos": 1234, "row": 0, "thread": 8, "query": None}
    return orjson.dumps({"schema": schema, "payload": {"before": None, "after": after, "source": source, "op": op,
                                                        "ts_ms": 1701347696500, "transaction": None}})


def _decimal_field(name: str, precision: int, scale: int) -> dict:
    return {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
            "parameters": {"scale": str(scale), "connect.decimal.precision": str(precision)}, "field": name}


def test_decimals_in_debeziums_default_precise_mode():
    """`decimal.handling.mode=precise` (Debezium's default): a Connect Decimal, the unscaled value's big-endian
    two's-complement bytes in base64. Debezium's BinlogDecimalIT (decimal_test.sql) reads back 1.33, -2.111, 3.44400;
    `bigint.unsigned.handling.mode=precise` writes BIGINT UNSIGNED as a Decimal of scale 0."""
    fields = [{"type": "int32", "optional": False, "field": "id"}, _decimal_field("A", 3, 2),
              _decimal_field("B", 4, 3), _decimal_field("C", 7, 5), _decimal_field("D", 7, 5),
              _decimal_field("u", 20, 0)]
    # 133 = 00 85, -2111 = f7 c1, 344400 = 05 41 50, 2^64-1 = 00 ff*8 (BigInteger.toByteArray)
    [ev] = DebeziumDecoder().decode(_connect_message(fields, {"id": 1, "A": "AIU=", "B": "98E=", "C": "BUFQ",
                                                              "D": None, "u": "AP//////////"}))
    assert ev.after == {"id": 1, "A": "1.33", "B": "-2.111", "C": "3.44400", "D": None, "u": "18446744073709551615"}
    types = {c.name: c.type.compact_str() for c in ev.table.columns}
    assert types["A"] == "decimal(3,2)" and types["C"] == "decimal(7,5)" and types["u"] == "decimal(20,0)"


def test_temporal_values_in_connect_precision_mode():
    """`time.precision.mode=connect`: Kafka Connect's own Date (days), Time (ms of the day) and Timestamp (epoch
    ms); Debezium's `adaptive` mode's io.debezium.time.Time is ms of the day too."""
    fields = [{"type": "int32", "optional": False, "field": "id"},
              {"type": "int32", "optional": True, "name": "org.apache.kafka.connect.data.Date", "version": 1,
               "field": "d"},
              {"type": "int64", "optional": True, "name": "org.apache.kafka.connect.data.Timestamp", "version": 1,
               "field": "dt"},
              {"type": "int32", "optional": True, "name": "org.apache.kafka.connect.data.Time", "version": 1,
               "field": "tm"},
              {"type": "int32", "optional": True, "name": "io.debezium.time.Time", "field": "t0"}]
    [ev] = DebeziumDecoder().decode(_connect_message(fields, {"id": 1, "d": 19691, "dt": 1701347696123,
                                                              "tm": 45296123, "t0": 3600000}))
    assert ev.after["d"] == "2023-11-30" and ev.after["dt"] == "2023-11-30 12:34:56.123"
    assert ev.table.by_name["tm"].type.compact_str() == "time(3)"
    assert ev.after["tm"].startswith("12:34:56.123") and ev.after["t0"] == "01:00:00"


def test_truncate_event_is_the_tables_truncate():
    """A truncate event (op "t", no images; Debezium's docs, "truncate events") empties the table, as TiCDC's
    TRUNCATE TABLE does."""
    [ev] = DebeziumDecoder().decode(_connect_message([{"type": "int32", "optional": False, "field": "id"}], None,
                                                     op="t"))
    assert ev.kind is Kind.DDL and ev.ddl_type == "ActionTruncateTable"
    assert ev.query == "TRUNCATE TABLE `inventory`.`t`" and ev.table.qualified == "inventory.t"


def test_schema_change_without_the_schema_envelope():
    """With the JsonConverter's `schemas.enable=false` a schema-change value is its payload alone."""
    payload = orjson.loads((REAL / "doc-schema-change.value.json").read_bytes())["payload"]
    [ev] = DebeziumDecoder().decode(orjson.dumps(payload))
    assert ev.kind is Kind.DDL and ev.query.startswith("ALTER TABLE customers ADD middle_name")
    assert "middle_name" in ev.table.by_name


@pytest.mark.parametrize("message", [
    # Debezium's docs, "Transaction metadata": the BEGIN and END of a transaction on its own topic
    {"status": "BEGIN", "id": "571:53195829", "ts_ms": 1486500577125, "event_count": None, "data_collections": None},
    {"status": "END", "id": "571:53195832", "ts_ms": 1486500577691, "event_count": 2,
     "data_collections": [{"data_collection": "s1.a", "event_count": 1}, {"data_collection": "s2.a",
                                                                           "event_count": 1}]},
])
def test_transaction_metadata_is_no_change(message):
    assert DebeziumDecoder().decode(orjson.dumps(message)) == []
    assert DebeziumDecoder().decode(orjson.dumps({"schema": {"type": "struct"}, "payload": message})) == []


def _schema_change(ddl: str, columns: list[dict], snapshot: str = "false", change: str = "ALTER") -> bytes:
    """A real connector's schema-change value (its schema-change topic), the table's columns as its DDL parser
    keeps them."""
    payload = orjson.loads((REAL / "doc-schema-change.value.json").read_bytes())["payload"]
    payload["ddl"] = ddl
    payload["source"]["snapshot"] = snapshot
    payload["source"]["table"] = "t"
    table = {"defaultCharsetName": "utf8mb4", "primaryKeyColumnNames": ["id"], "columns": columns}
    payload["tableChanges"] = [{"type": change, "id": '"inventory"."t"', "table": table}]
    return orjson.dumps({"payload": payload})


def _ddl_column(name: str, type_name: str, position: int, length: int | None = None,
                scale: int | None = None) -> dict:
    return {"name": name, "jdbcType": 2, "typeName": type_name, "typeExpression": type_name, "charsetName": None,
            "length": length, "scale": scale, "position": position, "optional": name != "id",
            "autoIncremented": False, "generated": False}


def test_a_numeric_column_of_a_schema_change_keeps_its_scale():
    """Debezium keeps NUMERIC, DEC and FIXED as written (MySqlAntlrDdlParser; BinlogAntlrDdlParserTest asserts
    them with their length and scale): each is a DECIMAL of that scale. FLOAT(p) above 24 bits is a DOUBLE."""
    dec = DebeziumDecoder()
    cols = [_ddl_column("id", "INT", 1), _ddl_column("x", "NUMERIC", 2, 10, 2), _ddl_column("y", "FIXED", 3, 6, 3),
            _ddl_column("f", "FLOAT", 4, 53)]
    [ddl] = dec.decode(_schema_change("ALTER TABLE t ADD x NUMERIC(10,2), ADD y FIXED(6,3), ADD f FLOAT(53)", cols))
    assert {c.name: c.type.compact_str() for c in ddl.table.columns}["x"] == "decimal(10,2)"
    fields = [{"type": "int32", "optional": False, "field": "id"}, _decimal_field("x", 10, 2),
              _decimal_field("y", 6, 3), {"type": "double", "optional": True, "field": "f"}]
    [ev] = dec.decode(_connect_message(fields, {"id": 1, "x": "AIU=", "y": "98E=", "f": 1.2345678901234}))
    assert ev.after == {"id": 1, "x": "1.33", "y": "-2.111", "f": 1.2345678901234}
    types = {c.name: c.type.compact_str() for c in ev.table.columns}
    assert types["x"] == "decimal(10,2)" and types["y"] == "decimal(6,3)" and types["f"] == "double"


@pytest.mark.parametrize("ddl", ["DROP TABLE IF EXISTS `inventory`.`t`", "DROP DATABASE IF EXISTS `inventory`"])
def test_a_snapshots_drop_before_its_create_drops_nothing(ddl):
    """A snapshot writes DROP ... IF EXISTS, then the table's CREATE (BinlogSnapshotChangeEventSource): schema
    history, which must not empty a lake's table; the same DROP streamed from the binlog is a DROP."""
    dec = DebeziumDecoder()
    assert dec.decode(_schema_change(ddl, [], snapshot="true", change="DROP")) == []
    [create] = dec.decode(_schema_change("CREATE TABLE `t` (`id` int NOT NULL, PRIMARY KEY (`id`))",
                                         [_ddl_column("id", "INT", 1)], snapshot="true", change="CREATE"))
    assert create.ddl_type == "ActionCreateTable"
    [drop] = dec.decode(_schema_change(ddl, [], change="DROP"))
    assert drop.ddl_type in ("ActionDropTable", "ActionDropSchema")


@pytest.mark.parametrize("message", [
    # Debezium's heartbeat (heartbeat.interval.ms; HeartbeatImpl, SchemaFactory), with and without its schema
    {"schema": {"type": "struct", "name": "io.debezium.connector.common.Heartbeat", "version": 1, "optional": False,
                "fields": [{"field": "ts_ms", "type": "int64", "optional": False}]},
     "payload": {"ts_ms": 1588252618953}},
    {"ts_ms": 1588252618953},
    # a tombstone as the JsonConverter wrote it before Kafka 2.2 (KAFKA-3832)
    {"schema": None, "payload": None},
])
def test_heartbeats_and_old_tombstones_are_no_change(message):
    assert DebeziumDecoder().decode(orjson.dumps(message)) == []


def test_temporal_values_in_isostring_precision_mode():
    """`time.precision.mode=isostring` (Debezium 3.1, TemporalPrecisionMode): IsoDate, IsoTime and IsoTimestamp
    are ISO-8601 texts in UTC (the ISO_OFFSET_* formatters), read as DATE, TIME and DATETIME."""
    def iso(name: str, field: str) -> dict:
        return {"type": "string", "optional": True, "name": f"io.debezium.time.{name}", "version": 1,
                "field": field}

    fields = [{"type": "int32", "optional": False, "field": "id"}, iso("IsoDate", "d"), iso("IsoTime", "t"),
              iso("IsoTimestamp", "ts")]
    [ev] = DebeziumDecoder().decode(_connect_message(fields, {"id": 1, "d": "2023-11-30Z", "t": "12:34:56.123456Z",
                                                              "ts": "2023-11-30T12:34:56.123456Z"}))
    assert ev.after == {"id": 1, "d": "2023-11-30", "t": "12:34:56.123456", "ts": "2023-11-30 12:34:56.123456"}
    types = {c.name: c.type.compact_str() for c in ev.table.columns}
    assert types["d"] == "date" and types["t"] == "time(6)" and types["ts"] == "datetime(6)"


def test_a_geometry_struct_is_the_columns_bytes():
    """A spatial column is a struct of its WKB (base64) and SRID (io.debezium.data.geometry.Geometry, Point):
    read back as MySQL stores the value, the SRID (4 bytes, little-endian) then the WKB, in a GEOMETRY column."""
    wkb = "AQEAAAAAAAAAAADwPwAAAAAAAPA/"  # POINT(1 1)
    struct_fields = [{"type": "bytes", "optional": False, "field": "wkb"},
                     {"type": "int32", "optional": True, "field": "srid"}]
    fields = [{"type": "int32", "optional": False, "field": "id"},
              {"type": "struct", "optional": True, "name": "io.debezium.data.geometry.Geometry", "version": 1,
               "fields": struct_fields, "field": "g"},
              {"type": "struct", "optional": True, "name": "io.debezium.data.geometry.Point", "version": 1,
               "fields": [{"type": "double", "optional": False, "field": "x"},
                          {"type": "double", "optional": False, "field": "y"}, *struct_fields], "field": "p"}]
    [ev] = DebeziumDecoder().decode(_connect_message(fields, {"id": 1, "g": {"wkb": wkb, "srid": None},
                                                              "p": {"x": 1.0, "y": 1.0, "wkb": wkb, "srid": 4326}}))
    raw = base64.b64decode(wkb)
    assert ev.after["g"] == b"\0\0\0\0" + raw and ev.after["p"] == (4326).to_bytes(4, "little") + raw
    assert ev.table.by_name["g"].type.compact_str() == "geometry"
