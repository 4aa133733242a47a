"""The debezium protocol against its spec's example (golden/spec/README.md)."""

from __future__ import annotations

from pathlib import Path

import orjson

from changefeed.config import build_config
from changefeed.debezium import DebeziumDecoder, DebeziumEncoder
from changefeed.model import Column, Event, Index, Kind, TableInfo

SPEC = Path(__file__).parent / "golden" / "spec"


def test_spec_example():
    key = orjson.loads((SPEC / "key.json").read_bytes())
    value = orjson.loads((SPEC / "value.json").read_bytes())
    t = TableInfo("test", "t2", [Column("a", "int", nullable=False, primary_key=True), Column("b", "int")],
                  [Index("PRIMARY", ["a"], primary=True, unique=True)])
    ev = Event(kind=Kind.INSERT, commit_ts=value["payload"]["source"]["commit_ts"], table=t, after={"a": 4, "b": 2})
    [m] = DebeziumEncoder(build_config("debezium"), clock_ms=lambda: value["payload"]["ts_ms"]).encode(ev)
    k, v = orjson.loads(m.key), orjson.loads(m.value)
    assert k["payload"] == key["payload"]
    assert k["schema"]["name"] == key["schema"]["name"] and k["schema"]["type"] == "struct"
    assert [(f["field"], f["type"]) for f in k["schema"]["fields"]] == [("a", "int32")]
    p = v["payload"]
    assert {x: p[x] for x in ("ts_ms", "transaction", "op", "before", "after")} == {
        x: value["payload"][x] for x in ("ts_ms", "transaction", "op", "before", "after")}
    src = dict(value["payload"]["source"], ts_ms=ev.commit_ts >> 18)  # the example's ts_ms is hand-edited
    assert p["source"] == src
    assert v["schema"]["name"] == value["schema"]["name"] and v["schema"]["version"] == 1
    ours = {f["field"]: f for f in v["schema"]["fields"]}
    for theirs in value["schema"]["fields"]:  # the example elides some (source ...): compare those it shows
        assert ours[theirs["field"]] == theirs
    # and back
    [back] = DebeziumDecoder().decode(m.value, m.key)
    assert back.after == {"a": 4, "b": 2} and back.commit_ts == ev.commit_ts
