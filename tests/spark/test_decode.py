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
