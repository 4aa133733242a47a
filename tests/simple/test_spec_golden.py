"""The simple protocol against every JSON example of its spec (golden/README.md)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from changefeed.config import build_config
from changefeed.eventline import EventReader
from changefeed.simple import SimpleDecoder, SimpleEncoder

GOLDEN = Path(__file__).parent / "golden"
CASES = {"ddl_alter": "spec_ddl_alter.json", "insert": "spec_insert.json", "update": "spec_update.json",
         "delete": "spec_delete.json", "watermark": "spec_watermark.json", "bootstrap": "spec_bootstrap.json"}


def events():
    reader = EventReader()
    return {orjson.loads(line)["id"]: reader.from_obj(orjson.loads(line))
            for line in (GOLDEN / "spec.events.jsonl").read_bytes().splitlines()}


@pytest.mark.parametrize("eid", list(CASES))
def test_encoder_output_is_the_spec_example(eid):
    expected = orjson.loads((GOLDEN / CASES[eid]).read_bytes())
    enc = SimpleEncoder(build_config("simple"), clock_ms=lambda: expected["buildTs"])
    [msg] = enc.encode(events()[eid])
    # the spec prints it indented; TiCDC writes compact JSON in the same field order
    assert msg.value == orjson.dumps(expected)


def test_decoder_reads_the_spec_examples_in_order():
    dec = SimpleDecoder(build_config("simple"))
    evs = events()
    # a consumer that starts in the middle: the DML come before any schema and wait for the BOOTSTRAP...
    for name in ("insert", "update", "delete"):
        assert dec.decode((GOLDEN / CASES[name]).read_bytes()) == []
    assert dec.pending == 3
    [wm] = dec.decode((GOLDEN / "spec_watermark.json").read_bytes())
    assert wm.commit_ts == 447984124732375041
    # ...of another table (new_user) does not release them
    [boot] = dec.decode((GOLDEN / "spec_bootstrap.json").read_bytes())
    assert boot.table.table == "new_user" and dec.pending == 3
    # the ALTER's preTableSchema is the version the DML were written with: out they come, in order
    out = dec.decode((GOLDEN / "spec_ddl_alter.json").read_bytes())
    assert [e.kind.value for e in out] == ["ddl", "insert", "update", "delete"]
    ddl, ins, upd, dele = out
    assert ddl.ddl_type == "ActionAddColumn"
    assert [c.name for c in ddl.table.columns][-1] == "createTime"
    assert ins.after == evs["insert"].after and ins.commit_ts == 447984084414103554
    assert upd.before == evs["update"].before and upd.after == evs["update"].after
    assert dele.before == evs["delete"].before
    assert ins.table.by_name["score"].type.name == "float"
    dec.finish()  # nothing left waiting


def test_json_fast_path_matches_the_reference_encoding():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from changefeed.model import Event, Kind

    t = events()["insert"].table
    enc = SimpleEncoder(build_config("simple"), clock_ms=lambda: 42)
    plan = enc._plan(t)
    rows = st.fixed_dictionaries({"id": st.integers(-(1 << 31), (1 << 31) - 1), "name": st.none() | st.text(),
                                  "age": st.none() | st.integers(-(1 << 31), (1 << 31) - 1),
                                  "score": st.none() | st.floats(width=32, allow_nan=False, allow_infinity=False)})

    @settings(max_examples=100, deadline=None)
    @given(st.sampled_from(["insert", "update", "delete"]), rows, rows)
    def check(kind, before, after):
        ev = Event(kind=Kind(kind), commit_ts=7, table=t, before=None if kind == "insert" else before,
                   after=None if kind == "delete" else after)
        assert enc._row_value(ev, plan, False, None) == enc._row_value_reference(ev, plan, False, None)

    check()
