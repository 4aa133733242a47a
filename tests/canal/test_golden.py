"""canal-json against the spec's own examples (tests/canal/golden/README.md says where each comes from)."""

from __future__ import annotations

import base64
from pathlib import Path

import orjson
import pytest

from changefeed.canal import CanalJSONDecoder, CanalJSONEncoder
from changefeed.errors import DecodeError
from changefeed.model import Kind
from tests.conftest import load_events, load_json

GOLDEN = Path(__file__).parent / "golden"
TS_MS = 1639633142960


def encode_all(cfg, name: str, clock: int = TS_MS) -> list[bytes]:
    enc = CanalJSONEncoder(cfg, clock_ms=lambda: clock)
    out = []
    for ev in load_events(GOLDEN / name):
        out.extend(m.value for m in enc.encode(ev))
    return out


def keys_in_order(raw: bytes) -> list[str]:
    return list(orjson.loads(raw).keys())


def test_watermark_is_byte_identical_to_spec(cfg):
    expected = load_json(GOLDEN / "spec_watermark.json")
    [got] = encode_all(cfg(enable_tidb_extension="true"), "spec_watermark.events.jsonl", clock=expected["ts"])
    # the spec prints it spaced; TiCDC writes compact JSON with the same field order
    assert got == orjson.dumps(expected)


def test_watermark_needs_the_extension(cfg):
    assert encode_all(cfg(), "spec_watermark.events.jsonl") == []


def test_ddl_matches_spec(cfg):
    expected = load_json(GOLDEN / "spec_ddl.json")
    [got] = encode_all(cfg(enable_tidb_extension="true"), "spec_ddl.events.jsonl", clock=expected["ts"])
    msg = orjson.loads(got)
    assert keys_in_order(got) == list(expected.keys())
    assert msg["es"] == expected["_tidb"]["commitTs"] >> 18  # the rule; the spec's example es is hand-edited
    assert {k: v for k, v in msg.items() if k != "es"} == {k: v for k, v in expected.items() if k != "es"}


def test_ddl_without_extension_has_no_tidb_field(cfg):
    [got] = encode_all(cfg(), "spec_ddl.events.jsonl")
    assert "_tidb" not in orjson.loads(got)


def test_insert_matches_spec(cfg):
    expected = load_json(GOLDEN / "spec_insert_tp_int.json")
    got = encode_all(cfg(enable_tidb_extension="true"), "spec_tp_int.events.jsonl", clock=expected["ts"])[0]
    msg = orjson.loads(got)
    # DML: TiCDC's hand-written writer puts old before data (the spec's example is struct order)
    order = list(expected.keys())
    order.remove("old")
    order.insert(order.index("data"), "old")
    assert keys_in_order(got) == order
    assert msg["es"] == expected["_tidb"]["commitTs"] >> 18
    assert {k: v for k, v in msg.items() if k != "es"} == {k: v for k, v in expected.items() if k != "es"}
    # column order inside data follows the table, not the alphabet
    assert list(msg["data"][0]) == ["id", "c_tinyint", "c_smallint", "c_mediumint", "c_int", "c_bigint"]


def test_update_old_has_all_columns_by_default(cfg):
    expected = load_json(GOLDEN / "spec_update_tp_int.json")
    got = orjson.loads(encode_all(cfg(), "spec_tp_int.events.jsonl")[1])
    assert got["type"] == "UPDATE"
    assert got["data"] == expected["data"]
    assert got["old"] == expected["old"]


def test_update_old_only_changed_columns_like_official_canal(cfg):
    official = load_json(GOLDEN / "canal_official_update_tp_int.json")
    for c in (cfg(only_output_updated_columns="true"), cfg(content_compatible="true")):
        got = orjson.loads(encode_all(c, "spec_tp_int.events.jsonl")[1])
        assert got["old"] == official["old"]
        assert got["data"] == official["data"]


def test_delete_has_null_old_and_data_image(cfg):
    expected = load_json(GOLDEN / "spec_delete_tp_int.json")
    got = orjson.loads(encode_all(cfg(), "spec_tp_int.events.jsonl")[2])
    assert got["type"] == "DELETE"
    assert got["old"] is None
    assert got["data"] == expected["data"]


def test_mysql_type_short_and_content_compatible(cfg):
    spec = load_json(GOLDEN / "spec_mysqltype_t.json")
    got = orjson.loads(encode_all(cfg(), "spec_mysqltype_t.events.jsonl")[0])
    assert got["mysqlType"] == spec["ticdc"]
    full = orjson.loads(encode_all(cfg(content_compatible="true"), "spec_mysqltype_t.events.jsonl")[0])
    # TiDB prints decimal(10,4) where Canal prints decimal(10, 4); every other entry is identical
    expected = dict(spec["canal_official"], c_decimal="decimal(10,4)", id="int(11)")
    assert full["mysqlType"] == expected


def test_binary_escaping_example(cfg):
    [raw] = encode_all(cfg(), "spec_mysqltype_t.events.jsonl")
    assert b'"c_varbinary":"\\u0005\\u0007\\n\\u000f$2+cx\\u003c\\u0026\xc3\xbf\xc3\xbe-7F"' in raw
    # the decoder turns the characters back into the same 16 bytes
    [ev] = CanalJSONDecoder(cfg()).decode(raw)
    assert ev.after["c_varbinary"] == bytes([5, 7, 10, 15, 36, 50, 43, 99, 120, 60, 38, 255, 254, 45, 55, 70])
    # binary(16) keeps its zero padding, as stored
    assert ev.after["c_binary"] == b"abc" + b"\0" * 13


@pytest.mark.parametrize("name", ["spec_insert_tp_int.json", "canal_official_update_tp_int.json",
                                  "spec_delete_tp_int_pre_v5_4.json"])
def test_decoder_reads_spec_and_official_messages(cfg, name):
    raw = (GOLDEN / name).read_bytes()
    [ev] = CanalJSONDecoder(cfg()).decode(raw)
    full = {"id": 2, "c_tinyint": 127, "c_smallint": 32767, "c_mediumint": 8388607, "c_int": 2147483647,
            "c_bigint": 9223372036854775807}
    after_update = dict(full, c_int=0, c_tinyint=0)
    if ev.kind is Kind.INSERT:
        assert ev.after == full
        assert ev.commit_ts == 429918007904436226
    elif ev.kind is Kind.UPDATE:
        assert ev.after == after_update
        assert ev.before == full  # unchanged columns filled in from data
        assert ev.commit_ts == 1639633141221 << 18  # no _tidb: only es is known
    else:
        assert ev.kind is Kind.DELETE
        assert ev.before == after_update and ev.after is None
    assert ev.table.pk_names == ["id"]
    # the column order is data's key order (the spec prints keys sorted; TiCDC writes table order)
    assert [c.name for c in ev.table.columns] == list(orjson.loads(raw)["data"][0])


def test_decoder_reads_full_types_of_official_canal(cfg):
    spec = load_json(GOLDEN / "spec_mysqltype_t.json")
    msg = {"id": 0, "database": "test", "table": "t", "pkNames": ["id"], "isDdl": False, "type": "INSERT",
           "es": 1, "ts": 1, "sql": "", "sqlType": {}, "mysqlType": spec["canal_official"], "old": None,
           "data": [{"id": "1", "c_decimal": "123.4560", "c_char": "abc", "c_varchar": "abc",
                     "c_binary": "abc" + "\u0000" * 13, "c_varbinary": "\u00ff", "c_enum": "a", "c_set": "a,b",
                     "c_bit": "65"}]}
    [ev] = CanalJSONDecoder(cfg()).decode(orjson.dumps(msg))
    t = ev.table
    assert t.by_name["c_decimal"].type.compact_str() == "decimal(10,4)"
    assert t.by_name["c_enum"].type.elements == ("a", "b", "c")
    # official Canal writes enum/set by name; with the elements known they become index and bitmask
    assert ev.after["c_enum"] == 1 and ev.after["c_set"] == 3
    assert ev.after["c_varbinary"] == b"\xff" and ev.after["c_bit"] == 65
    assert base64.b64encode(ev.after["c_binary"]) == base64.b64encode(b"abc" + b"\0" * 13)


def test_a_watermark_of_zero_has_an_empty_tidb_object_and_reads_back():
    """Go's `omitempty` drops `watermarkTs` when it is 0: `"_tidb":{}`, which TiCDC's decoder reads as 0."""
    msg = {"id": 0, "database": "", "table": "", "pkNames": None, "isDdl": False, "type": "TIDB_WATERMARK",
           "es": 0, "ts": 1, "sql": "", "sqlType": None, "mysqlType": None, "data": None, "old": None, "_tidb": {}}
    [ev] = CanalJSONDecoder().decode(orjson.dumps(msg))
    assert ev.kind is Kind.WATERMARK and ev.commit_ts == 0


def _official(etype: str, sql: str = "", **kw) -> bytes:
    """A message as official Canal's flat-message producer writes one that holds no row (FlatMessage fields)."""
    msg = {"data": None, "database": "test", "es": 1639633094000, "id": 7, "isDdl": False, "mysqlType": None,
           "old": None, "pkNames": None, "sql": sql, "sqlType": None, "table": "t", "ts": 1639633094670,
           "type": etype, **kw}
    return orjson.dumps(msg)


@pytest.mark.parametrize("raw", [
    # MariaDB's annotate-rows / MySQL's rows-query event: the statement, its rows in their own messages
    _official("QUERY", "insert into t values (1, 'a')"),
    _official("XACOMMIT"), _official("XAROLLBACK"),  # an XA transaction's end (LogEventConvert)
])
def test_official_canal_messages_without_rows_are_no_change(cfg, raw):
    assert CanalJSONDecoder(cfg()).decode(raw) == []


def test_official_canal_statement_dml_is_refused_with_the_reason(cfg):
    """A DML read from a STATEMENT or MIXED format binlog carries its statement, not its rows: nothing to apply,
    so it is refused (a dead letter with the reason), never taken for a change with no rows."""
    with pytest.raises(DecodeError, match="binlog_format=ROW"):
        CanalJSONDecoder(cfg()).decode(_official("INSERT", "insert into t values (1, 'a')"))
