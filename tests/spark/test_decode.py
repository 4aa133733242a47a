"""The function Spark runs in `mapInArrow`, called directly on Arrow batches (no Spark needed).

What matters here is state across tasks: the schema store lets a later task (or a restarted consumer) decode
with definitions an earlier task learnt, and a replay of messages already decoded must come out the same.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow as pa
import pytest

from changefeed.codecs import make_encoder
from changefeed.config import build_config
from changefeed.spark.decode import decode_partitions
from changefeed.workload import generate

PROTOCOLS = [("canal-json", {"enable-tidb-extension": "true"}), ("simple", {})]


def messages(protocol: str, options: dict[str, str]) -> list[tuple[bytes | None, bytes | None]]:
    enc = make_encoder(build_config(protocol, options))
    out = []
    for ev in generate(seed=23, transactions=150):
        out += [(m.key, m.value) for m in enc.encode(ev)]
    return out


def run(protocol: str, options: dict[str, str], store: Path, msgs: list[tuple[bytes | None, bytes | None]],
        first_offset: int = 0) -> list[dict]:
    raw = pa.RecordBatch.from_pydict(
        {"topic": ["t"] * len(msgs), "partition": [0] * len(msgs),
         "offset": list(range(first_offset, first_offset + len(msgs))),
         "key": [k for k, _ in msgs], "value": [v for _, v in msgs]},
        schema=pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                          ("key", pa.binary()), ("value", pa.binary())]))
    rows: list[dict] = []
    for b in decode_partitions(protocol, options, str(store))(iter([raw])):
        rows += b.to_pylist()
    return rows


def comparable(r: dict) -> tuple:
    defs = tuple(orjson.loads(r[k]) if r[k] else None for k in ("table_def", "pre_table_def"))
    return (r["offset"], r["idx"], r["kind"], r["commit_ts"], r["ddl"], str(r["before"]), str(r["after"]),
            str(defs) if r["kind"] in ("ddl", "bootstrap") else None, r["error"])


@pytest.mark.parametrize(("protocol", "options"), PROTOCOLS, ids=[p[0] for p in PROTOCOLS])
def test_a_replay_after_a_restart_decodes_as_the_first_time(tmp_path: Path, protocol: str,
                                                            options: dict[str, str]) -> None:
    """A consumer that crashed re-reads messages whose DDL the schema store already holds the outcome of
    (here: RENAME COLUMN, ADD/DROP/MODIFY COLUMN, RENAME TABLE): each DDL must still carry the definitions
    before and after it, and each row its own columns, exactly as when first decoded."""
    msgs = messages(protocol, options)
    store = tmp_path / "schemas"
    first = run(protocol, options, store, msgs)
    assert first and not [r for r in first if r["kind"] == "error"]
    ddl = [r for r in first if r["kind"] == "ddl"]
    assert any(r["ddl"] and "RENAME COLUMN" in r["ddl"] for r in ddl)
    assert all(r["table_def"] for r in ddl if "ALTER TABLE" in (r["ddl"] or ""))
    for start in (0, len(msgs) // 3, 2 * len(msgs) // 3):
        again = run(protocol, options, store, msgs[start:], first_offset=start)
        want = [comparable(r) for r in first if r["offset"] >= start]
        got = [comparable(r) for r in again]
        assert got == want, next((f"offset {g[0]}: {g} != {w}" for g, w in zip(got, want, strict=False)
                                  if g != w), "lengths differ")


def test_canal_json_on_the_jvm_gives_the_python_decoders_values(spark, tmp_path: Path) -> None:
    """The two canal-json decoders (from_json on the JVM, the Python one in mapInArrow) must give the same
    Spark values for every change of a workload with every type family (each in its own text dialect)."""
    from pyspark.sql import functions as F

    from changefeed.produce import open_producer
    from changefeed.spark.pipeline import read_changes
    from changefeed.spark.types import typed
    from changefeed.state import UpstreamState

    uri = f"file://{tmp_path}/s/t?protocol=canal-json&enable-tidb-extension=true&partition-num=3"
    producer, transport, _ = open_producer(uri, ddl_to_all_partitions=True)
    state = UpstreamState()
    defs = {}
    for ev in generate(seed=31, transactions=200):
        producer.send(ev)
        state.apply(ev)
        if ev.table is not None and ev.table.columns:
            defs.setdefault((ev.table.schema, ev.table.table), []).append(ev.table)
    producer.close()
    transport.close()
    opts = {"enable-tidb-extension": "true"}
    src = f"file://{tmp_path}/s/t"
    jvm = read_changes(spark, src, "canal-json", opts, streaming=False, schema_store=str(tmp_path / "a"),
                       jvm_decode=True)
    py = read_changes(spark, src, "canal-json", opts, streaming=False, schema_store=str(tmp_path / "b"))
    key = ["partition", "offset", "idx"]
    assert jvm.where("kind = 'error'").count() == 0
    assert sorted(tuple(r) for r in jvm.select(*key, "kind", "commit_ts").collect()) == \
        sorted(tuple(r) for r in py.select(*key, "kind", "commit_ts").collect())
    compared = 0
    for (db, name), versions in defs.items():
        t = versions[-1]
        for img in ("before", "after"):
            cols = list(t.columns)
            a = jvm.where(F.col("table") == name).select(*key, *[typed(F.col(img)[c.name], c.type, dialect="canal")
                                                               .alias(c.name) for c in cols])
            b = py.where(F.col("table") == name).select(*key, *[typed(F.col(img)[c.name], c.type).alias(c.name)
                                                              for c in cols])
            diff = a.exceptAll(b).limit(3).collect()
            assert not diff, (db, name, img, diff)
            compared += a.count()
    assert compared > 500
