"""--protocol debezium-avro against a real schema registry (Apicurio's Confluent API)."""

from __future__ import annotations

import io
import json
import struct
import uuid

import fastavro

from changefeed.avro import SchemaRegistry
from changefeed.config import build_config
from changefeed.debezium.avro import DebeziumAvroDecoder, DebeziumAvroEncoder, connect_to_avro
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


def read(reg: SchemaRegistry, payload: bytes):
    sid = struct.unpack(">I", payload[1:5])[0]
    schema = json.loads(reg.schema(sid))
    return schema, fastavro.schemaless_reader(io.BytesIO(payload[5:]), fastavro.parse_schema(schema), None)


def test_connect_schema_to_avro_like_avrodata():
    assert connect_to_avro({"type": "int16", "optional": True, "field": "x"}) == [
        "null", {"type": "int", "connect.type": "int16"}]
    assert connect_to_avro({"type": "int32", "optional": False, "name": "io.debezium.time.Date", "version": 1}) == {
        "type": "int", "connect.name": "io.debezium.time.Date", "connect.version": 1}


def test_envelope_in_confluent_avro(schema_registry_url):
    reg = SchemaRegistry(schema_registry_url)
    cfg = build_config("debezium-avro", {"schema-registry": schema_registry_url})
    t = table()
    [m] = DebeziumAvroEncoder(cfg, reg).encode(Event(kind=Kind.INSERT, commit_ts=5 << 18, table=t, after=ROW))
    assert m.topic == f"default.{t.schema}.orders"
    vschema, val = read(reg, m.value)
    assert (vschema["name"], vschema["namespace"]) == ("Envelope", f"default.{t.schema}.orders")
    assert val["op"] == "c" and val["before"] is None
    after = val["after"]
    assert after["id"] == 7 and after["amount"] == 12.5 and after["small"] == -3 and after["status"] == "paid"
    assert after["flags"] == bytes([0xBC, 0x0A])  # io.debezium.data.Bits: little-endian
    assert after["created"] == 1767323045123456  # MicroTimestamp
    assert val["source"]["commit_ts"] == 5 << 18 and val["source"]["connector"] == "TiCDC"
    kschema, key = read(reg, m.key)
    assert key == {"id": 7} and kschema["name"] == "Key"


def test_round_trip(schema_registry_url):
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
                assert row["status"] == want["status"] and row["small"] == -3


def test_a_later_decoder_told_the_ddl_reads_bigint_unsigned_whole(schema_registry_url):
    """A consumer decodes a partition's rows in a later micro-batch than their CREATE TABLE, with the definition
    from its schema store (`remember`): BIGINT UNSIGNED travels as Connect int64, 2^64-1 as -1, and only the DDL
    says it is unsigned. (TiCDC's consumer keeps the table info for the same reason.)"""
    reg = SchemaRegistry(schema_registry_url)
    cfg = build_config("debezium-avro", {"schema-registry": schema_registry_url})
    t = TableInfo(f"db{uuid.uuid4().hex[:6]}", "u", [Column("id", "bigint", nullable=False, primary_key=True),
                                                     Column("big", "bigint unsigned", nullable=True)],
                  [Index("PRIMARY", ["id"], primary=True, unique=True)])
    [m] = DebeziumAvroEncoder(cfg, reg).encode(Event(kind=Kind.INSERT, commit_ts=5 << 18, table=t,
                                                     after={"id": 1, "big": (1 << 64) - 1}))
    dec = DebeziumAvroDecoder(cfg, reg)
    dec.remember(t)
    [ev] = dec.decode(m.value, m.key)
    assert ev.after["big"] == (1 << 64) - 1
    assert ev.table.by_name["big"].mysql_type == "bigint unsigned"


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
