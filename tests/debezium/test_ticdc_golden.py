"""The debezium protocol against TiCDC's own encoder (tests/debezium/golden/ticdc/README.md): identical key and
value bytes but for the payload's wall-clock `ts_ms`, for DML, DDL and watermark messages."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from changefeed.config import build_config
from changefeed.debezium import DebeziumDecoder, DebeziumEncoder
from changefeed.eventline import EventReader

GOLDEN = Path(__file__).parent / "golden" / "ticdc"
CONFIGS = ["default", "disable-schema", "no-old-value", "enable-tidb-extension"]
OPTIONS = {"no-old-value": {"debezium-output-old-value": "false"}}


def _events():
    reader = EventReader()
    return {orjson.loads(x)["id"]: reader.from_obj(orjson.loads(x))
            for x in (GOLDEN / "events.jsonl").read_bytes().splitlines()}


@pytest.mark.parametrize("config", CONFIGS)
def test_dml_and_watermark_like_ticdc(config):
    expected = [orjson.loads(x) for x in (GOLDEN / f"{config}.messages.jsonl").read_bytes().splitlines()]
    events = _events()
    opts = OPTIONS.get(config, expected[0]["options"])
    cfg = build_config("debezium", opts)
    checked = 0
    for ref in expected:
        ev = events[ref["event"]]
        ts_ms = orjson.loads(ref["value"])["payload"]["ts_ms"]
        [m] = DebeziumEncoder(cfg, clock_ms=lambda t=ts_ms: t).encode(ev)
        assert m.key.decode() == ref["key"], ref["event"]
        assert m.value.decode() == ref["value"], ref["event"]
        checked += 1
    assert checked == len(expected) >= 9


@pytest.mark.parametrize("config", CONFIGS)
def test_decoding_ticdc_output(config):
    expected = [orjson.loads(x) for x in (GOLDEN / f"{config}.messages.jsonl").read_bytes().splitlines()]
    events = _events()
    dec = DebeziumDecoder(build_config("debezium"))
    for ref in expected:
        orig = events[ref["event"]]
        if orig.kind.value == "ddl":
            continue
        [ev] = dec.decode(ref["value"].encode(), ref["key"].encode() if ref["key"] else None)
        assert ev.kind is orig.kind and ev.commit_ts == orig.commit_ts
        for side in ("before", "after"):
            a, b = getattr(orig, side), getattr(ev, side)
            if a is None or b is None or (config == "no-old-value" and side == "before"):
                continue
            assert set(a) == set(b)
            # without a schema only the JSON types are known: dates stay numbers, enums names
            names = ("t", "tu1", "i", "varcharT") if config == "disable-schema" else (
                "t", "tu1", "i", "dateT", "enumT", "setT", "jsonT", "varcharT")
            for name in names:
                if name in a and a[name] is not None:
                    assert b[name] == a[name], (ref["event"], side, name)


def test_ddl_messages_decode_to_the_table_definition():
    events = _events()
    dec = DebeziumDecoder(build_config("debezium"))
    for line in (GOLDEN / "default.messages.jsonl").read_bytes().splitlines():
        ref = orjson.loads(line)
        orig = events[ref["event"]]
        if orig.kind.value != "ddl":
            continue
        [ev] = dec.decode(ref["value"].encode(), ref["key"].encode())
        assert ev.kind is orig.kind and ev.commit_ts == orig.commit_ts and ev.ddl_type == orig.ddl_type
        if orig.ddl_type == "ActionDropTable":
            assert ev.table is None and ev.pre_table.qualified == orig.pre_table.qualified
            continue
        assert [c.name for c in ev.table.columns] == [c.name for c in orig.table.columns]
        # typeExpression keeps the type but not DECIMAL's UNSIGNED (TiCDC writes plain "DECIMAL")
        def shape(t):
            return [c.type.full_str().replace("decimal unsigned", "decimal").replace(") unsigned", ")")
                    if c.type.name == "decimal" else c.type.full_str() for c in t.columns]

        assert shape(ev.table) == shape(orig.table)
        assert ev.table.primary_columns == orig.table.primary_columns  # GetPrimaryKeyColumnNames: implicit too


def test_fast_datetime_formatter_matches_the_reference():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from changefeed.debezium.values import _datetime_value
    from changefeed.model import Column, TableInfo

    enc = DebeziumEncoder(build_config("debezium", {"debezium-disable-schema": "true"}))
    fmts = {fsp: enc._plan(TableInfo("d", "t", [Column("c", f"datetime({fsp})" if fsp else "datetime")]))
            .cols[0][3] for fsp in (0, 3, 6)}

    @settings(max_examples=300, deadline=None)
    @given(st.datetimes(min_value=__import__("datetime").datetime(1000, 1, 1)), st.sampled_from([0, 3, 6]))
    def check(d, fsp):
        v = d.strftime("%Y-%m-%d %H:%M:%S") + (f".{d.microsecond:06d}"[:fsp + 1] if fsp else "")
        assert fmts[fsp](v) == b"%d" % _datetime_value(v, fsp)

    check()


@pytest.mark.parametrize("config", ["default", "no-old-value"])
def test_a_wrapped_bigint_unsigned_is_named_once(config, caplog, monkeypatch):
    """Without TiDB's extension TiCDC writes BIGINT UNSIGNED as int64: `biu2` = 2^63 arrives as -2^63 (and -1 in
    the update). A consumer that has not seen the table's DDL cannot know: one warning line per column, naming it
    and the value it would be; with the DDL in the stream the value is read back as unsigned, without a word."""
    import changefeed.debezium.decoder as decoder_module
    from changefeed.codecs import make_decoder

    monkeypatch.setattr(decoder_module, "_WARNED", set())
    lines = [orjson.loads(x) for x in (GOLDEN / f"{config}.messages.jsonl").read_bytes().splitlines()]
    dml = [x for x in lines if not x["event"].startswith("ddl-") and x["value"]]
    dec = DebeziumDecoder(build_config("debezium", {}))
    with caplog.at_level("WARNING", logger="changefeed.values"):
        got = [ev for x in dml for ev in dec.decode(x["value"].encode(), x["key"].encode())]
    named = [r.getMessage() for r in caplog.records if "biu2" in r.getMessage()]
    assert len(named) == 1 and "column test.t.biu2: -9223372036854775808 " in named[0], named
    assert "it is 9223372036854775808" in named[0] and len(named[0].splitlines()) == 1
    # only int64 columns of no known type: biu2, and bi (a signed BIGINT holding -2^63: the line says "if")
    assert sorted(r.getMessage().split(":")[0] for r in caplog.records) == ["column test.t.bi", "column test.t.biu2"]
    assert [e.after["biu2"] for e in got if e.after and "biu2" in e.after][0] == -(1 << 63)  # kept as it came
    caplog.clear()
    monkeypatch.setattr(decoder_module, "_WARNED", set())
    full = make_decoder(build_config("debezium", {}))  # the DDL first: the column's type is known
    with caplog.at_level("WARNING", logger="changefeed.values"):
        back = [ev for x in lines if x["value"] for ev in full.decode(x["value"].encode(), x["key"].encode())]
    assert not [r for r in caplog.records if "biu2" in r.getMessage()]
    assert [e.after["biu2"] for e in back if e.after and "biu2" in e.after][0] == 1 << 63


def test_enum_members_in_allowed_as_ticdcs_escape_writes_them():
    """TiCDC's EscapeEnumAndSetOptions (tiflow and ticdc pkg/sink/codec/common/helper.go): a comma is escaped, `\\'`
    and `''` become `'`, a backslash stays as it is. The decoders read the members back."""
    from changefeed.config import build_config
    from changefeed.debezium import DebeziumDecoder, DebeziumEncoder
    from changefeed.model import Column, Event, Index, Kind, TableInfo

    t = TableInfo("d", "e", [Column("id", "int", nullable=False, primary_key=True),
                             Column("e", "enum('x\\\\y','a,b','it''s')")],
                  [Index("PRIMARY", ["id"], primary=True, unique=True)])
    cfg = build_config("debezium", {"enable-tidb-extension": "true"})
    [m] = DebeziumEncoder(cfg).encode(Event(kind=Kind.INSERT, commit_ts=1 << 18, table=t, after={"id": 1, "e": 2}))
    fields = orjson.loads(m.value)["schema"]["fields"][1]["fields"]
    assert next(f for f in fields if f["field"] == "e")["parameters"]["allowed"] == "x\\y,a\\,b,it's"
    [ev] = DebeziumDecoder(cfg).decode(m.value, m.key)
    assert ev.table.by_name["e"].type.elements == ("x\\y", "a,b", "it's") and ev.after["e"] == 2


def test_start_ts_in_source_with_debezium_include_start_ts():
    """ticdc's TestEncodeStartTsInSource: with debezium-include-start-ts (and without the extension) a DML's
    `source.start_ts` is the transaction's start TSO and the source schema declares it (int64, required); without
    the option neither (TestDecodeStartTsFallbackToCommitTs); the decoder reads it back."""
    from changefeed.config import build_config
    from changefeed.debezium import DebeziumDecoder, DebeziumEncoder
    from changefeed.model import Column, Event, Index, Kind, TableInfo

    t = TableInfo("test", "t", [Column("id", "int", nullable=False, primary_key=True), Column("v", "varchar(8)")],
                  [Index("PRIMARY", ["id"], primary=True, unique=True)])
    ev = Event(kind=Kind.INSERT, commit_ts=100 << 18, table=t, after={"id": 1, "v": "a"}, start_ts=5)
    for on in (True, False):
        cfg = build_config("debezium", {"debezium-include-start-ts": str(on).lower()})
        [m] = DebeziumEncoder(cfg).encode(ev)
        value = orjson.loads(m.value)
        source = value["payload"]["source"]
        declared = next(f for f in value["schema"]["fields"] if f["field"] == "source")["fields"]
        if on:
            assert source["start_ts"] == 5 and list(source)[-3:] == ["commit_ts", "start_ts", "cluster_id"]
            assert declared[-1] == {"type": "int64", "optional": False, "field": "start_ts"}
            [back] = DebeziumDecoder(cfg).decode(m.value, m.key)
            assert back.start_ts == 5
        else:
            assert "start_ts" not in source and all(f["field"] != "start_ts" for f in declared)


def test_an_event_lines_start_ts_reaches_the_source():
    """An event line may carry the transaction's `startTs` (TiCDC's RowChangedEvent.StartTs): written back by the
    event writer, and what debezium-include-start-ts puts in `source.start_ts`."""
    from changefeed.config import build_config
    from changefeed.debezium import DebeziumEncoder
    from changefeed.eventline import EventReader, EventWriter

    line = (b'{"kind":"insert","commitTs":26214400,"startTs":26214399,"table":{"schema":"test","table":"t",'
            b'"columns":[{"name":"id","mysqlType":"int","nullable":false,"primaryKey":true}]},"preTable":null,'
            b'"before":null,"after":{"id":1},"ddl":null}')
    ev = EventReader().parse(line)
    assert ev.start_ts == 26214399 and b'"startTs":26214399' in EventWriter().line(ev)
    [m] = DebeziumEncoder(build_config("debezium", {"debezium-include-start-ts": "true"})).encode(ev)
    assert orjson.loads(m.value)["payload"]["source"]["start_ts"] == 26214399


def test_a_vector_column_is_ticdcs_tidbvectorfloat32():
    """TiCDC's codec.go: a VECTOR column is a Connect string named io.debezium.data.TiDBVectorFloat32 (no version),
    its value the vector's text; the decoder reads it back as a vector."""
    from changefeed.config import build_config
    from changefeed.debezium import DebeziumDecoder, DebeziumEncoder
    from changefeed.model import Column, Event, Index, Kind, TableInfo

    t = TableInfo("test", "t", [Column("id", "int", nullable=False, primary_key=True), Column("v", "vector(3)")],
                  [Index("PRIMARY", ["id"], primary=True, unique=True)])
    cfg = build_config("debezium", {})
    [m] = DebeziumEncoder(cfg).encode(Event(kind=Kind.INSERT, commit_ts=1 << 18, table=t,
                                            after={"id": 1, "v": "[1,2.5,3]"}))
    value = orjson.loads(m.value)
    fields = value["schema"]["fields"][1]["fields"]
    assert fields[1] == {"type": "string", "optional": True, "name": "io.debezium.data.TiDBVectorFloat32",
                         "field": "v"}
    assert value["payload"]["after"]["v"] == "[1,2.5,3]"
    [ev] = DebeziumDecoder(cfg).decode(m.value, m.key)
    assert ev.table.by_name["v"].type.family.value == "vector" and ev.after["v"] == "[1,2.5,3]"
