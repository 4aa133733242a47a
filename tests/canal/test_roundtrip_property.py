"""Property tests: encode -> decode through canal-json, and event -> line -> event, on generated tables and rows.

The tables cover every type family with boundary values (integer extremes, uint64 max, float32/float64
edges, decimal(65,30), zero dates, ±838:59:59, empty and control-character strings, all 256 byte values,
enum/set with quotes/commas/parentheses in their elements, bit(64), JSON documents) and NULLs.

canal-json is lossy in known ways; `expected_back` below states exactly what a decoder can give back and
why, and every test checks the decoded events against it strictly (types included, -0.0 told from 0.0).
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from changefeed.canal import CanalJSONDecoder, CanalJSONEncoder
from changefeed.config import CodecConfig, build_config
from changefeed.errors import DecodeError
from changefeed.eventline import EventReader, EventWriter, table_to_json
from changefeed.model import Column, Event, Index, Kind, Row, TableInfo
from changefeed.mysqltypes import ColumnType, canonical_float32, tidb_json_text
from changefeed.roundtrip import compare_events
from changefeed.tso import PHYSICAL_SHIFT

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

U64_MAX = (1 << 64) - 1

# =================================================================================================
# Value strategies: datums as the event model holds them (REFERENCE-NOTES §0)
# =================================================================================================


def _ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    edges = sorted({lo, hi, max(lo, min(hi, 0)), max(lo, min(hi, 1)), max(lo, min(hi, -1)), lo + 1, hi - 1})
    return st.one_of(st.sampled_from(edges), st.integers(lo, hi))


SPECIAL_CHARS = ["\x00", "\x01", "\x08", "\x0c", "\t", "\n", "\r", "\x1f", "\x7f", "\x80", "\x9f", "<", ">", "&",
                 "'", '"', "\\", "/", "\u2028", "\u2029", "\ufeff", "\uffff", "é", "中", "😀", "\U0010ffff", " "]
EDGE_STRINGS = ["", " ", "\x00", "<&>", "\u2028\u2029", "😀", "a\\b\"c'", "\r\n\t\b\f", "\x7f\x80\x9f\xff", "null", "0"]
TEXT = st.one_of(st.sampled_from(EDGE_STRINGS), st.text(alphabet=st.sampled_from(SPECIAL_CHARS), max_size=8),
                 st.text(alphabet=st.one_of(st.sampled_from(SPECIAL_CHARS), st.characters(codec="utf-8")),
                         max_size=12))
F32_EDGES = [0.0, -0.0, 3.4028234663852886e38, -3.4028234663852886e38, 1.401298464324817e-45, 1.1754943508222875e-38,
             3.14, 16777216.0, 0.000244140625, 7.038531e-26]
FLOAT32 = st.one_of(st.sampled_from(F32_EDGES), st.floats(width=32, allow_nan=False, allow_infinity=False)).map(
    canonical_float32)
DOUBLE = st.one_of(st.sampled_from([0.0, -0.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
                                    -1.7976931348623157e308, 0.1, 1e21, 1e-7, 0.30000000000000004]),
                   st.floats(allow_nan=False, allow_infinity=False))
BYTES = st.one_of(st.binary(max_size=24), st.just(bytes(range(256))), st.just(b""))


def _decimal(m: int, d: int, unsigned: bool = False) -> st.SearchStrategy[str]:
    def fmt(neg: bool, i: int, f: int) -> str:  # no -0.00: TiDB has none (rounding.py)
        return ("-" if neg and not unsigned and (i or f) else "") + str(i) + (f".{f:0{d}d}" if d else "")

    return st.builds(fmt, st.booleans(), _ints(0, 10 ** (m - d) - 1), _ints(0, 10**d - 1))


def _fraction(fsp: int, us: int) -> str:
    return ("." + f"{us:06d}"[:fsp]) if fsp else ""


def _datetime(fsp: int, lo: dt.datetime, hi: dt.datetime) -> st.SearchStrategy[str]:
    def fmt(v: dt.datetime) -> str:
        return (f"{v.year:04d}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}:{v.second:02d}"
                + _fraction(fsp, v.microsecond))

    return st.one_of(st.sampled_from([lo, hi]), st.datetimes(min_value=lo, max_value=hi)).map(fmt)


TIME_MAX_US = (838 * 3600 + 59 * 60 + 59) * 1_000_000


def _time(fsp: int) -> st.SearchStrategy[str]:
    step = 10 ** (6 - fsp)

    def fmt(us: int) -> str:
        sign = "-" if us < 0 else ""
        us = abs(us)
        s, frac = divmod(us, 1_000_000)
        return f"{sign}{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}" + _fraction(fsp, frac)

    return _ints(-TIME_MAX_US // step, TIME_MAX_US // step).map(lambda n: fmt(n * step))


JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 63), U64_MAX),
                      st.floats(allow_nan=False, allow_infinity=False), TEXT)
JSON_DOC = st.recursive(JSON_LEAF, lambda kids: st.one_of(st.lists(kids, max_size=3),
                                                          st.dictionaries(TEXT, kids, max_size=3)),
                        max_leaves=6).map(tidb_json_text)

ENUM_ELEMENTS = ("a", "B", "it's", "x,y", "(p)", "é", "😀", " sp", 'q"q', "tab\there", "nl\nx")
SET_ELEMENTS = ("a", "b", "C", "d'q", "(p)", "é", "😀", "nl\nx")  # MySQL forbids commas in SET elements


def _q(elements: tuple[str, ...]) -> str:
    return ",".join("'" + e.replace("\\", "\\\\").replace("'", "''").replace("\n", "\\n").replace("\t", "\\t") + "'"
                    for e in elements)


DT_MIN, DT_MAX = dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
TS_MIN, TS_MAX = dt.datetime(1970, 1, 1, 0, 0, 1), dt.datetime(2038, 1, 19, 3, 14, 7, 999999)

# (column name, column type text, datum strategy)
CATALOG: list[tuple[str, str, st.SearchStrategy[Any]]] = [
    ("c_tinyint", "tinyint", _ints(-128, 127)),
    ("c_tinyint_u", "tinyint unsigned", _ints(0, 255)),
    ("c_bool", "tinyint(1)", _ints(-128, 127)),
    ("c_smallint", "smallint", _ints(-32768, 32767)),
    ("c_smallint_u", "smallint(5) unsigned zerofill", _ints(0, 65535)),
    ("c_mediumint", "mediumint", _ints(-(1 << 23), (1 << 23) - 1)),
    ("c_mediumint_u", "mediumint unsigned", _ints(0, (1 << 24) - 1)),
    ("c_int", "int(11)", _ints(-(1 << 31), (1 << 31) - 1)),
    ("c_int_u", "int unsigned", _ints(0, (1 << 32) - 1)),
    ("c_bigint", "bigint", _ints(-(1 << 63), (1 << 63) - 1)),
    ("c_bigint_u", "bigint unsigned", _ints(0, U64_MAX)),
    ("c_float", "float", FLOAT32),
    ("c_float_md", "float(10,3)", FLOAT32),
    ("c_double", "double", DOUBLE),
    ("c_decimal", "decimal(10,4)", _decimal(10, 4)),
    ("c_decimal_max", "decimal(65,30)", _decimal(65, 30)),
    ("c_decimal_u", "decimal(20,0) unsigned", _decimal(20, 0, unsigned=True)),
    ("c_date", "date", st.one_of(st.just("0000-00-00"), st.dates().map(lambda d: f"{d.year:04d}-{d.month:02d}-"
                                                                                f"{d.day:02d}"))),
    ("c_datetime", "datetime", st.one_of(st.just("0000-00-00 00:00:00"), _datetime(0, DT_MIN, DT_MAX))),
    ("c_datetime6", "datetime(6)", _datetime(6, DT_MIN, DT_MAX)),
    ("c_timestamp", "timestamp", _datetime(0, TS_MIN, TS_MAX)),
    ("c_timestamp3", "timestamp(3)", _datetime(3, TS_MIN, TS_MAX)),
    ("c_time", "time", _time(0)),
    ("c_time6", "time(6)", _time(6)),
    ("c_year", "year", st.one_of(st.sampled_from([0, 1901, 2155]), st.integers(1901, 2155))),
    ("c_char", "char(16)", TEXT),
    ("c_varchar", "varchar(255)", TEXT),
    ("c_text", "text", TEXT),
    ("c_longtext", "longtext character set utf8mb4 collate utf8mb4_unicode_ci", TEXT),
    ("ü 列 \"q\" <&>", "varchar(8)", TEXT),  # a column name that needs escaping
    ("c_binary", "binary(16)", st.binary(max_size=16).map(lambda b: b.ljust(16, b"\0"))),
    ("c_binary1", "char(1) character set binary", st.binary(max_size=1).map(lambda b: b.ljust(1, b"\0"))),
    ("c_varbinary", "varbinary(256)", BYTES),
    ("c_blob", "blob", BYTES),
    ("c_enum", f"enum({_q(ENUM_ELEMENTS)})", st.integers(0, len(ENUM_ELEMENTS))),
    ("c_set", f"set({_q(SET_ELEMENTS)})", st.integers(0, (1 << len(SET_ELEMENTS)) - 1)),
    ("c_bit1", "bit", st.integers(0, 1)),
    ("c_bit13", "bit(13)", _ints(0, (1 << 13) - 1)),
    ("c_bit64", "bit(64)", _ints(0, U64_MAX)),
    ("c_json", "json", JSON_DOC),
]
STRATEGY = {name: strat for name, _, strat in CATALOG}


def strategy_for(c: Column) -> st.SearchStrategy[Any]:
    if c.name in STRATEGY:
        return STRATEGY[c.name]
    if c.type.family.value == "int":  # the key columns
        return _ints(*c.type.int_range())
    return TEXT


INT_KEY_TYPES = ["tinyint", "int unsigned", "bigint", "bigint unsigned"]


def test_catalog_covers_every_type_family():
    families = {ColumnType.parse(t).family.value for _, t, _ in CATALOG}
    assert families >= {"int", "float", "decimal", "date", "datetime", "timestamp", "time", "year", "string",
                        "bytes", "enum", "set", "bit", "json"}
    assert ColumnType.parse(dict((n, t) for n, t, _ in CATALOG)["c_enum"]).elements == ENUM_ELEMENTS
    assert ColumnType.parse(dict((n, t) for n, t, _ in CATALOG)["c_set"]).elements == SET_ELEMENTS


# =================================================================================================
# Tables and events
# =================================================================================================


@st.composite
def tables(draw: st.DrawFn) -> TableInfo:
    picked = draw(st.lists(st.sampled_from(range(len(CATALOG))), unique=True, min_size=1, max_size=len(CATALOG)))
    cols = [Column(CATALOG[i][0], CATALOG[i][1], nullable=True) for i in picked]
    key_type = draw(st.sampled_from(INT_KEY_TYPES))
    layout = draw(st.sampled_from(["pk", "composite-pk", "unique-not-null"]))
    pos = draw(st.integers(0, len(cols)))  # the key need not be the first column
    if layout == "pk":
        cols.insert(pos, Column("id", key_type, nullable=False, primary_key=True))
        indexes = [Index("PRIMARY", ["id"], primary=True, unique=True)]
    elif layout == "composite-pk":
        cols.insert(pos, Column("id", key_type, nullable=False))
        cols.append(Column("k", "varchar(32)", nullable=False))
        indexes = [Index("PRIMARY", ["k", "id"], primary=True, unique=True)]
    else:  # no primary key: the handle key is a unique index over NOT NULL columns
        cols.insert(pos, Column("id", key_type, nullable=False, unique_key=True))
        indexes = [Index("uk_id", ["id"], unique=True)]
    schema = draw(st.sampled_from(["test", "数据库", "db-1"]))
    return TableInfo(schema, draw(st.sampled_from(["t", "tp_all", "表 <1>"])), cols, indexes, table_id=42, version=7)


def _row(draw: st.DrawFn, table: TableInfo, base: Row | None = None) -> Row:
    row: Row = {}
    for c in table.columns:
        if base is not None and draw(st.booleans()):
            row[c.name] = base[c.name]  # unchanged in this update
        elif c.nullable is False:
            row[c.name] = draw(strategy_for(c))
        else:
            row[c.name] = draw(st.one_of(st.none(), strategy_for(c)))
    return row


COMMIT_TS = st.one_of(st.sampled_from([0, 1, U64_MAX, (1 << 63), 429918007904436226, (1 << PHYSICAL_SHIFT) - 1]),
                      st.integers(0, U64_MAX))


@st.composite
def row_events(draw: st.DrawFn, table: TableInfo | None = None) -> Event:
    table = table or draw(tables())
    kind = draw(st.sampled_from([Kind.INSERT, Kind.UPDATE, Kind.DELETE]))
    ev = Event(kind=kind, commit_ts=draw(COMMIT_TS), table=table)
    if kind is Kind.INSERT:
        ev.after = _row(draw, table)
    elif kind is Kind.DELETE:
        ev.before = _row(draw, table)
    else:
        ev.before = _row(draw, table)
        ev.after = _row(draw, table, base=ev.before)
    return ev


# =================================================================================================
# What canal-json gives back
# =================================================================================================


def same(a: Any, b: Any) -> bool:
    """Equal, with the same type, and a float's sign kept (0.0 vs -0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return a == b


def assert_rows_same(got: Row | None, want: Row | None, what: str) -> None:
    if want is None or got is None:
        assert got is want, what
        return
    assert list(got) == list(want), f"{what}: columns {list(got)} != {list(want)}"
    for k in want:
        assert same(got[k], want[k]), f"{what}.{k}: {got[k]!r} != {want[k]!r}"


def expected_back(ev: Event, cfg: CodecConfig) -> Event:
    """The event a canal-json decoder can rebuild from what the encoder wrote, loss included."""
    table = ev.table
    assert table is not None
    # Without `_tidb` only `es` (physical milliseconds = commitTs >> 18) is carried: the logical part is lost.
    ts = ev.commit_ts if cfg.enable_tidb_extension else (ev.commit_ts >> PHYSICAL_SHIFT) << PHYSICAL_SHIFT
    out = Event(kind=ev.kind, commit_ts=ts, table=table)
    if ev.kind is Kind.INSERT:
        out.after = dict(ev.after)  # type: ignore[arg-type]
    elif ev.kind is Kind.DELETE:
        before = ev.before or {}
        if cfg.delete_only_output_handle_key_columns:
            # only the handle-key columns are sent for a delete, by design of the option
            out.before = {c.name: before[c.name] for c in table.columns if c.name in table.handle_key}
        else:
            out.before = dict(before)
    else:
        out.after = dict(ev.after)  # type: ignore[arg-type]
        before = dict(ev.before)  # type: ignore[arg-type]
        if cfg.only_output_updated_columns:
            # `old` holds only the columns whose value changed (tiflow compares values, so -0.0 and 0.0 count as
            # unchanged); the decoder fills the others from `data`, so a sign-only float change reads back as
            # the new value.
            for k, v in ev.after.items():  # type: ignore[union-attr]
                if before[k] == v and type(before[k]) is type(v):
                    before[k] = v
        out.before = before
    return out


def check_table(got: TableInfo, orig: TableInfo, cfg: CodecConfig, ev: Event) -> None:
    """canal-json carries column names (in table order), MySQL types and pkNames, nothing else."""
    names = [c.name for c in orig.columns]
    if ev.kind is Kind.DELETE and cfg.delete_only_output_handle_key_columns:
        names = [n for n in names if n in orig.handle_key]
    assert [c.name for c in got.columns] == names
    assert (got.schema, got.table) == (orig.schema, orig.table)
    # pkNames: the primary key columns (their order: see test_pk_names_follow_column_order)
    assert sorted(got.pk_names) == sorted(n for n in orig.pk_names if n in names)
    for g in got.columns:
        o = orig.by_name[g.name]
        if cfg.content_compatible:
            # the full type (TiDB's GetTypeDesc) comes back whole: lengths, scale, fsp, enum/set elements
            assert g.type.full_str() == o.type.full_str()
            assert g.type.elements == o.type.elements
            assert g.type.display_length == o.type.display_length
        else:
            # only the bare type name with unsigned/zerofill: lengths, decimal scale, fsp and elements are lost
            assert g.type.short_str() == o.type.short_str()
            assert g.type.elements == ()
            assert g.type == ColumnType.parse(o.type.short_str())  # i.e. TiDB's defaults: decimal(10,0), bit(1)...
        assert (g.type.name, g.type.unsigned, g.type.zerofill) == (o.type.name, o.type.unsigned, o.type.zerofill)
        # the definition loses nullability (known only for the primary key), defaults, charsets and the
        # auto-increment flag
        assert g.nullable is (False if g.name in got.pk_names else None)
        assert g.default is None and g.charset is None and g.collate is None and not g.auto_increment
        assert not g.unique_key
    # indexes: only the primary key survives; a unique-key handle is not carried
    assert [(i.columns, i.primary) for i in got.indexes] == ([(got.pk_names, True)] if got.pk_names else [])
    assert got.table_id is None and got.version is None


CONFIGS = {
    "default": {},
    "tidb-extension": {"enable-tidb-extension": "true"},
    "content-compatible": {"content-compatible": "true"},
    "only-updated-columns": {"only-output-updated-columns": "true"},
    "delete-handle-key-only": {"delete-only-output-handle-key-columns": "true"},
    "all": {"enable-tidb-extension": "true", "content-compatible": "true",
            "delete-only-output-handle-key-columns": "true"},
}


def _roundtrip(ev: Event, cfg: CodecConfig) -> tuple[Event, bytes]:
    enc = CanalJSONEncoder(cfg, clock_ms=lambda: 1_700_000_000_000)
    [msg] = enc.encode(ev)
    assert msg.key is None
    [got] = CanalJSONDecoder(cfg).decode(msg.value)
    return got, msg.value


@pytest.mark.parametrize("name", list(CONFIGS))
@SETTINGS
@given(ev=row_events())
def test_canal_json_roundtrip(name, ev):
    cfg = build_config("canal-json", CONFIGS[name])
    got, raw = _roundtrip(ev, cfg)
    want = expected_back(ev, cfg)
    assert got.kind is want.kind
    assert got.commit_ts == want.commit_ts
    assert_rows_same(got.before, want.before, "before")
    assert_rows_same(got.after, want.after, "after")
    check_table(got.table, ev.table, cfg, ev)
    # the project's own comparison agrees
    assert compare_events(ev, got, cfg) is None
    # the wire form: JSON with Go's escaping, every value a string or null, es = commitTs >> 18
    msg = orjson.loads(raw)
    assert msg["es"] == ev.commit_ts >> PHYSICAL_SHIFT
    assert ("_tidb" in msg) is cfg.enable_tidb_extension
    for image in (msg["data"] or []) + (msg["old"] or []):
        assert all(v is None or isinstance(v, str) for v in image.values())
    for ch in (b"<", b">", b"&", b"\xe2\x80\xa8", b"\xe2\x80\xa9"):
        assert ch not in raw


@SETTINGS
@given(data=st.data())
def test_decoder_reuses_its_table_across_messages(data):
    # one decoder and several messages of one table, as a consumer sees them
    table = data.draw(tables())
    events = data.draw(st.lists(row_events(table), min_size=2, max_size=4))
    for name in ("default", "tidb-extension", "all"):
        cfg = build_config("canal-json", CONFIGS[name])
        enc, dec = CanalJSONEncoder(cfg, clock_ms=lambda: 0), CanalJSONDecoder(cfg)
        for ev in events:
            [msg] = enc.encode(ev)
            [got] = dec.decode(msg.value)
            want = expected_back(ev, cfg)
            assert got.commit_ts == want.commit_ts
            assert_rows_same(got.before, want.before, "before")
            assert_rows_same(got.after, want.after, "after")


# =================================================================================================
# Lossy points, one by one
# =================================================================================================


def _table(*cols: Column) -> TableInfo:
    return TableInfo("test", "t", [Column("id", "int", nullable=False, primary_key=True), *cols])


def test_commit_ts_without_extension_keeps_only_the_physical_part():
    ts = 429918007904436226  # logical part 2
    ev = Event(Kind.INSERT, commit_ts=ts, table=_table(), after={"id": 1})
    got, _ = _roundtrip(ev, build_config("canal-json"))
    assert got.commit_ts == (ts >> 18) << 18 == ts - 2
    got, _ = _roundtrip(ev, build_config("canal-json", {"enable-tidb-extension": "true"}))
    assert got.commit_ts == ts


def test_enum_set_keep_index_and_bitmask_when_names_are_unknown():
    t = _table(Column("e", "enum('x','y','z')"), Column("s", "set('x','y','z')"))
    ev = Event(Kind.INSERT, commit_ts=1 << 18, table=t, after={"id": 1, "e": 3, "s": 5})
    got, raw = _roundtrip(ev, build_config("canal-json"))
    msg = orjson.loads(raw)
    # canal-json writes the index / bitmask, and (by default) only `enum` / `set` as the type
    assert msg["data"] == [{"id": "1", "e": "3", "s": "5"}]
    assert msg["mysqlType"] == {"id": "int", "e": "enum", "s": "set"}
    assert got.after == {"id": 1, "e": 3, "s": 5}
    assert got.table.by_name["e"].type.elements == () and got.table.by_name["s"].type.elements == ()
    # so the names cannot be told: an event line of the decoded event carries the numbers
    line = orjson.loads(EventWriter().line(got))
    assert line["after"] == {"id": 1, "e": 3, "s": 5}
    # with content-compatible the elements travel in mysqlType and the names come back
    got, _ = _roundtrip(ev, build_config("canal-json", {"content-compatible": "true"}))
    assert got.table.by_name["e"].type.elements == ("x", "y", "z")
    assert orjson.loads(EventWriter().line(got))["after"] == {"id": 1, "e": "z", "s": "x,z"}


def test_enum_element_with_a_backslash_loses_it_under_content_compatible():
    # TiDB writes enum elements without doubling a backslash (format.OutputFormat), so the element `a\q`
    # is written `'a\q'` and reads back as 'aq', and `a\b` reads back as 'a' + backspace: the values
    # (indexes) survive, the element text does not
    t = _table(Column("e", "enum('a\\\\q','a\\\\b','c')"))
    assert t.by_name["e"].type.elements == ("a\\q", "a\\b", "c")
    ev = Event(Kind.INSERT, commit_ts=0, table=t, after={"id": 1, "e": 2})
    cfg = build_config("canal-json", {"content-compatible": "true"})
    got, raw = _roundtrip(ev, cfg)
    assert orjson.loads(raw)["mysqlType"]["e"] == "enum('a\\q','a\\b','c')"
    assert got.table.by_name["e"].type.elements == ("aq", "a\b", "c")
    assert got.after == {"id": 1, "e": 2}


def test_table_definition_loses_nullability_defaults_and_parameters():
    t = TableInfo("test", "t", [
        Column("id", "bigint unsigned", nullable=False, primary_key=True, auto_increment=True),
        Column("d", "decimal(12,6)", nullable=False, default="0.000000"),
        Column("b", "binary(4)", nullable=True),
        Column("v", "varchar(10)", charset="latin1", collate="latin1_swedish_ci", unique_key=True, nullable=False),
    ], [Index("PRIMARY", ["id"], primary=True, unique=True), Index("uk_v", ["v"], unique=True)])
    ev = Event(Kind.INSERT, commit_ts=0, table=t, after={"id": U64_MAX, "d": "1.500000", "b": b"ab\0\0", "v": "é"})
    got, raw = _roundtrip(ev, build_config("canal-json"))
    assert orjson.loads(raw)["sqlType"]["id"] == 3  # bigint unsigned above 2^63-1 is a DECIMAL in Java
    assert got.after == ev.after  # the values survive...
    g = got.table
    # ...the definition does not
    assert [(c.name, c.mysql_type, c.nullable, c.default, c.charset, c.auto_increment) for c in g.columns] == [
        ("id", "bigint unsigned", False, None, None, False),
        ("d", "decimal", None, None, None, False),
        ("b", "binary", None, None, None, False),
        ("v", "varchar", None, None, None, False),
    ]
    assert g.by_name["d"].type.compact_str() == "decimal(10,0)"  # TiDB's default, not (12,6)
    assert [i.name for i in g.indexes] == ["PRIMARY"]
    got, _ = _roundtrip(ev, build_config("canal-json", {"content-compatible": "true"}))
    assert [c.mysql_type for c in got.table.columns] == ["bigint(20) unsigned", "decimal(12,6)", "binary(4)",
                                                         "varchar(10)"]
    assert got.table.by_name["v"].nullable is None


def test_only_updated_columns_cannot_tell_a_float_sign_change():
    t = _table(Column("f", "double"))
    ev = Event(Kind.UPDATE, commit_ts=0, table=t, before={"id": 1, "f": -0.0}, after={"id": 1, "f": 0.0})
    got, raw = _roundtrip(ev, build_config("canal-json"))
    assert math.copysign(1, got.before["f"]) == -1  # full `old`: the sign is there
    got, raw = _roundtrip(ev, build_config("canal-json", {"only-output-updated-columns": "true"}))
    assert orjson.loads(raw)["old"] == [{}]  # tiflow compares values: -0.0 == 0.0, nothing changed
    assert math.copysign(1, got.before["f"]) == 1


def test_pk_names_follow_column_order():
    t = TableInfo("test", "t", [Column("a", "int", nullable=False), Column("b", "varchar(5)", nullable=False)],
                  [Index("PRIMARY", ["b", "a"], primary=True, unique=True)])
    ev = Event(Kind.INSERT, commit_ts=0, table=t, after={"a": 1, "b": "x"})
    _, raw = _roundtrip(ev, build_config("canal-json"))
    assert orjson.loads(raw)["pkNames"] == ["a", "b"]


def test_delete_with_handle_key_only_keeps_only_the_key():
    t = _table(Column("a", "varchar(5)"), Column("b", "json"))
    ev = Event(Kind.DELETE, commit_ts=0, table=t, before={"id": 7, "a": "x", "b": '{"k": "v"}'})
    cfg = build_config("canal-json", {"delete-only-output-handle-key-columns": "true"})
    got, raw = _roundtrip(ev, cfg)
    msg = orjson.loads(raw)
    assert msg["data"] == [{"id": "7"}] and msg["mysqlType"] == {"id": "int"} and msg["sqlType"] == {"id": 4}
    assert got.before == {"id": 7}
    assert [c.name for c in got.table.columns] == ["id"]
    assert compare_events(ev, got, cfg) is None  # roundtrip.py treats the key as a subset on purpose


# =================================================================================================
# The event-line format: event -> line -> event is the identity
# =================================================================================================

DEFAULTS = st.one_of(st.none(), TEXT, st.integers(-(1 << 63), U64_MAX), st.booleans())


@st.composite
def described_tables(draw: st.DrawFn) -> TableInfo:
    """A table with every column fact the event-line format carries."""
    t = draw(tables())
    for c in t.columns:
        if c.name in t.handle_key:
            continue
        c.nullable = draw(st.sampled_from([None, True, False]))
        c.default = draw(DEFAULTS)
        c.auto_increment = draw(st.booleans()) and c.type.family.value == "int"
        if c.type.family.value == "string" and draw(st.booleans()):
            c.charset, c.collate = draw(st.sampled_from([("utf8mb4", "utf8mb4_general_ci"), ("latin1", None),
                                                         ("gbk", "gbk_bin")]))
    t.table_id = draw(st.none() | st.integers(0, (1 << 63) - 1))
    t.version = draw(st.none() | st.integers(0, U64_MAX))
    t.refresh()
    return t


@st.composite
def any_events(draw: st.DrawFn) -> Event:
    kind = draw(st.sampled_from(list(Kind)))
    ts = draw(COMMIT_TS)
    if kind is Kind.WATERMARK:
        return Event(kind, commit_ts=ts)
    t = draw(described_tables())
    if kind is Kind.BOOTSTRAP:
        return Event(kind, commit_ts=ts, table=t)
    if kind is Kind.DDL:
        pre = draw(st.none() | described_tables())
        query = draw(st.sampled_from(["CREATE TABLE t (id int primary key)", "ALTER TABLE t ADD COLUMN c int",
                                      "DROP TABLE t", "TRUNCATE TABLE `表`"]))
        dtype = draw(st.sampled_from(["ActionCreateTable", "ActionAddColumn", "ActionDropTable",
                                      "ActionTruncateTable", "ActionModifyColumn"]))
        return Event(kind, commit_ts=ts, table=t, pre_table=pre, query=query, ddl_type=dtype)
    ev = Event(kind, commit_ts=ts, table=t)
    if kind is not Kind.INSERT:
        ev.before = _row(draw, t)
    if kind is not Kind.DELETE:
        ev.after = _row(draw, t, base=ev.before)
    return ev


def _same_table(a: TableInfo | None, b: TableInfo | None) -> None:
    if a is None or b is None:
        assert a is b
        return
    assert a.same_definition(b)
    assert table_to_json(a) == table_to_json(b)
    assert [c.default for c in a.columns] == [c.default for c in b.columns]
    assert (a.pk_names, a.handle_key) == (b.pk_names, b.handle_key)


@SETTINGS
@given(events=st.lists(any_events(), min_size=1, max_size=4))
def test_event_line_roundtrip(events):
    writer, reader = EventWriter(), EventReader()
    lines = [writer.line(ev) for ev in events]
    for ev, line in zip(events, lines, strict=True):
        assert b"\n" not in line  # one event, one line
        got = reader.parse(line)
        assert got.kind is ev.kind
        assert got.commit_ts == ev.commit_ts
        _same_table(got.table, ev.table)
        _same_table(got.pre_table, ev.pre_table)
        assert (got.query, got.ddl_type) == (ev.query, ev.ddl_type)
        assert_rows_same(got.before, ev.before, "before")
        assert_rows_same(got.after, ev.after, "after")
        # and writing it again gives the same line
        assert EventWriter().line(got) == line


@pytest.mark.parametrize("ts", [{"$int": "abc"}, {"$int": None}, {"$int": "1.5"}])
def test_event_line_bad_commit_ts_is_a_decode_error(ts):
    with pytest.raises(DecodeError, match="commitTs"):
        EventReader().from_obj({"kind": "watermark", "commitTs": ts})


def test_canal_es_beyond_a_tso_is_a_decode_error():
    msg = {"id": 0, "database": "d", "table": "t", "pkNames": None, "isDdl": False, "type": "INSERT",
           "es": 1 << 46, "ts": 0, "sql": "", "sqlType": None, "mysqlType": {"a": "int"}, "old": None,
           "data": [{"a": "1"}]}
    try:
        events = CanalJSONDecoder().decode(orjson.dumps(msg))
    except DecodeError as e:
        assert e.field == "es"
        return
    for ev in events:
        assert 0 <= ev.commit_ts <= U64_MAX
        EventWriter().line(ev)


def test_canal_es_at_the_tso_limit_decodes():
    # the largest es whose commitTs (es << 18) is still a uint64
    es = U64_MAX >> PHYSICAL_SHIFT
    msg = {"id": 0, "database": "d", "table": "t", "pkNames": None, "isDdl": False, "type": "INSERT", "es": es,
           "ts": 0, "sql": "", "sqlType": None, "mysqlType": {"a": "int"}, "old": None, "data": [{"a": "1"}]}
    [ev] = CanalJSONDecoder().decode(orjson.dumps(msg))
    assert ev.commit_ts == es << PHYSICAL_SHIFT <= U64_MAX
    assert orjson.loads(EventWriter().line(ev))["commitTs"] == es << PHYSICAL_SHIFT


@SETTINGS
@given(ev=row_events())
def test_event_line_then_canal_json(ev):
    # the CLI's path: an event line is read, encoded and decoded; the reader's datums are what the encoder takes
    parsed = EventReader().parse(EventWriter().line(ev))
    cfg = build_config("canal-json", {"enable-tidb-extension": "true", "content-compatible": "true"})
    got, _ = _roundtrip(parsed, cfg)
    want = expected_back(ev, cfg)
    assert_rows_same(got.before, want.before, "before")
    assert_rows_same(got.after, want.after, "after")
