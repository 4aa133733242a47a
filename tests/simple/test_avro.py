"""encoding-format=avro: read back with fastavro and TiCDC's published schema, not with our decoder."""

from __future__ import annotations

import io
import json
from pathlib import Path

import fastavro
import pytest

from changefeed.config import build_config
from changefeed.model import Column, Event, Index, Kind, TableInfo
from changefeed.simple import SimpleDecoder, SimpleEncoder

SCHEMA = fastavro.parse_schema(json.loads(
    (Path(__file__).resolve().parents[2] / "src/changefeed/simple/message.json").read_text()))

T = TableInfo("d", "t", [
    Column("id", "bigint unsigned", nullable=False, primary_key=True),
    Column("i", "int", nullable=True),
    Column("f", "float", nullable=True),
    Column("g", "double", nullable=True),
    Column("ts", "timestamp(3)", nullable=True),
    Column("b", "varbinary(8)", nullable=True),
    Column("s", "varchar(8)", nullable=True),
    Column("e", "enum('x','y')", nullable=True),
    Column("dec", "decimal(5,2)", nullable=True),
], [Index("PRIMARY", ["id"], primary=True, unique=True)], 42, 7)
ROW = {"id": 18446744073709551615, "i": -5, "f": 1.5, "g": 0.1, "ts": "2026-01-02 03:04:05.678", "b": b"\x00\xff",
       "s": "héllo", "e": 2, "dec": "-1.25"}


def read(value: bytes):
    return fastavro.schemaless_reader(io.BytesIO(value), SCHEMA, None, return_record_name=True)


def test_dml_is_the_published_union():
    enc = SimpleEncoder(build_config("simple", {"encoding-format": "avro"}), clock_ms=lambda: 99)
    [m] = enc.encode(Event(kind=Kind.INSERT, commit_ts=(1 << 63) + 5, table=T, after=ROW))
    name, rec = read(m.value)
    assert name == "com.pingcap.simple.avro.Message" and rec["type"] == "DML"
    branch, dml = rec["payload"]
    assert branch == "com.pingcap.simple.avro.DML"
    assert (dml["database"], dml["table"], dml["tableID"], dml["type"]) == ("d", "t", 42, "INSERT")
    assert dml["commitTs"] == (1 << 63) + 5 - (1 << 64)  # Go's int64(uint64)
    assert dml["buildTs"] == 99 and dml["schemaVersion"] == 7 and dml["old"] is None
    data = dml["data"]
    assert data["id"] == ("com.pingcap.simple.avro.UnsignedBigint", {"value": -1})
    assert data["ts"] == ("com.pingcap.simple.avro.Timestamp", {"location": "UTC",
                                                                "value": "2026-01-02 03:04:05.678"})
    assert data["i"] == -5 and data["f"] == pytest.approx(1.5) and data["g"] == 0.1
    assert data["b"] == b"\x00\xff" and data["s"] == "héllo" and data["e"] == 2 and data["dec"] == "-1.25"
    [ev] = SimpleDecoder(build_config("simple", {"encoding-format": "avro"})).decode(
        SimpleEncoder(build_config("simple", {"encoding-format": "avro"})).encode(
            Event(kind=Kind.BOOTSTRAP, table=T))[0].value)
    assert ev.kind is Kind.BOOTSTRAP


def test_round_trip_through_our_decoder():
    cfg = build_config("simple", {"encoding-format": "avro"})
    enc, dec = SimpleEncoder(cfg), SimpleDecoder(cfg)
    [boot] = dec.decode(enc.encode(Event(kind=Kind.BOOTSTRAP, table=T))[0].value)
    assert [c.type.full_str() for c in boot.table.columns] == [c.type.full_str() for c in T.columns]
    after = dict(ROW, i=None)
    [ev] = dec.decode(enc.encode(Event(kind=Kind.UPDATE, commit_ts=9, table=T, before=ROW, after=after))[0].value)
    assert ev.before == ROW and ev.after == after and ev.commit_ts == 9
    [wm] = dec.decode(enc.encode(Event(kind=Kind.WATERMARK, commit_ts=(1 << 64) - 1))[0].value)
    assert wm.commit_ts == (1 << 64) - 1


def test_watermark_and_ddl_records():
    enc = SimpleEncoder(build_config("simple", {"encoding-format": "avro"}), clock_ms=lambda: 5)
    [m] = enc.encode(Event(kind=Kind.WATERMARK, commit_ts=77))
    assert read(m.value)[1] == {"type": "WATERMARK", "payload": ("com.pingcap.simple.avro.Watermark",
                                                                 {"version": 1, "commitTs": 77, "buildTs": 5})}
    [m] = enc.encode(Event(kind=Kind.DDL, commit_ts=3, table=T, query="CREATE TABLE t (id int)",
                           ddl_type="ActionCreateTable"))
    _, rec = read(m.value)
    _, ddl = rec["payload"]
    assert rec["type"] == "DDL" and ddl["type"] == "CREATE" and ddl["preTableSchema"] is None
    _, schema = ddl["tableSchema"]
    assert schema["database"] == "d" and [c["name"] for c in schema["columns"]] == [c.name for c in T.columns]
    dts = {c["name"]: c["dataType"] for c in schema["columns"]}
    assert dts["dec"]["decimal"] == 2 and dts["e"]["elements"] == ["x", "y"] and dts["id"]["unsigned"] is True
    assert dts["s"]["unsigned"] is None  # TiCDC writes unsigned/zerofill only for numeric types


@pytest.mark.parametrize("kind", ["insert", "update", "delete"])
@pytest.mark.parametrize("only_handle", [False, True])
def test_fast_writer_matches_fastavro_byte_for_byte(kind, only_handle):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    cfg = build_config("simple", {"encoding-format": "avro"})
    enc = SimpleEncoder(cfg, clock_ms=lambda: 1234567)
    plan = enc._plan(T)
    ints = st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1)
    rows = st.fixed_dictionaries({
        "id": st.integers(min_value=0, max_value=(1 << 64) - 1), "i": st.none() | ints,
        "f": st.none() | st.floats(width=32, allow_nan=False, allow_infinity=False),
        "g": st.none() | st.floats(allow_nan=False, allow_infinity=False),
        "ts": st.none() | st.just("2026-01-02 03:04:05.678"), "b": st.none() | st.binary(max_size=8),
        "s": st.none() | st.text(max_size=8), "e": st.none() | st.integers(0, 2),
        "dec": st.none() | st.just("-1.25")})

    @settings(max_examples=60, deadline=None)
    @given(rows, rows, st.integers(min_value=0, max_value=(1 << 64) - 1))
    def check(before, after, ts):
        ev = Event(kind=Kind(kind), commit_ts=ts, table=T, before=None if kind == "insert" else before,
                   after=None if kind == "delete" else after)
        fast = enc._row_value(ev, plan, only_handle, None)
        assert fast == enc._row_value_reference(ev, plan, only_handle, None)

    check()


def test_a_bit_value_as_ticdc_writes_it():
    """ticdc's Avro encoder writes a BIT value as its decimal text in the union's string branch (TestEncoderOtherTypes:
    b'1000001' as "65"), tiflow's as a long: both read back."""
    bits = TableInfo("d", "b", [Column("id", "int", nullable=False, primary_key=True), Column("d", "bit(64)")],
                     [Index("PRIMARY", ["id"], primary=True, unique=True)], 43, 1)
    cfg = build_config("simple", {"encoding-format": "avro"})
    dec = SimpleDecoder(cfg)
    dec.decode(SimpleEncoder(cfg).encode(Event(kind=Kind.BOOTSTRAP, table=bits))[0].value)
    for value in ("65", 65):
        dml = {"version": 1, "database": "d", "table": "b", "tableID": 43, "type": "INSERT", "commitTs": 10,
               "buildTs": 1, "schemaVersion": 1, "claimCheckLocation": None, "handleKeyOnly": None, "checksum": None,
               "data": {"id": 1, "d": value}, "old": None}
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, SCHEMA, ("com.pingcap.simple.avro.Message", {
            "type": "DML", "payload": ("com.pingcap.simple.avro.DML", dml)}))
        [ev] = dec.decode(buf.getvalue())
        assert ev.after == {"id": 1, "d": 65}
