"""--protocol debezium-avro against a real schema registry (Apicurio's Confluent API).

The expectations are TiCDC's (pingcap/ticdc pkg/sink/codec/debezium): its avro_test.go where it says the
value (TestDebeziumConfluentAvroEncodeRowEvent, ...SanitizesFullNameAndUnionBranch, ...EncodeDDLEvent,
...EncodeCheckpointEvent, ...DoesNotEncodeCheckpointEventByDefault), else the rule in avro.go / codec.go named
in the test's docstring, written out here by hand.
"""

from __future__ import annotations

import io
import json
import struct
import uuid
from decimal import Decimal

import fastavro
import pytest

from changefeed.avro import SchemaRegistry
from changefeed.config import build_config
from changefeed.debezium.avro import DebeziumAvroDecoder, DebeziumAvroEncoder
from changefeed.debezium.avro_connect import to_avro
from changefeed.errors import EncodeError
from changefeed.goavro import signed_bytes
from changefeed.model import Column, Event, Index, Kind, TableInfo


def table() -> TableInfo:
    return TableInfo(f"db{uuid.uuid4().hex[:6]}", "orders", [
        Column("id", "bigint", nullable=False, primary_key=True),
        Column("amount", "decimal(10,2)", nullable=True),
        Column("flags", "bit(12)", nullable=True),
        Column("created", "datetime(6)", nullable=True),
        Column("small", "smallint", nullable=True),
        Column("status", "enum('new','paid')", nullable=True),
    ], [Index("PRIMARY", ["id"], primary=True, unique=True)], 3, 1)


ROW = {"id": 7, "amount": "12.50", "flags": 0xABC, "created": "2026-01-02 03:04:05.123456", "small": -3, "status": 2}


def foo(db: str = "test") -> TableInfo:
    """avro_test.go's table: create table foo(id int primary key, name varchar(16), bin varbinary(16),
    price decimal(10, 4), ubig bigint unsigned, v bigint null)."""
    return TableInfo(db, "foo", [
        Column("id", "int", nullable=False, primary_key=True), Column("name", "varchar(16)"),
        Column("bin", "varbinary(16)"), Column("price", "decimal(10,4)"), Column("ubig", "bigint unsigned"),
        Column("v", "bigint")], [Index("PRIMARY", ["id"], primary=True, unique=True)])


FOO_ROW = {"id": 1, "name": "alice", "bin": b"\x01\x02\x03", "price": "12.3400", "ubig": (1 << 64) - 1, "v": None}


def read(reg: SchemaRegistry, payload: bytes, logical: bool = False):
    """The registered schema text and the record, read by fastavro (with its logical types when `logical`)."""
    assert payload[0] == 0
    sid = struct.unpack(">I", payload[1:5])[0]
    text = reg.schema(sid)
    schema = json.loads(text)
    if not logical:
        schema = json.loads(text.replace('"logicalType":"decimal",', ""))
    return text, fastavro.schemaless_reader(io.BytesIO(payload[5:]), fastavro.parse_schema(schema), None)


def test_connect_schema_to_avro_like_ticdc():
    """avro.go toAvroSchema: int8/int16 carry `connect.type`, named types connect.name/connect.version, a
    Decimal is bytes + logicalType decimal (precision, scale as numbers), an optional field a ["null", T]
    union with a null default, `connect.field` on every field."""
    assert to_avro({"type": "int16", "optional": True, "field": "x"}) == {"type": "int", "connect.type": "int16"}
    assert to_avro({"type": "int32", "name": "io.debezium.time.Date", "version": 1}) == {
        "type": "int", "connect.name": "io.debezium.time.Date", "connect.version": 1}
    assert to_avro({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
                    "parameters": {"precision": "10", "scale": "4"}}) == {
        "type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 4,
        "connect.name": "org.apache.kafka.connect.data.Decimal",
        "connect.parameters": {"precision": "10", "scale": "4"}}
    assert to_avro({"type": "struct", "name": "a.b.cKey", "fields": [{"type": "int32", "optional": True,
                                                                       "field": "id"}]}) == {
        "type": "record", "name": "cKey", "namespace": "a.b", "connect.name": "a.b.cKey",
        "fields": [{"name": "id", "type": ["null", "int"], "default": None, "connect.field": "id"}]}
    # goavro's toSignedBytes: the shortest two's complement
    assert [signed_bytes(n) for n in (0, 127, 128, -1, -128, -129, 123400)] == [
        b"\0", b"\x7f", b"\0\x80", b"\xff", b"\x80", b"\xff\x7f", b"\x01\xe2\x08"]


def test_row_event_as_ticdcs_avro_test(schema_registry_url):
    """TestDebeziumConfluentAvroEncodeRowEvent: cluster dbserver1, avro-bigint-unsigned-handling-mode=string,
    debezium-disable-schema=true (ignored: TiCDC's Avro encoder turns it off). The key and every column are
    unions, binary is bytes, the price a decimal, no `transaction`, snapshot and thread null; the key schema is
    written out from avro.go's rules (Go's json.Marshal sorts the keys)."""
    reg = SchemaRegistry(schema_registry_url)
    cfg = build_config("debezium-avro", {"schema-registry": schema_registry_url, "cluster-id": "dbserver1",
                                         "avro-bigint-unsigned-handling-mode": "string",
                                         "debezium-disable-schema": "true"})
    [m] = DebeziumAvroEncoder(cfg, reg).encode(Event(kind=Kind.INSERT, commit_ts=1, table=foo(), after=FOO_ROW))
    assert m.topic == "dbserver1.test.foo"
    ktext, key = read(reg, m.key)
    assert key == {"id": 1}
    assert SchemaRegistry(schema_registry_url).schema(struct.unpack(">I", m.key[1:5])[0]) == ktext  # as registered
    assert ktext == ('{"connect.name":"dbserver1.test.fooKey","fields":[{"connect.field":"id","default":null,'
                     '"name":"id","type":["null","int"]}],"name":"fooKey","namespace":"dbserver1.test","type":"record"}')
    vtext, value = read(reg, m.value, logical=True)
    assert value["op"] == "c" and value["before"] is None and "transaction" not in value
    assert isinstance(value["ts_ms"], int)
    assert value["after"] == {"id": 1, "name": "alice", "bin": b"\x01\x02\x03", "price": Decimal("12.3400"),
                              "ubig": "18446744073709551615", "v": None}
    src = value["source"]
    assert (src["db"], src["table"], src["name"]) == ("test", "foo", "dbserver1")
    assert src["snapshot"] is None and src["thread"] is None and "start_ts" not in src
    assert src["commit_ts"] == 1 and src["cluster_id"] == "dbserver1"
    for s in ('"name":"fooEnvelope"', '"name":"foo"', '"name":"Source"', '"logicalType":"decimal"',
              '"namespace":"dbserver1.test"', '"type":["null","dbserver1.test.foo"]'):
        assert s in vtext
    assert '"transaction"' not in vtext and "start_ts" not in vtext
    # the decoder reads it back (avro_test.go TestDebeziumConfluentAvroDecodeRowEvent)
    [ev] = DebeziumAvroDecoder(cfg, reg).decode(m.value, m.key)
    assert ev.kind is Kind.INSERT and ev.commit_ts == 1 and (ev.table.schema, ev.table.table) == ("test", "foo")
    assert ev.after == {"id": 1, "name": "alice", "bin": b"\x01\x02\x03", "price": "12.3400",
                        "ubig": "18446744073709551615", "v": None}


def test_sanitized_names(schema_registry_url):
    """TestDebeziumConfluentAvroSanitizesFullNameAndUnionBranch: db-server / test-db / foo-bar become
    foo_barEnvelope, foo_bar in namespace db_server.test_db."""
    reg = SchemaRegistry(schema_registry_url)
    cfg = build_config("debezium-avro", {"schema-registry": schema_registry_url, "cluster-id": "db-server"})
    t = TableInfo(f"test-db{uuid.uuid4().hex[:4]}", "foo-bar", [Column("id", "int", nullable=False, primary_key=True)],
                  [Index("PRIMARY", ["id"], primary=True, unique=True)])
    [m] = DebeziumAvroEncoder(cfg, reg).encode(Event(kind=Kind.INSERT, commit_ts=1, table=t, after={"id": 1}))
    text, value = read(reg, m.value)
    ns = "db_server." + t.schema.replace("-", "_")
    assert '"name":"foo_barEnvelope"' in text and '"name":"foo_bar"' in text and f'"namespace":"{ns}"' in text
    assert '"namespace":"db-server.' not in text
    assert value["after"] == {"id": 1}


def test_envelope_in_confluent_avro(schema_registry_url):
    """Debezium's MySQL types under TiCDC's Avro rules (codec.go writeDebeziumFieldSchema, avro.go): a
    precise DECIMAL is bytes with logicalType decimal (codec.go's isDebeziumAvro branch), Bits little-endian
    bytes, MicroTimestamp a long, SMALLINT an int with connect.type int16, the records named `<table>...`."""
    reg = SchemaRegistry(schema_registry_url)
    cfg = build_config("debezium-avro", {"schema-registry": schema_registry_url})
    t = table()
    [m] = DebeziumAvroEncoder(cfg, reg).encode(Event(kind=Kind.INSERT, commit_ts=5 << 18, table=t, after=ROW))
    assert m.topic == f"default.{t.schema}.orders"
    vtext, val = read(reg, m.value, logical=True)
    vschema = json.loads(vtext)
    assert (vschema["name"], vschema["namespace"]) == ("ordersEnvelope", f"default.{t.schema}")
    assert val["op"] == "c" and val["before"] is None
    after = val["after"]
    assert after["id"] == 7 and after["amount"] == Decimal("12.50") and after["small"] == -3
    assert after["status"] == "paid"
    assert after["flags"] == bytes([0xBC, 0x0A])  # io.debezium.data.Bits: little-endian
    assert after["created"] == 1767323045123456  # MicroTimestamp
    assert val["source"]["commit_ts"] == 5 << 18 and val["source"]["connector"] == "TiCDC"
    assert '{"connect.type":"int16","type":"int"}' in vtext
    kschema, key = read(reg, m.key)
    assert key == {"id": 7} and json.loads(kschema)["name"] == "ordersKey"


def test_decimal_handling_modes(schema_registry_url):
    """avro-decimal-handling-mode (codec.go TypeNewDecimal under isDebeziumAvro): precise is bytes +
    logicalType decimal of the column's precision and scale, string the decimal's text."""
    reg = SchemaRegistry(schema_registry_url)
    t = foo(f"db{uuid.uuid4().hex[:6]}")
    row = dict(FOO_ROW, ubig=5, price="-12.3400")
    for mode, want in (("precise", Decimal("-12.3400")), ("string", "-12.3400")):
        cfg = build_config("debezium-avro", {"schema-registry": schema_registry_url,
                                             "avro-decimal-handling-mode": mode})
        [m] = DebeziumAvroEncoder(cfg, reg).encode(Event(kind=Kind.INSERT, commit_ts=1, table=t, after=row))
        text, val = read(reg, m.value, logical=True)
        assert val["after"]["price"] == want
        assert ('"precision":10,"scale":4' in text) is (mode == "precise")
        [ev] = DebeziumAvroDecoder(cfg, reg).decode(m.value, m.key)
        assert ev.after["price"] == "-12.3400"
        t = foo(f"db{uuid.uuid4().hex[:6]}")  # a subject per mode: the two value schemas are incompatible


def test_bigint_unsigned_long_mode_refuses_what_a_long_cannot_hold(schema_registry_url):
    """avro.go debeziumAvroFieldValue: in the default long mode a BIGINT UNSIGNED above 2^63-1 is an error
    ("unsigned bigint value ... overflows avro long"); up to it the value is the long itself."""
    reg = SchemaRegistry(schema_registry_url)
    cfg = build_config("debezium-avro", {"schema-registry": schema_registry_url})
    t = foo(f"db{uuid.uuid4().hex[:6]}")
    enc = DebeziumAvroEncoder(cfg, reg)
    with pytest.raises(EncodeError, match="overflows avro long"):
        enc.encode(Event(kind=Kind.INSERT, commit_ts=1, table=t, after=FOO_ROW))
    [m] = enc.encode(Event(kind=Kind.INSERT, commit_ts=1, table=t, after=dict(FOO_ROW, ubig=(1 << 63) - 1)))
    assert read(reg, m.value)[1]["after"]["ubig"] == (1 << 63) - 1


def test_round_trip(schema_registry_url):
    """Our own output decodes back: insert, update, delete (the decimal from its bytes, BIT from its bytes)."""
    reg = SchemaRegistry(schema_registry_url)
    cfg = build_config("debezium-avro", {"schema-registry": schema_registry_url})
    enc, dec = DebeziumAvroEncoder(cfg, reg), DebeziumAvroDecoder(cfg, SchemaRegistry(schema_registry_url))
    t = table()
    after = dict(ROW, amount=None, status=1)
    for ev in (Event(kind=Kind.INSERT, commit_ts=5 << 18, table=t, after=ROW),
               Event(kind=Kind.UPDATE, commit_ts=6 << 18, table=t, before=ROW, after=after),
               Event(kind=Kind.DELETE, commit_ts=7 << 18, table=t, before=after)):
        [m] = enc.encode(ev)
        [got] = dec.decode(m.value, m.key)
        assert got.kind is ev.kind and got.commit_ts == ev.commit_ts
        for side in ("before", "after"):
            want = getattr(ev, side)
            if want is not None:
                row = getattr(got, side)
                assert row["id"] == 7 and row["flags"] == 0xABC and row["created"] == ROW["created"]
                assert row["status"] == want["status"] and row["small"] == -3 and row["amount"] == want["amount"]


def test_a_later_decoder_told_the_ddl_reads_bigint_unsigned_whole(schema_registry_url):
    """A consumer decodes a partition's rows in a later micro-batch than their CREATE TABLE, with the definition
    from its schema store (`remember`): without the TiDB extension nothing in the message says a column is
    BIGINT UNSIGNED (a long, or its text with avro-bigint-unsigned-handling-mode=string); the DDL does.
    (TiCDC's consumer keeps the table info for the same reason.)"""
    reg = SchemaRegistry(schema_registry_url)
    for mode, big in (("long", (1 << 63) - 1), ("string", (1 << 64) - 1)):
        cfg = build_config("debezium-avro", {"schema-registry": schema_registry_url,
                                             "avro-bigint-unsigned-handling-mode": mode})
        t = TableInfo(f"db{uuid.uuid4().hex[:6]}", "u", [Column("id", "bigint", nullable=False, primary_key=True),
                                                         Column("big", "bigint unsigned", nullable=True)],
                      [Index("PRIMARY", ["id"], primary=True, unique=True)])
        [m] = DebeziumAvroEncoder(cfg, reg).encode(Event(kind=Kind.INSERT, commit_ts=5 << 18, table=t,
                                                         after={"id": 1, "big": big}))
        dec = DebeziumAvroDecoder(cfg, reg)
        dec.remember(t)
        [ev] = dec.decode(m.value, m.key)
        assert ev.after["big"] == big
        assert ev.table.by_name["big"].mysql_type == "bigint unsigned"


def test_ddl_and_watermarks_only_with_the_extension_and_avro_enable_watermark(schema_registry_url):
    """TestDebeziumConfluentAvroEncodeDDLEvent / ...EncodeCheckpointEvent / ...DoesNotEncodeCheckpointEventByDefault
    (encoder.go): nothing without enable-tidb-extension and avro-enable-watermark; with both, the DDL and the
    checkpoint decode back. Their subjects are the record names (avro.go debeziumAvroSubject with no topic)."""
    reg = SchemaRegistry(schema_registry_url)
    t = foo(f"db{uuid.uuid4().hex[:6]}")
    ddl = Event(kind=Kind.DDL, commit_ts=7 << 18, table=t, ddl_type="ActionCreateTable",
                query=f"CREATE TABLE `{t.schema}`.`foo` (id int primary key)")
    mark = Event(kind=Kind.WATERMARK, commit_ts=100)
    base = {"schema-registry": schema_registry_url, "cluster-id": "dbserver1"}
    for opts in ({}, {"enable-tidb-extension": "true"}, {"avro-enable-watermark": "true"}):
        enc = DebeziumAvroEncoder(build_config("debezium-avro", {**base, **opts}), reg)
        assert enc.encode(ddl) == [] and enc.encode(mark) == []
    cfg = build_config("debezium-avro", {**base, "enable-tidb-extension": "true", "avro-enable-watermark": "true"})
    enc, dec = DebeziumAvroEncoder(cfg, reg), DebeziumAvroDecoder(cfg, reg)
    [m] = enc.encode(ddl)
    assert m.key[0] == 0 and m.value[0] == 0
    [got] = dec.decode(m.value, m.key)
    assert got.kind is Kind.DDL and got.commit_ts == ddl.commit_ts and got.query == ddl.query
    assert (got.table.schema, got.table.table) == (t.schema, "foo")
    text = read(reg, m.value)[0]
    assert '"name":"SchemaChangeValue","namespace":"io.debezium.connector.mysql"' in text
    assert f'"name":"Source","namespace":"dbserver1.{t.schema}"' in text
    assert reg.register("io.debezium.connector.mysql.SchemaChangeValue", text) == struct.unpack(">I", m.value[1:5])[0]
    [w] = enc.encode(mark)
    [got] = dec.decode(w.value, w.key)
    assert got.kind is Kind.WATERMARK and got.commit_ts == 100
    ktext = read(reg, w.key)[0]
    assert ktext == ('{"connect.name":"dbserver1.watermark.Key","fields":[],"name":"Key",'
                     '"namespace":"dbserver1.watermark","type":"record"}')
    assert reg.register("dbserver1.watermark.Key", ktext) == struct.unpack(">I", w.key[1:5])[0]


def test_logical_types_of_confluents_avro_converter(schema_registry_url):
    """A real Debezium MySQL connector behind Confluent's AvroConverter, in Debezium's default precise decimal mode
    and Kafka Connect's temporal types: the Avro schema says `logicalType` (decimal, date, timestamp-millis) beside
    `connect.name`, and an Avro reader applying them hands back Decimals and dates. Written here by fastavro from
    Python Decimal / date / datetime values, as any Avro writer would."""
    import datetime as dt
    from decimal import Decimal

    ns = f"dbserver1.db{uuid.uuid4().hex[:6]}.t"
    value = {"type": "record", "name": "Value", "namespace": ns, "connect.name": f"{ns}.Value", "fields": [
        {"name": "id", "type": "int"},
        {"name": "price", "default": None, "type": ["null", {
            "type": "bytes", "scale": 2, "precision": 10, "connect.version": 1, "logicalType": "decimal",
            "connect.parameters": {"scale": "2", "connect.decimal.precision": "10"},
            "connect.name": "org.apache.kafka.connect.data.Decimal"}]},
        {"name": "day", "default": None, "type": ["null", {"type": "int", "connect.version": 1, "logicalType": "date",
                                                           "connect.name": "org.apache.kafka.connect.data.Date"}]},
        {"name": "at", "default": None, "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]}]}
    source = {"type": "record", "name": "Source", "namespace": "io.debezium.connector.mysql", "fields": [
        {"name": n, "type": t} for n, t in (("version", "string"), ("connector", "string"), ("name", "string"),
                                            ("ts_ms", "long"), ("db", "string"), ("table", ["null", "string"]),
                                            ("file", "string"), ("pos", "long"), ("row", "int"))]}
    envelope = {"type": "record", "name": "Envelope", "namespace": ns, "connect.name": f"{ns}.Envelope", "fields": [
        {"name": "before", "type": ["null", value], "default": None},
        {"name": "after", "type": ["null", "Value"], "default": None},
        {"name": "source", "type": source}, {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None}]}
    key = {"type": "record", "name": "Key", "namespace": ns, "fields": [{"name": "id", "type": "int"}]}
    reg = SchemaRegistry(schema_registry_url)

    def framed(subject: str, schema: dict, datum: dict) -> bytes:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), datum)
        return b"\0" + struct.pack(">I", reg.register(subject, json.dumps(schema))) + buf.getvalue()

    db = ns.split(".")[1]
    rec = {"before": None, "op": "c", "ts_ms": 1,
           "after": {"id": 1, "price": Decimal("-12.34"), "day": dt.date(2023, 11, 30),
                     "at": dt.datetime(2023, 11, 30, 12, 34, 56, 123000, tzinfo=dt.UTC)},
           "source": {"version": "2.4.0.Final", "connector": "mysql", "name": "dbserver1", "ts_ms": 1701347696000,
                      "db": db, "table": "t", "file": "mysql-bin.000005", "pos": 1234, "row": 0}}
    cfg = build_config("debezium-avro", {"schema-registry": schema_registry_url})
    [ev] = DebeziumAvroDecoder(cfg, reg).decode(framed(f"{ns}-value", envelope, rec),
                                                framed(f"{ns}-key", key, {"id": 1}))
    assert ev.after == {"id": 1, "price": "-12.34", "day": "2023-11-30", "at": "2023-11-30 12:34:56.123"}
    assert ev.table.by_name["price"].type.compact_str() == "decimal(10,2)"
