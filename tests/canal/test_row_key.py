"""canal-json `output-row-key`: `_tidb.rowkey`, the row's TiKV key in base64, as TiCDC writes it.

Where the expected bytes come from (none from our encoder):
- TiDB's `TestTiDBDecodeKeyFunc` (pingcap/tidb, tests of the `tidb_decode_key` builtin): the record keys
  `74800000000000002B5F72800000000000A5D3` (table_id 43, `_tidb_rowid` / int handle 42451) and
  `74800000000000012B5F72800000000000A5D3` (table_id 299, same handle), i.e. `t{EncodeInt(id)}_r{EncodeInt(h)}`.
- TiCDC's `TestRowKey` (pingcap/ticdc pkg/sink/codec/canal/canal_json_test.go): the same table, the same row and
  the same options (content-compatible, only-output-updated-columns, enable-tidb-extension, output-row-key); it
  expects `_tidb.rowkey == base64.StdEncoding(tablecodec.EncodeRowKeyWithHandle(tableID, kv.IntHandle(id)))`.
- TiCDC's encoder (canal_json_encoder.go): `_tidb` is `commitTs`, then `onlyHandleKey` / `claimCheckLocation`
  for a too-large message, then `rowkey` (easyjson `Base64Bytes`: a nil key is `null`); only with
  enable-tidb-extension; DDL and watermark messages have none; the decoder does not read it.
"""

from __future__ import annotations

import base64
from pathlib import Path

import orjson
import pytest

from changefeed.canal import CanalJSONDecoder, CanalJSONEncoder
from changefeed.codecs import make_encoder
from changefeed.model import Column, Event, Index, Kind, TableInfo
from changefeed.tidbkey import encode_int, int_record_key, row_key
from tests.canal.test_lines import _decode, _encode, _event_lines

# TiDB's TestTiDBDecodeKeyFunc vectors: (table id, handle, key)
KEY_43 = bytes.fromhex("74800000000000002B5F72800000000000A5D3")
KEY_299 = bytes.fromhex("74800000000000012B5F72800000000000A5D3")
HANDLE = 42451
TS = 429918007904436226

# TiCDC's TestRowKey table: `id int primary key auto_increment` and ten integer columns
COLUMNS = [Column("id", "int", nullable=False, primary_key=True, auto_increment=True),
           Column("a", "tinyint"), Column("b", "tinyint unsigned"), Column("c", "smallint"),
           Column("d", "smallint unsigned"), Column("e", "mediumint"), Column("f", "mediumint unsigned"),
           Column("g", "int"), Column("h", "int unsigned"), Column("i", "bigint"), Column("j", "bigint unsigned")]
ROW = {"a": -128, "b": 0, "c": -32768, "d": 0, "e": -8388608, "f": 0, "g": -2147483648, "h": 0,
       "i": -9223372036854775808, "j": 0}


def _table(table_id: int | None = 43, **kw) -> TableInfo:
    return TableInfo("test", "t", list(kw.get("columns", COLUMNS)), list(kw.get("indexes", [
        Index("PRIMARY", ["id"], primary=True, unique=True)])), table_id=table_id)


def _insert(table: TableInfo, handle: int = HANDLE) -> Event:
    return Event(kind=Kind.INSERT, commit_ts=TS, table=table, after={"id": handle, **ROW})


def _tidb(value: bytes) -> dict:
    return orjson.loads(value)["_tidb"]


def _b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


def test_record_keys_match_tidbs_vectors():
    assert int_record_key(43, HANDLE) == KEY_43
    assert int_record_key(299, HANDLE) == KEY_299
    assert len(KEY_43) == 19  # tablecodec.RecordRowKeyLen


def test_encode_int_is_memcomparable_and_wraps_unsigned_handles():
    # codec.EncodeInt: bytes sort as the int64 values do
    values = [-(1 << 63), -42451, -1, 0, 1, HANDLE, (1 << 63) - 1]
    assert sorted(values, key=encode_int) == values
    assert sorted(encode_int(v) for v in values) == [encode_int(v) for v in values]
    # a BIGINT UNSIGNED handle is kv.IntHandle(int64(u)): the same 8 bytes as the int64 of its bits
    assert encode_int((1 << 64) - 1) == encode_int(-1)
    assert encode_int(1 << 63) == encode_int(-(1 << 63))
    with pytest.raises(ValueError):
        encode_int(1 << 64)


@pytest.mark.parametrize(("table_id", "key"), [(43, KEY_43), (299, KEY_299)])
def test_ticdc_test_row_key(cfg, table_id, key):
    """TiCDC's TestRowKey: its table, row and options; rowkey = base64(EncodeRowKeyWithHandle(id, IntHandle))."""
    c = cfg(content_compatible="true", only_output_updated_columns="true", enable_tidb_extension="true",
            output_row_key="true")
    [m] = CanalJSONEncoder(c, clock_ms=lambda: 1).encode(_insert(_table(table_id)))
    tidb = _tidb(m.value)
    assert list(tidb) == ["commitTs", "rowkey"]  # the order TiCDC's hand-written writer uses
    assert tidb == {"commitTs": TS, "rowkey": _b64(key)}
    assert m.value.endswith(b'"_tidb":{"commitTs":%d,"rowkey":"%s"}}' % (TS, _b64(key).encode()))


@pytest.mark.parametrize("kind", [Kind.INSERT, Kind.UPDATE, Kind.DELETE])
@pytest.mark.parametrize("opts", [{}, {"only_output_updated_columns": "true"},
                                  {"delete_only_output_handle_key_columns": "true"}])
def test_every_row_kind_carries_the_key(cfg, kind, opts):
    c = cfg(enable_tidb_extension="true", output_row_key="true", **opts)
    row = {"id": HANDLE, **ROW}
    ev = Event(kind=kind, commit_ts=TS, table=_table(),
               before=None if kind is Kind.INSERT else row,
               after=None if kind is Kind.DELETE else {**row, "a": 5})
    [m] = CanalJSONEncoder(c).encode(ev)
    assert _tidb(m.value) == {"commitTs": TS, "rowkey": _b64(KEY_43)}


def test_nothing_changes_without_the_option_or_the_extension(cfg):
    ev = _insert(_table())
    plain = CanalJSONEncoder(cfg(enable_tidb_extension="true"), clock_ms=lambda: 1).encode(ev)[0].value
    assert _tidb(plain) == {"commitTs": TS}
    # output-row-key=false is the default: the same bytes
    off = CanalJSONEncoder(cfg(enable_tidb_extension="true", output_row_key="false"), clock_ms=lambda: 1)
    assert off.encode(ev)[0].value == plain
    # without the extension TiCDC writes no `_tidb`, so no rowkey either
    bare = CanalJSONEncoder(cfg(), clock_ms=lambda: 1).encode(ev)[0].value
    assert CanalJSONEncoder(cfg(output_row_key="true"), clock_ms=lambda: 1).encode(ev)[0].value == bare
    assert b"_tidb" not in bare and b"rowkey" not in bare


def test_ddl_and_watermark_have_no_row_key(cfg):
    c = cfg(enable_tidb_extension="true", output_row_key="true")
    enc = CanalJSONEncoder(c)
    [ddl] = enc.encode(Event(kind=Kind.DDL, commit_ts=TS, table=_table(), query="CREATE TABLE t (id int)",
                             ddl_type="ActionCreateTable"))
    [wm] = enc.encode(Event(kind=Kind.WATERMARK, commit_ts=TS))
    assert _tidb(ddl.value) == {"commitTs": TS}
    assert _tidb(wm.value) == {"watermarkTs": TS}


@pytest.mark.parametrize(("table", "why"), [
    (_table(None), "no table id"),
    (TableInfo("test", "t", [Column("id", "int"), Column("a", "tinyint")], table_id=43), "no primary key"),
    (TableInfo("test", "t", [Column("id", "int", nullable=False, unique_key=True), Column("a", "tinyint")],
               [Index("u", ["id"], unique=True)], table_id=43), "implicit primary key: still _tidb_rowid"),
    (TableInfo("test", "t", [Column("id", "varchar(10)", nullable=False, primary_key=True), Column("a", "tinyint")],
               [Index("PRIMARY", ["id"], primary=True, unique=True)], table_id=43), "common handle"),
    (TableInfo("test", "t", [Column("id", "int", nullable=False, primary_key=True),
                             Column("a", "tinyint", nullable=False, primary_key=True)],
               [Index("PRIMARY", ["id", "a"], primary=True, unique=True)], table_id=43), "composite primary key"),
])
def test_unknown_handles_are_null(cfg, table, why):
    """Where the event does not hold the key's bytes, `rowkey` is null: what TiCDC writes for an event whose
    RowKey is nil, with the field still in place."""
    c = cfg(enable_tidb_extension="true", output_row_key="true")
    ev = Event(kind=Kind.INSERT, commit_ts=TS, table=table, after={"id": "x" if "common" in why else 1, "a": 2})
    [m] = CanalJSONEncoder(c).encode(ev)
    assert list(_tidb(m.value)) == ["commitTs", "rowkey"]
    assert _tidb(m.value)["rowkey"] is None, why
    assert row_key(table, ev.after) is None


def test_unsigned_bigint_handle(cfg):
    cols = [Column("id", "bigint unsigned", nullable=False, primary_key=True), Column("a", "tinyint")]
    t = _table(43, columns=cols)
    c = cfg(enable_tidb_extension="true", output_row_key="true")
    [m] = CanalJSONEncoder(c).encode(Event(kind=Kind.INSERT, commit_ts=TS, table=t, after={"id": HANDLE, "a": 1}))
    assert _tidb(m.value)["rowkey"] == _b64(KEY_43)
    # above 2^63-1 the handle is the int64 of the same bits, as TiDB stores it
    top = row_key(t, {"id": (1 << 64) - 1, "a": 1})
    assert top == KEY_43[:11] + encode_int(-1)


def test_large_message_options_keep_the_key_last(cfg, tmp_path: Path):
    big = {"id": HANDLE, **ROW, "a": 1}
    cols = [*COLUMNS, Column("blob", "longblob")]
    ev = Event(kind=Kind.INSERT, commit_ts=TS, table=_table(43, columns=cols), after={**big, "blob": b"x" * 8000})
    c = cfg(enable_tidb_extension="true", output_row_key="true", max_message_bytes="4096",
            large_message_handle_option="handle-key-only")
    [m] = CanalJSONEncoder(c).encode(ev)
    assert list(_tidb(m.value).items()) == [("commitTs", TS), ("onlyHandleKey", True), ("rowkey", _b64(KEY_43))]
    c = cfg(enable_tidb_extension="true", output_row_key="true", max_message_bytes="4096",
            large_message_handle_option="claim-check", claim_check_storage_uri=f"file://{tmp_path}")
    [m] = make_encoder(c).encode(ev)
    tidb = _tidb(m.value)
    assert list(tidb) == ["commitTs", "claimCheckLocation", "rowkey"] and tidb["rowkey"] == _b64(KEY_43)
    stored = orjson.loads(Path(tidb["claimCheckLocation"][len("file://"):]).read_bytes())
    assert _tidb(base64.b64decode(stored["value"]))["rowkey"] == _b64(KEY_43)


def test_decoder_ignores_the_key(cfg):
    """TiCDC's decoder reads commitTs, onlyHandleKey and claimCheckLocation from `_tidb`, not rowkey."""
    ev = _insert(_table())
    with_key = CanalJSONEncoder(cfg(enable_tidb_extension="true", output_row_key="true")).encode(ev)[0].value
    [back] = CanalJSONDecoder(cfg(enable_tidb_extension="true")).decode(with_key)
    assert back.kind is Kind.INSERT and back.commit_ts == TS and back.after == ev.after


def test_cli_line_paths_write_the_key(cfg):
    """The CLI's direct line tiers (canal/lines.py, canal/blocks.py) step aside: every line has its rowkey."""
    opts = {"enable_tidb_extension": "true", "output_row_key": "true"}
    events = _event_lines()
    messages = _encode(opts, events, True, cfg)
    assert messages == _encode(opts, events, False, cfg)
    rows = [orjson.loads(orjson.loads(line)["value"]) for line in messages.splitlines()]
    rows = [r for r in rows if r["type"] in ("INSERT", "UPDATE", "DELETE")]
    assert len(rows) > 300 and all(list(r["_tidb"])[-1] == "rowkey" for r in rows)
    assert _decode(opts, messages, True, cfg) == _decode({"enable_tidb_extension": "true"}, messages, False, cfg)


def test_a_partitions_row_is_keyed_by_the_partitions_id(cfg):
    """TiKV keys a partitioned table's rows by the partition's physical id (TiDB's tablecodec): 299 here, while
    the table's own id is 43."""
    c = cfg(enable_tidb_extension="true", output_row_key="true")
    ev = _insert(_table(43))
    ev.physical_table_id = 299
    [m] = CanalJSONEncoder(c).encode(ev)
    assert _tidb(m.value)["rowkey"] == _b64(KEY_299)
    assert row_key(_table(43), {"id": HANDLE, **ROW}, 299) == KEY_299
