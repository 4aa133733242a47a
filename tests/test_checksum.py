"""Row-level checksums (`[integrity] integrity-check-level = "correctness"`): the algorithm and its wiring.

Where the golden values come from. Neither TiCDC (pingcap/tiflow, pingcap/ticdc) nor TiDB has a test with
a whole-row checksum *number* in it: TiCDC's tests compare its encoder with its decoder
(simple/encoder_test.go TestEncodeDMLEnableChecksum, avro_test.go TestAvroEncode4EnableChecksum only check
that the fields exist), and TiDB's TestRowChecksum asserts `Checksum() == crc32.ChecksumIEEE(Encode())`.
What TiDB does pin is each column's bytes: pkg/util/rowcodec/rowcodec_test.go TestColumnEncode lists, per
type, the bytes `appendDatumForChecksum` must give; those vectors are COLUMN_VECTORS below, byte for byte.
The row checksums are then computed by hand: the column bytes written out literally (hex, from the rules in
rowcodec/common.go and tiflow pkg/sink/codec/common/verify_checksum.go) and their CRC-32/IEEE taken with the
bitwise reference below (not with zlib, which the module uses), whose check value for "123456789" is the
standard 0xCBF43926. The numbers are literals; none comes from our encoder.
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from pathlib import Path

import fastavro
import orjson
import pytest

from changefeed.avro import AvroDecoder, AvroEncoder
from changefeed.checksum import column_bytes, event_checksum, row_checksum, timestamp_utc
from changefeed.config import ConfigError, build_config
from changefeed.errors import DecodeError
from changefeed.model import Column, Event, Index, Kind, RowChecksum, TableInfo
from changefeed.mysqltypes import ColumnType
from changefeed.simple import SimpleDecoder, SimpleEncoder
from changefeed.sinkconfig import load_changefeed_toml, resolve


def crc32_reference(data: bytes, crc: int = 0) -> int:
    """CRC-32/IEEE (reflected polynomial 0xEDB88320), bit by bit: Go's crc32.Update(crc, IEEETable, data)."""
    crc ^= 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def u64(v: int) -> bytes:
    return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)


def length_value(b: bytes) -> bytes:
    return struct.pack("<I", len(b)) + b


def test_the_crc_is_crc32_ieee():
    assert crc32_reference(b"123456789") == 0xCBF43926
    assert zlib.crc32(b"123456789") == 0xCBF43926
    # crc32.Update column after column is the CRC of the concatenation (TiDB's TestRowChecksum)
    assert crc32_reference(b"456789", crc32_reference(b"123")) == 0xCBF43926


# TiDB pkg/util/rowcodec/rowcodec_test.go TestColumnEncode: (type, datum, expected bytes)
COLUMN_VECTORS = [
    ("tinyint", 0, u64(0)),
    ("tinyint", 42, u64(42)),
    ("tinyint", -2, u64(-2)),
    ("tinyint", -128, u64(-128)),
    ("tinyint unsigned", 255, u64(255)),
    ("smallint", -32768, u64(-32768)),
    ("smallint unsigned", 65535, u64(65535)),
    ("int", -2147483648, u64(-2147483648)),
    ("int unsigned", 4294967295, u64(4294967295)),
    ("bigint", -(1 << 63), u64(-(1 << 63))),
    ("bigint", (1 << 63) - 1, u64((1 << 63) - 1)),
    ("bigint unsigned", (1 << 64) - 1, b"\xff" * 8),
    ("mediumint", -(1 << 23), u64(-(1 << 23))),
    ("mediumint unsigned", (1 << 24) - 1, u64((1 << 24) - 1)),
    ("year", 2023, u64(2023)),
    ("varchar(10)", "foo", b"\x03\x00\x00\x00foo"),
    ("varchar(10)", "", b"\x00\x00\x00\x00"),
    ("varbinary(10)", b"foo", b"\x03\x00\x00\x00foo"),
    ("char(3)", "foo", b"\x03\x00\x00\x00foo"),
    ("binary(3)", b"foo", b"\x03\x00\x00\x00foo"),
    ("text", "foo", b"\x03\x00\x00\x00foo"),
    ("blob", b"", b"\x00\x00\x00\x00"),
    ("longtext", "foo", b"\x03\x00\x00\x00foo"),
    ("mediumblob", b"foo", b"\x03\x00\x00\x00foo"),
    ("tinytext", "", b"\x00\x00\x00\x00"),
    # float: Float64bits(float64(float32(3.14))); NaN and ±Inf as 0
    ("float", 3.14, struct.pack("<Q", 0x40091EB860000000)),
    ("float", float("nan"), u64(0)),
    ("float", float("inf"), u64(0)),
    ("float", float("-inf"), u64(0)),
    ("double", 3.14, struct.pack("<Q", 0x40091EB851EB851F)),
    ("double", float("nan"), u64(0)),
    ("double", float("-inf"), u64(0)),
    ("enum('a','b','c')", 0b010, u64(0b010)),
    ("set('a','b','c')", 0b101, u64(0b101)),
    ("bit(16)", 0x1234, u64(0x1234)),
    ("bit(64)", (1 << 64) - 1, u64((1 << 64) - 1)),
    ("time(6)", "08:07:00.123456", length_value(b"08:07:00.123456")),
    ("time", "00:00:00", length_value(b"00:00:00")),
    ("decimal(10,3)", "0.000", length_value(b"0.000")),
    ("decimal(10,2)", "3.14", length_value(b"3.14")),
    ("decimal(10,1)", "-1.2", length_value(b"-1.2")),
    ("decimal(12,6)", "-999999.999999", length_value(b"-999999.999999")),
    ("date", "2023-01-02", length_value(b"2023-01-02")),
    ("date", "0000-00-00", length_value(b"0000-00-00")),
    ("datetime(6)", "9999-12-31 23:59:59.999999", length_value(b"9999-12-31 23:59:59.999999")),
    ("datetime", "0000-00-00 00:00:00", length_value(b"0000-00-00 00:00:00")),
    ("timestamp", "0000-00-00 00:00:00", length_value(b"0000-00-00 00:00:00")),
    ("json", "null", length_value(b"null")),
    ("json", "42", length_value(b"42")),
    ("json", '{"a": 42, "foo": "bar"}', length_value(b'{"a": 42, "foo": "bar"}')),
    ("geometry", b"\x00\x00\x00\x00\x01", b""),
]


@pytest.mark.parametrize(("mysql_type", "value", "expected"), COLUMN_VECTORS,
                         ids=[f"{t}={v!r}" for t, v, _ in COLUMN_VECTORS])
def test_column_bytes_are_tidbs(mysql_type, value, expected):
    assert column_bytes(ColumnType.parse(mysql_type), value) == expected


@pytest.mark.parametrize("mysql_type", ["tinyint", "double", "varchar(3)", "blob", "timestamp", "json", "decimal",
                                        "enum('a')", "bit(3)", "geometry", "vector"])
def test_null_adds_nothing(mysql_type):
    assert column_bytes(ColumnType.parse(mysql_type), None) == b""


def test_vector_is_its_serialized_float32s():
    # VectorFloat32.SerializeTo: uint32 dimension, then the float32 elements, little-endian
    assert column_bytes(ColumnType.parse("vector"), "[1,2.5]") == bytes.fromhex("02000000" "0000803f" "00002040")
    assert column_bytes(ColumnType.parse("vector"), "[]") == b"\x00\x00\x00\x00"


def test_timestamp_is_taken_in_utc():
    assert timestamp_utc("2023-01-02 03:04:05.678", "Asia/Shanghai") == "2023-01-01 19:04:05.678"
    assert timestamp_utc("2023-01-02 03:04:05", "UTC") == "2023-01-02 03:04:05"
    assert timestamp_utc("0000-00-00 00:00:00", "Asia/Shanghai") == "0000-00-00 00:00:00"
    assert timestamp_utc("2023-07-01 12:00:00.5", "America/New_York") == "2023-07-01 16:00:00.5"
    assert timestamp_utc("2023-01-01 12:00:00", "America/New_York") == "2023-01-01 17:00:00"
    # Go's time.Date in a DST gap / overlap, by hand: 02:30 read as UTC is in EST (-5h), 07:30 UTC is past
    # the switch, so EDT's -4h applies: 06:30 UTC. 01:30 on the fall-back day: 05:30 UTC is still EDT.
    assert timestamp_utc("2023-03-12 02:30:00", "America/New_York") == "2023-03-12 06:30:00"
    assert timestamp_utc("2023-11-05 01:30:00", "America/New_York") == "2023-11-05 05:30:00"
    assert column_bytes(ColumnType.parse("timestamp(3)"), "2023-01-02 03:04:05.678", "Asia/Shanghai") == \
        length_value(b"2023-01-01 19:04:05.678")


T = TableInfo("d", "t", [Column("id", "int", nullable=False, primary_key=True), Column("name", "varchar(20)"),
                         Column("price", "double"), Column("note", "text")],
              [Index("PRIMARY", ["id"], primary=True, unique=True)], 9, 100)
ROW1 = {"id": 1, "name": "foobar", "price": 1.5, "note": None}
# by hand: 01 00 00 00 00 00 00 00 | 06 00 00 00 "foobar" | 00 00 00 00 00 00 f8 3f (1.5) | (NULL: nothing)
ROW1_BYTES = bytes.fromhex("0100000000000000" "06000000666f6f626172" "000000000000f83f")
ROW1_CHECKSUM = 3273421249
ROW2 = {"id": -2, "name": "", "price": float("nan"), "note": None}
ROW2_BYTES = bytes.fromhex("feffffffffffffff" "00000000" "0000000000000000")
ROW2_CHECKSUM = 2312925203


def test_row_checksum_small_rows():
    assert crc32_reference(ROW1_BYTES) == ROW1_CHECKSUM
    assert row_checksum(T, ROW1) == ROW1_CHECKSUM
    assert crc32_reference(ROW2_BYTES) == ROW2_CHECKSUM
    assert row_checksum(T, ROW2) == ROW2_CHECKSUM
    assert row_checksum(T, {}) == 0


WIDE = TableInfo("d", "wide", [
    Column("c_tiny", "tinyint", nullable=False, primary_key=True), Column("c_ubig", "bigint unsigned"),
    Column("c_float", "float"), Column("c_double", "double"), Column("c_dec", "decimal(10,3)"),
    Column("c_date", "date"), Column("c_dt", "datetime(3)"), Column("c_ts", "timestamp(3)"),
    Column("c_time", "time(6)"), Column("c_year", "year"), Column("c_char", "varchar(10)"),
    Column("c_blob", "blob"), Column("c_enum", "enum('y','n')"), Column("c_set", "set('a','b','c')"),
    Column("c_bit", "bit(16)"), Column("c_json", "json"), Column("c_vec", "vector"), Column("c_null", "int"),
], [Index("PRIMARY", ["c_tiny"], primary=True, unique=True)], 11, 200)
WIDE_ROW = {"c_tiny": -2, "c_ubig": (1 << 64) - 1, "c_float": 3.14, "c_double": 3.14, "c_dec": "-12.345",
            "c_date": "2023-01-02", "c_dt": "2023-01-02 03:04:05.678", "c_ts": "2023-01-02 03:04:05.678",
            "c_time": "08:07:00.123456", "c_year": 2023, "c_char": "héllo", "c_blob": b"\x00\x01\xff",
            "c_enum": 2, "c_set": 5, "c_bit": 0x1234, "c_json": '{"a": 42, "foo": "bar"}', "c_vec": "[1,2.5]",
            "c_null": None}
WIDE_COLUMNS = [  # by hand, one line per column, in column order; c_ts in UTC (the row is in Asia/Shanghai)
    "feffffffffffffff", "ffffffffffffffff", "00000060b81e0940", "1f85eb51b81e0940", "070000002d31322e333435",
    "0a000000323032332d30312d3032", "17000000323032332d30312d30322030333a30343a30352e363738",
    "17000000323032332d30312d30312031393a30343a30352e363738", "0f00000030383a30373a30302e313233343536",
    "e707000000000000", "0600000068c3a96c6c6f", "030000000001ff", "0200000000000000", "0500000000000000",
    "3412000000000000", "170000007b2261223a2034322c2022666f6f223a2022626172227d", "020000000000803f00002040", "",
]
WIDE_CHECKSUM = 3359671608


def test_row_checksum_every_type():
    assert [column_bytes(c.type, WIDE_ROW[c.name], "Asia/Shanghai").hex() for c in WIDE.columns] == WIDE_COLUMNS
    assert crc32_reference(bytes.fromhex("".join(WIDE_COLUMNS))) == WIDE_CHECKSUM
    assert row_checksum(WIDE, WIDE_ROW, "Asia/Shanghai") == WIDE_CHECKSUM
    assert row_checksum(WIDE, WIDE_ROW, "UTC") != WIDE_CHECKSUM


def test_event_checksum_per_kind():
    ins = Event(kind=Kind.INSERT, commit_ts=5, table=T, after=ROW1)
    upd = Event(kind=Kind.UPDATE, commit_ts=5, table=T, before=ROW2, after=ROW1)
    dele = Event(kind=Kind.DELETE, commit_ts=5, table=T, before=ROW2)
    assert event_checksum(ins) == RowChecksum(current=ROW1_CHECKSUM, previous=0, version=0)
    assert event_checksum(upd) == RowChecksum(current=ROW1_CHECKSUM, previous=ROW2_CHECKSUM)
    assert event_checksum(dele) == RowChecksum(current=0, previous=ROW2_CHECKSUM)
    # TiCDC writes no checksum when both are 0; a checksum the event came with keeps its version and verdict
    assert event_checksum(Event(kind=Kind.INSERT, table=T, after={"id": None})) is None
    upd.checksum = RowChecksum(current=1, previous=2, version=2, corrupted=False)
    assert event_checksum(upd) == RowChecksum(current=ROW1_CHECKSUM, previous=ROW2_CHECKSUM, version=2)


# ------------------------------------------------------------------------------------------------
# simple protocol
# ------------------------------------------------------------------------------------------------

def simple_pair(fmt: str = "json", **extra: str) -> tuple[SimpleEncoder, SimpleDecoder]:
    opts = {"enable-row-checksum": "true", "encoding-format": fmt, **extra}
    enc = SimpleEncoder(build_config("simple", opts), clock_ms=lambda: 1700000000000)
    dec = SimpleDecoder(build_config("simple", {"encoding-format": fmt}))
    return enc, dec


def bootstrap(enc: SimpleEncoder, dec: SimpleDecoder, t: TableInfo) -> None:
    dec.decode(enc.encode(Event(kind=Kind.BOOTSTRAP, table=t))[0].value)


def test_simple_json_carries_the_checksum_object():
    enc, dec = simple_pair()
    bootstrap(enc, dec, T)
    raw = enc.encode(Event(kind=Kind.INSERT, commit_ts=7, table=T, after=ROW1))[0].value
    # message.go field order: ... schemaVersion, claimCheckLocation, handleKeyOnly, checksum, data, old
    assert b'"schemaVersion":100,"checksum":{"version":0,"corrupted":false,"current":3273421249,"previous":0},' \
           b'"data":' in raw
    [ev] = dec.decode(raw)
    assert ev.after == ROW1 and ev.checksum == RowChecksum(current=ROW1_CHECKSUM)
    # the fast path and the reference path write the same bytes
    plan = enc._plan(T)
    cs = event_checksum(Event(kind=Kind.INSERT, table=T, after=ROW1))
    ev2 = Event(kind=Kind.UPDATE, commit_ts=8, table=T, before=ROW2, after=ROW1)
    cs2 = event_checksum(ev2)
    assert enc._json_fast(ev2, plan, cs2) == enc._row_value_reference(ev2, plan, False, None, cs2)
    assert cs is not None and cs2 is not None and cs2.previous == ROW2_CHECKSUM


def test_simple_without_the_option_writes_no_checksum():
    enc = SimpleEncoder(build_config("simple"), clock_ms=lambda: 1)
    raw = enc.encode(Event(kind=Kind.INSERT, commit_ts=7, table=T, after=ROW1))[0].value
    assert b"checksum" not in raw


@pytest.mark.parametrize("fmt", ["json", "avro"])
def test_simple_round_trip_every_kind_and_type(fmt):
    enc, dec = simple_pair(fmt, **{"time-zone": "Asia/Shanghai"})
    bootstrap(enc, dec, WIDE)
    other = dict(WIDE_ROW, c_char="x", c_null=3)
    events = [Event(kind=Kind.INSERT, commit_ts=7, table=WIDE, after=WIDE_ROW),
              Event(kind=Kind.UPDATE, commit_ts=8, table=WIDE, before=WIDE_ROW, after=other),
              Event(kind=Kind.DELETE, commit_ts=9, table=WIDE, before=other)]
    for ev in events:
        [got] = dec.decode(enc.encode(ev)[0].value)  # the decoder reads the zone from the values' location
        assert got.checksum is not None
        want_cur = WIDE_CHECKSUM if ev.after is WIDE_ROW else row_checksum(WIDE, other, "Asia/Shanghai") \
            if ev.after is not None else 0
        assert got.checksum.current == want_cur
    if fmt == "avro":  # the hand-written DML writer matches fastavro on TiCDC's schema
        plan = enc._plan(WIDE)
        ev = events[1]
        cs = event_checksum(ev, "Asia/Shanghai")
        assert enc._row_value(ev, plan, False, None, cs) == enc._row_value_reference(ev, plan, False, None, cs)
        rec = fastavro.schemaless_reader(io.BytesIO(enc._row_value(ev, plan, False, None, cs)), enc._schema, None)
        assert rec["payload"]["checksum"] == {"version": 0, "corrupted": False, "current": cs.current,
                                              "previous": WIDE_CHECKSUM}


def test_simple_json_tampered_value_is_a_decode_error():
    enc, dec = simple_pair()
    bootstrap(enc, dec, T)
    msg = orjson.loads(enc.encode(Event(kind=Kind.UPDATE, commit_ts=7, table=T, before=ROW2, after=ROW1))[0].value)
    msg["data"]["name"] = "foobaz"
    with pytest.raises(DecodeError, match=r"row checksum mismatch for d.t at commitTs 7: current is 3273421249") \
            as e:
        dec.decode(orjson.dumps(msg))
    assert e.value.field == "checksum.current"
    msg["data"]["name"] = "foobar"
    msg["old"]["id"] = "-3"
    with pytest.raises(DecodeError, match="previous is 2312925203") as e:
        dec.decode(orjson.dumps(msg))
    assert e.value.field == "checksum.previous"
    msg["old"]["id"] = "-2"
    [ev] = dec.decode(orjson.dumps(msg))
    assert ev.checksum == RowChecksum(current=ROW1_CHECKSUM, previous=ROW2_CHECKSUM)
    msg["checksum"]["corrupted"] = True  # TiCDC's own verdict: also never applied
    with pytest.raises(DecodeError, match="marked corrupted") as e:
        dec.decode(orjson.dumps(msg))
    assert e.value.field == "checksum.corrupted"


def test_simple_avro_tampered_value_is_a_decode_error():
    enc, dec = simple_pair("avro")
    bootstrap(enc, dec, T)
    raw = enc.encode(Event(kind=Kind.INSERT, commit_ts=7, table=T, after=ROW1))[0].value
    assert raw.count(b"foobar") == 1
    with pytest.raises(DecodeError, match="row checksum mismatch") as e:
        dec.decode(raw.replace(b"foobar", b"foobaz"))
    assert e.value.field == "checksum.current"


def test_simple_checksum_of_timestamps_follows_the_message_location():
    t = TableInfo("d", "ts", [Column("id", "int", nullable=False, primary_key=True), Column("ts", "timestamp")],
                  [Index("PRIMARY", ["id"], primary=True, unique=True)], 12, 1)
    enc, dec = simple_pair(**{"time-zone": "Asia/Shanghai"})  # the decoder's own time-zone is UTC
    bootstrap(enc, dec, t)
    raw = enc.encode(Event(kind=Kind.INSERT, commit_ts=7, table=t, after={"id": 1, "ts": "2023-01-02 03:04:05"}))
    [ev] = dec.decode(raw[0].value)
    # by hand: 01 00 .. 00 | 13 00 00 00 "2023-01-01 19:04:05"
    want = crc32_reference(u64(1) + length_value(b"2023-01-01 19:04:05"))
    assert ev.checksum is not None and ev.checksum.current == want


def test_simple_handle_key_only_message_is_not_verified(tmp_path: Path):
    big = TableInfo("d", "big", [Column("id", "int", nullable=False, primary_key=True), Column("blob", "longblob")],
                    [Index("PRIMARY", ["id"], primary=True, unique=True)], 9, 1)
    enc, dec = simple_pair(**{"max-message-bytes": "700", "large-message-handle-option": "handle-key-only"})
    bootstrap(enc, dec, big)
    raw = enc.encode(Event(kind=Kind.INSERT, commit_ts=7, table=big, after={"id": 1, "blob": b"x" * 1000}))[0].value
    msg = orjson.loads(raw)
    assert msg["handleKeyOnly"] is True and msg["checksum"]["current"] == row_checksum(big, {"id": 1,
                                                                                            "blob": b"x" * 1000})
    [ev] = dec.decode(raw)
    assert ev.after == {"id": 1}


# ------------------------------------------------------------------------------------------------
# avro protocol
# ------------------------------------------------------------------------------------------------

class MemoryRegistry:
    def __init__(self) -> None:
        self.schemas: list[str] = []

    def register(self, subject: str, schema: str) -> int:
        if schema not in self.schemas:
            self.schemas.append(schema)
        return self.schemas.index(schema) + 1

    def schema(self, schema_id: int) -> str:
        return self.schemas[schema_id - 1]


AVRO_OPTS = {"enable-tidb-extension": "true", "avro-decimal-handling-mode": "string",
             "avro-bigint-unsigned-handling-mode": "string", "enable-row-checksum": "true"}


def avro_pair(**extra: str) -> tuple[AvroEncoder, AvroDecoder, MemoryRegistry]:
    reg = MemoryRegistry()
    cfg = build_config("avro", {**AVRO_OPTS, **extra})
    return AvroEncoder(cfg, reg), AvroDecoder(build_config("avro", {**AVRO_OPTS, **extra}), reg), reg  # type: ignore


def test_avro_value_schema_and_fields():
    enc, dec, reg = avro_pair()
    msg = enc.encode(Event(kind=Kind.INSERT, commit_ts=7, table=T, after=ROW1))[0]
    schema = json.loads(reg.schema(struct.unpack(">I", msg.value[1:5])[0]))
    assert [f["name"] for f in schema["fields"]][-6:] == [
        "_tidb_op", "_tidb_commit_ts", "_tidb_commit_physical_time", "_tidb_row_level_checksum", "_tidb_corrupted",
        "_tidb_checksum_version"]
    assert schema["fields"][-3:] == [{"default": "", "name": "_tidb_row_level_checksum", "type": "string"},
                                     {"default": False, "name": "_tidb_corrupted", "type": "boolean"},
                                     {"default": 0, "name": "_tidb_checksum_version", "type": "int"}]
    rec = fastavro.schemaless_reader(io.BytesIO(msg.value[5:]), fastavro.parse_schema(schema), None)
    assert rec["_tidb_row_level_checksum"] == "3273421249"
    assert rec["_tidb_corrupted"] is False and rec["_tidb_checksum_version"] == 0
    [ev] = dec.decode(msg.value, msg.key)
    assert ev.checksum == RowChecksum(current=ROW1_CHECKSUM)


def test_avro_round_trip_every_type():
    enc, dec, _ = avro_pair(**{"time-zone": "Asia/Shanghai"})
    for ev in (Event(kind=Kind.INSERT, commit_ts=7, table=WIDE, after=WIDE_ROW),
               Event(kind=Kind.UPDATE, commit_ts=8, table=WIDE, before=WIDE_ROW, after=WIDE_ROW)):
        msg = enc.encode(ev)[0]
        [got] = dec.decode(msg.value, msg.key)
        assert got.checksum == RowChecksum(current=WIDE_CHECKSUM)
    msg = enc.encode(Event(kind=Kind.DELETE, commit_ts=9, table=WIDE, before=WIDE_ROW))[0]
    assert msg.value is None  # a tombstone: no value, no checksum (TiCDC skips deletes too)
    [got] = dec.decode(msg.value, msg.key)
    assert got.checksum is None


def test_avro_tampered_value_is_a_decode_error():
    enc, dec, _ = avro_pair()
    msg = enc.encode(Event(kind=Kind.INSERT, commit_ts=7, table=T, after=ROW1))[0]
    assert msg.value.count(b"foobar") == 1
    with pytest.raises(DecodeError, match=r"row checksum mismatch for d.t at commitTs 7: _tidb_row_level_checksum "
                                          r"is 3273421249") as e:
        dec.decode(msg.value.replace(b"foobar", b"foobaz"), msg.key)
    assert e.value.field == "_tidb_row_level_checksum"
    tampered = msg.value.replace(b"3273421249", b"3273421248")
    with pytest.raises(DecodeError) as e:
        dec.decode(tampered, msg.key)
    assert e.value.field == "_tidb_row_level_checksum"


def test_avro_corrupted_row_is_a_decode_error():
    enc, dec, _ = avro_pair()
    ev = Event(kind=Kind.INSERT, commit_ts=7, table=T, after=ROW1,
               checksum=RowChecksum(current=1, version=2, corrupted=True))
    msg = enc.encode(ev)[0]
    with pytest.raises(DecodeError, match="corrupted") as e:
        dec.decode(msg.value, msg.key)
    assert e.value.field == "_tidb_corrupted"


def test_avro_row_checksum_needs_string_modes_and_the_extension():
    with pytest.raises(ConfigError, match="row level checksum"):
        build_config("avro", {"enable-row-checksum": "true", "enable-tidb-extension": "true"})
    with pytest.raises(ConfigError, match="row level checksum"):
        build_config("avro", {**AVRO_OPTS, "enable-tidb-extension": "false"})
    assert build_config("avro", AVRO_OPTS).enable_row_checksum


# ------------------------------------------------------------------------------------------------
# [integrity] in the changefeed TOML
# ------------------------------------------------------------------------------------------------

def test_integrity_correctness_enables_row_checksums(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    import logging

    p = tmp_path / "c.toml"
    p.write_text('[integrity]\nintegrity-check-level = "correctness"\ncorruption-handle-level = "warn"\n')
    assert load_changefeed_toml(p).codec_options["enable-row-checksum"] == "true"
    _, cfg, _ = resolve("kafka://127.0.0.1:9092/t?protocol=simple", p)
    assert cfg.enable_row_checksum
    with pytest.raises(ConfigError, match="row level checksum"):
        resolve("kafka://127.0.0.1:9092/t?protocol=avro&schema-registry=http://r:8081", p)
    _, cfg, _ = resolve("kafka://127.0.0.1:9092/t?protocol=avro&schema-registry=http://r:8081"
                        "&enable-tidb-extension=true&avro-decimal-handling-mode=string"
                        "&avro-bigint-unsigned-handling-mode=string", p)
    assert cfg.enable_row_checksum
    caplog.set_level(logging.WARNING)
    _, cfg, _ = resolve("kafka://127.0.0.1:9092/t?protocol=canal-json", p)
    assert not cfg.enable_row_checksum and "carries no row checksum" in caplog.text
    p.write_text('[integrity]\nintegrity-check-level = "none"\n')
    _, cfg, _ = resolve("kafka://127.0.0.1:9092/t?protocol=simple", p)
    assert not cfg.enable_row_checksum
