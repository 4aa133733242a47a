"""The avro protocol against a real schema registry (Apicurio's Confluent API)."""

from __future__ import annotations

import io
import json
import struct
import uuid
from decimal import Decimal

import fastavro
import pytest

from changefeed.avro import AvroDecoder, AvroEncoder, SchemaRegistry
from changefeed.avro.registry import redact
from changefeed.avro.schema import sanitize
from changefeed.config import ConfigError, build_config
from changefeed.errors import EncodeError
from changefeed.model import Column, Event, Index, Kind, TableInfo


def table(name: str, extra: list[Column] | None = None, version: int = 1) -> TableInfo:
    cols = [
        Column("id", "bigint unsigned", nullable=False, primary_key=True),
        Column("i", "int", nullable=True),
        Column("iu", "int unsigned", nullable=True),
        Column("f", "float", nullable=True),
        Column("d", "decimal(10,3)", nullable=True),
        Column("s", "varchar(20)", nullable=False, default="x"),
        Column("b", "varbinary(8)", nullable=True),
        Column("e", "enum('a','b,c')", nullable=True),
        Column("st", "set('p','q')", nullable=True),
        Column("bit", "bit(12)", nullable=True),
        Column("ts", "timestamp(3)", nullable=True),
        Column("y", "year", nullable=True),
    ] + (extra or [])
    return TableInfo("db-1", name, cols, [Index("PRIMARY", ["id"], primary=True, unique=True)], 10, version)


ROW = {"id": 18446744073709551615, "i": -7, "iu": 4294967295, "f": 1.5, "d": "-12.345", "s": "héllo",
       "b": b"\x00\x01", "e": 2, "st": 3, "bit": 0xABC, "ts": "2026-01-02 03:04:05.678", "y": 2026}


def unique(prefix: str = "t") -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def registry(url: str) -> SchemaRegistry:
    return SchemaRegistry(url, retries=2, backoff_s=0.05)


def read(payload: bytes, reg: SchemaRegistry):
    """Independent of our decoder: the Confluent header, the registry's schema, fastavro."""
    assert payload[0] == 0
    sid = struct.unpack(">I", payload[1:5])[0]
    schema = fastavro.parse_schema(json.loads(reg.schema(sid)))
    return sid, fastavro.schemaless_reader(io.BytesIO(payload[5:]), schema, None)


def test_wire_format_schemas_and_values(schema_registry_url):
    reg = registry(schema_registry_url)
    t = table(unique())
    cfg = build_config("avro", {"enable-tidb-extension": "true"})
    enc = AvroEncoder(cfg, reg)
    ts = 429918007904436226
    [m] = enc.encode(Event(kind=Kind.INSERT, commit_ts=ts, table=t, after=ROW))
    assert m.topic == f"tidb_db-1_{t.table}"
    kid, key = read(m.key, reg)
    vid, val = read(m.value, reg)
    assert key == {"id": -1}  # bigint unsigned in long mode wraps through int64, as in TiCDC
    assert val["i"] == -7 and val["iu"] == 4294967295 and val["f"] == 1.5 and val["d"] == Decimal("-12.345")
    assert val["s"] == "héllo" and val["b"] == b"\x00\x01" and val["e"] == "b,c" and val["st"] == "p,q"
    assert val["bit"] == b"\x0a\xbc" and val["ts"] == "2026-01-02 03:04:05.678" and val["y"] == 2026
    assert (val["_tidb_op"], val["_tidb_commit_ts"], val["_tidb_commit_physical_time"]) == ("c", ts, ts >> 18)
    vschema = json.loads(reg.schema(vid))
    assert vschema["name"] == t.table and vschema["namespace"] == "default.db_1"
    fields = {f["name"]: f for f in vschema["fields"]}
    assert fields["d"]["type"] == ["null", {"type": "bytes", "connect.parameters": {"tidb_type": "DECIMAL"},
                                           "logicalType": "decimal", "precision": 10, "scale": 3}]
    assert fields["s"] == {"default": "x", "name": "s",
                           "type": {"type": "string", "connect.parameters": {"tidb_type": "TEXT"}}}
    assert fields["bit"]["type"][1]["connect.parameters"] == {"length": "12", "tidb_type": "BIT"}
    assert fields["e"]["type"][1]["connect.parameters"]["allowed"] == "a,b\\,c"
    assert fields["iu"]["type"][1]["type"] == "long" and fields["i"]["type"][1]["type"] == "int"
    assert [f["name"] for f in vschema["fields"]][-3:] == ["_tidb_op", "_tidb_commit_ts",
                                                            "_tidb_commit_physical_time"]
    subjects = reg.subjects()
    assert f"tidb_db-1_{t.table}-key" in subjects and f"tidb_db-1_{t.table}-value" in subjects
    # the same table version registers nothing new; the delete is a tombstone
    [d] = enc.encode(Event(kind=Kind.DELETE, commit_ts=ts + 1, table=t, before=ROW))
    assert d.value is None and read(d.key, reg) == (kid, {"id": -1})


def test_handling_modes(schema_registry_url):
    reg = registry(schema_registry_url)
    t = table(unique())
    cfg = build_config("avro", {"avro-decimal-handling-mode": "string", "avro-bigint-unsigned-handling-mode": "string"})
    [m] = AvroEncoder(cfg, reg).encode(Event(kind=Kind.INSERT, commit_ts=1, table=t, after=ROW))
    _, val = read(m.value, reg)
    assert val["id"] == "18446744073709551615" and val["d"] == "-12.345"
    assert "_tidb_op" not in val


def test_round_trip_through_our_decoder(schema_registry_url):
    reg = registry(schema_registry_url)
    t = table(unique())
    cfg = build_config("avro", {"enable-tidb-extension": "true"})
    enc, dec = AvroEncoder(cfg, reg), AvroDecoder(cfg, registry(schema_registry_url))
    after = dict(ROW, i=None, s="")
    [ins] = dec.decode(*reversed([x for x in (lambda m: (m.key, m.value))(enc.encode(
        Event(kind=Kind.INSERT, commit_ts=5 << 18, table=t, after=after))[0])]))
    assert ins.kind is Kind.INSERT and ins.commit_ts == 5 << 18
    assert ins.after == after  # bigint unsigned comes back from its int64 wrap
    m = enc.encode(Event(kind=Kind.UPDATE, commit_ts=6 << 18, table=t, before=ROW, after=after))[0]
    [upd] = dec.decode(m.value, m.key)
    assert upd.kind is Kind.UPDATE and upd.after == after and upd.before == {"id": ROW["id"]}
    m = enc.encode(Event(kind=Kind.DELETE, commit_ts=7 << 18, table=t, before=ROW))[0]
    [dele] = dec.decode(m.value, m.key)
    assert dele.kind is Kind.DELETE and dele.before == {"id": ROW["id"]}


def test_schema_change_registers_a_new_version_and_incompatible_stops(schema_registry_url):
    reg = registry(schema_registry_url)
    name = unique()
    t1 = table(name)
    enc = AvroEncoder(build_config("avro"), reg)
    [m1] = enc.encode(Event(kind=Kind.INSERT, commit_ts=1, table=t1, after=ROW))
    t2 = table(name, [Column("extra", "int", nullable=True)], version=2)  # nullable with default: compatible
    [m2] = enc.encode(Event(kind=Kind.INSERT, commit_ts=2, table=t2, after=dict(ROW, extra=1)))
    assert m1.value[1:5] != m2.value[1:5]
    reg.set_compatibility("BACKWARD", f"tidb_db-1_{name}-value")
    t3 = table(name, [Column("extra", "int", nullable=True), Column("must", "int", nullable=False)], version=3)
    with pytest.raises(EncodeError) as e:
        enc.encode(Event(kind=Kind.INSERT, commit_ts=3, table=t3, after=dict(ROW, extra=1, must=2)))
    msg = str(e.value)
    assert f"db-1.{name}" in msg and f"tidb_db-1_{name}-value" in msg and "refused" in msg


def test_topic_rule_needs_schema_and_table():
    with pytest.raises(ConfigError, match=r"must contain \{schema\} and \{table\}"):
        AvroEncoder(build_config("avro"), SchemaRegistry("http://127.0.0.1:1"), topic="all_changes")


def test_credentials_are_sent_but_never_shown():
    r = SchemaRegistry("https://us%40er:p%3Ass@registry.example:8081/api")
    assert r._auth == "Basic dXNAZXI6cDpzcw=="  # base64("us@er:p:ss")
    assert "p%3Ass" not in repr(r) and "p:ss" not in repr(r) and "us" not in repr(r).split("@")[0][-3:]
    assert redact("https://u:secret@h:1/x") == "https://h:1/x"


def test_transient_failures_are_retried(schema_registry_url):
    sleeps = []
    dead = SchemaRegistry("http://127.0.0.1:1", retries=3, backoff_s=0.01, sleep=sleeps.append)
    with pytest.raises(Exception, match="unavailable after 4 tries"):
        dead.register("s-value", '{"type":"string"}')
    assert sleeps == [0.01, 0.02, 0.04]


def test_sanitize_names():
    assert sanitize("columnNameWith中文") == "columnNameWith__"
    assert sanitize("A.B") == "A_B" and sanitize("1Col") == "_1Col"


def test_watermark_and_ddl_only_with_the_option(schema_registry_url):
    reg = registry(schema_registry_url)
    assert AvroEncoder(build_config("avro", {"enable-tidb-extension": "true"}), reg).encode(
        Event(kind=Kind.WATERMARK, commit_ts=5)) == []
    enc = AvroEncoder(build_config("avro", {"enable-tidb-extension": "true", "avro-enable-watermark": "true"}), reg)
    [w] = enc.encode(Event(kind=Kind.WATERMARK, commit_ts=5))
    assert w.key is None and w.value == b"\x02" + (5).to_bytes(8, "big")
    t = table(unique())
    [d] = enc.encode(Event(kind=Kind.DDL, commit_ts=9, table=t, query="ALTER TABLE x ADD c int",
                           ddl_type="ActionAddColumn"))
    assert d.value[:1] == b"\x01" and json.loads(d.value[1:]) == {
        "query": "ALTER TABLE x ADD c int", "type": 5, "schema": "db-1", "table": t.table, "commitTs": 9}
    dec = AvroDecoder(build_config("avro"), reg)
    assert dec.decode(w.value)[0].commit_ts == 5
    assert dec.decode(d.value)[0].ddl_type == "ActionAddColumn"


def test_a_cut_delete_marker_is_named(schema_registry_url):
    """ticdc's delete with watermark: 0x03 and the 8-byte commit ts; a shorter value is a DecodeError naming the
    value, not a struct error."""
    from changefeed.errors import DecodeError

    reg = registry(schema_registry_url)
    t = table(unique())
    cfg = build_config("avro", {"enable-tidb-extension": "true"})
    m = AvroEncoder(cfg, reg).encode(Event(kind=Kind.DELETE, commit_ts=7 << 18, table=t, before=ROW))[0]
    dec = AvroDecoder(cfg, registry(schema_registry_url))
    [ok] = dec.decode(b"\x03" + struct.pack(">Q", 7 << 18), m.key)
    assert ok.kind is Kind.DELETE and ok.commit_ts == 7 << 18 and ok.before == {"id": ROW["id"]}
    with pytest.raises(DecodeError, match="8-byte commit ts") as e:
        dec.decode(b"\x03\x00\x01", m.key)
    assert e.value.field == "value"


@pytest.mark.parametrize(("text", "raw"), [
    # goavro's toSignedBytes (the version TiCDC pins): the fewest two's-complement bytes; fastavro's own writer
    # gives -2^(8k-1) one byte more: -0.128 as ff 80, -32.768 as ff 80 00
    ("-1.280", b"\xfb\x00"), ("-32.768", b"\x80\x00"), ("-0.128", b"\x80"), ("0.128", b"\x00\x80"),
    ("0.000", b"\x00"), ("-12.345", b"\xcf\xc7"),
])
def test_precise_decimal_bytes_as_goavro_writes_them(schema_registry_url, text, raw):
    reg = registry(schema_registry_url)
    t = table(unique())
    cfg = build_config("avro", {"enable-tidb-extension": "true"})
    [m] = AvroEncoder(cfg, reg).encode(Event(kind=Kind.INSERT, commit_ts=5 << 18, table=t, after=dict(ROW, d=text)))
    schema = json.loads(reg.schema(struct.unpack(">I", m.value[1:5])[0]))
    # read with the logical types dropped: the field's raw bytes
    plain = json.loads(json.dumps(schema).replace('"logicalType": "decimal"', '"x": 0'))
    rec = fastavro.schemaless_reader(io.BytesIO(m.value[5:]), fastavro.parse_schema(plain), None)
    assert rec["d"] == raw
    [back] = AvroDecoder(cfg, registry(schema_registry_url)).decode(m.value, m.key)
    assert Decimal(back.after["d"]) == Decimal(text)


@pytest.mark.parametrize(("col", "value"), [("e", 0), ("e", 3), ("st", 0b100)])
def test_an_enum_or_set_value_outside_its_members_fails_as_in_ticdc(schema_registry_url, col, value):
    """TiCDC's encoder parses the value with TiDB's ParseEnumValue / ParseSetValue, which refuse an index of 0 or past
    the members and bits past them: ErrAvroEncodeFailed."""
    t = table(unique())
    enc = AvroEncoder(build_config("avro", {"enable-tidb-extension": "true"}), registry(schema_registry_url))
    with pytest.raises(EncodeError, match=f"column {col}"):
        enc.encode(Event(kind=Kind.INSERT, commit_ts=5 << 18, table=t, after=dict(ROW, **{col: value})))


def test_float_defaults_in_the_schema_text_as_gos_json_marshal_writes_them():
    """TiCDC registers `json.Marshal` of the schema: a float64 default is written `0`, `1`, `-0`, positionally up to
    1e21 (`100000002004087730000` for FLOAT 1e20, kept as the float32's float64), `0.000001`; not Python's `0.0`."""
    from changefeed.avro.schema import schema_text, value_schema

    t = TableInfo("d", "f", [Column("id", "int", nullable=False, primary_key=True),
                             Column("a", "float", nullable=False, default="0"),
                             Column("b", "float", nullable=False, default="1"),
                             Column("c", "float", nullable=False, default="-0"),
                             Column("e", "float", nullable=False, default="1e20"),
                             Column("g", "double", nullable=False, default="0.000001"),
                             Column("h", "double", nullable=False, default="123456789012345678901")],
                  [Index("PRIMARY", ["id"], primary=True, unique=True)], 1, 1)
    text = schema_text(value_schema(t, build_config("avro", {})))
    for name, go in (("a", "0"), ("b", "1"), ("c", "-0"), ("e", "100000002004087730000"), ("g", "0.000001"),
                     ("h", "123456789012345680000")):
        field = _field_text(text, name)
        assert f'"default":{go},' in field or f'"default":{go}}}' in field, field


def _field_text(text: str, name: str) -> str:
    """The JSON text of one field of a record schema text (Go sorts no keys here: the field's own object)."""
    depth, start = 0, None
    i = text.index(f'"name":"{name}"')
    j = i
    while j > 0:  # back to the field's opening brace
        j -= 1
        if text[j] == "}":
            depth += 1
        elif text[j] == "{":
            if depth == 0:
                start = j
                break
            depth -= 1
    depth, k = 0, start
    while True:
        if text[k] == "{":
            depth += 1
        elif text[k] == "}":
            depth -= 1
            if depth == 0:
                return text[start:k + 1]
        k += 1


@pytest.mark.parametrize("ext", [True, False])
def test_include_before_value_as_ticdc(schema_registry_url, ext):
    """ticdc's TestAvroEncodeIncludeBeforeValue (and ...WithoutTiDBExtension): `_ticdc_before`, a nullable
    `<table>_before` record after the columns, null for an INSERT and the old row for an UPDATE or DELETE; a DELETE
    is then a full value (the old row) with `_tidb_op` "d"; without the extension `_tidb_op` alone is added.
    Read independently (fastavro and the registered schema), then by our decoder."""
    reg = registry(schema_registry_url)
    t = table(unique())
    opts = {"avro-include-before-value": "true", **({"enable-tidb-extension": "true"} if ext else {})}
    cfg = build_config("avro", opts)
    enc, dec = AvroEncoder(cfg, reg), AvroDecoder(cfg, registry(schema_registry_url))
    after = dict(ROW, i=20)
    before = dict(ROW, i=18)
    cases = [(Kind.INSERT, None, before, "c"), (Kind.UPDATE, before, after, "u"), (Kind.DELETE, after, None, "d")]
    for kind, old, new, op in cases:
        [m] = enc.encode(Event(kind=kind, commit_ts=(1024 + len(op)) << 18, table=t, before=old, after=new))
        sid, rec = read(m.value, reg)
        schema = json.loads(reg.schema(sid))
        names = [f["name"] for f in schema["fields"]]
        assert names[len(t.columns)] == "_ticdc_before" and "_tidb_op" in names
        assert ("_tidb_commit_ts" in names) is ext
        field = schema["fields"][len(t.columns)]
        assert field["default"] is None and field["type"][0] == "null"
        assert field["type"][1]["name"] == f"{t.table}_before"
        assert rec["_tidb_op"] == op
        assert (rec["_ticdc_before"] is None) is (kind is Kind.INSERT)
        if kind is not Kind.INSERT:
            assert rec["_ticdc_before"]["i"] == old["i"]
        [ev] = dec.decode(m.value, m.key)
        assert ev.kind is kind
        if kind is Kind.UPDATE:
            assert ev.before == before and ev.after == after
        if kind is Kind.DELETE:
            assert ev.before == after


def test_a_full_delete_value_has_its_old_rows_checksum_verified(schema_registry_url):
    """With avro-include-before-value a DELETE is a full value whose `_tidb_row_level_checksum` is the old row's
    (ticdc TestAvroEncodeDeleteChecksum); ticdc's decoder verifies it as the previous checksum (decoder.go,
    VerifyChecksum): a corrupted or tampered delete is refused as an update is, never applied."""
    from changefeed.checksum import row_checksum
    from changefeed.errors import DecodeError
    from changefeed.model import RowChecksum

    reg = registry(schema_registry_url)
    t = TableInfo(unique(), "t", [Column("id", "int", nullable=False, primary_key=True),
                                 Column("v", "varchar(10)", nullable=True)],
                  [Index("PRIMARY", ["id"], primary=True, unique=True)], 1, 1)
    cfg = build_config("avro", {"enable-tidb-extension": "true", "avro-include-before-value": "true",
                                "enable-row-checksum": "true", "avro-decimal-handling-mode": "string",
                                "avro-bigint-unsigned-handling-mode": "string"})
    enc, dec = AvroEncoder(cfg, reg), AvroDecoder(cfg, registry(schema_registry_url))
    old = {"id": 1, "v": "b"}
    [m] = enc.encode(Event(Kind.DELETE, 5 << 18, table=t, before=old))
    [ev] = dec.decode(m.value, m.key)
    assert ev.kind is Kind.DELETE and ev.before == old
    assert ev.checksum is not None and ev.checksum.previous == row_checksum(t, old) and ev.checksum.current == 0
    # the same delete with another old row under the first one's checksum
    sid, rec = read(m.value, reg)
    rec["v"] = "c"
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(json.loads(reg.schema(sid))), rec)
    with pytest.raises(DecodeError, match="checksum mismatch"):
        dec.decode(m.value[:5] + out.getvalue(), m.key)
    [m] = enc.encode(Event(Kind.DELETE, 6 << 18, table=t, before=old, checksum=RowChecksum(corrupted=True)))
    with pytest.raises(DecodeError, match="corrupted"):
        dec.decode(m.value, m.key)
