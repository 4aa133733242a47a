"""Mutated real messages through the Spark pipeline (decode step and lake apply): the query never fails on them,
every message is applied or in the dead letters, and a message that is not JSON at all is always a dead letter."""

from __future__ import annotations

import base64
import random
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from changefeed.spark.pipeline import apply_changes, read_changes

from ..test_decode_mutations import STREAMS, messages, one_mutation

CASES = ["canal-json", "simple-json", "debezium"]
MUTATED = 150


def _b64(v: bytes | None) -> dict[str, str] | None:
    return None if v is None else {"$b64": base64.b64encode(v).decode()}


def _write_topic(folder: Path, records: list[tuple[bytes | None, bytes | None]]) -> None:
    (folder / "t").mkdir(parents=True)
    (folder / "t" / "meta.json").write_bytes(orjson.dumps({"partitions": 1}))
    with open(folder / "t" / "partition-0.jsonl", "wb") as f:
        for off, (k, v) in enumerate(records):
            f.write(orjson.dumps({"offset": off, "key": _b64(k), "value": _b64(v), "crc": 0}) + b"\n")


@pytest.mark.parametrize("name", CASES)
def test_mutated_messages_never_stop_the_consumer(spark, tmp_path: Path, name: str) -> None:
    protocol, options, _ = STREAMS[name]
    rng = random.Random(5)
    msgs = messages(name)
    mutated = []
    for _ in range(MUTATED):
        k, v = rng.choice(msgs)
        mutated.append(one_mutation(rng, k, v, rng.choice(msgs)[1]))
    records = msgs + mutated + msgs
    folder, lake = tmp_path / "s", tmp_path / "lake"
    _write_topic(folder, records)
    if name == "canal-json":  # through the command a user runs: no traceback, exit 0
        args = [sys.executable, "-m", "changefeed.cli", "consume", "--from", f"file://{folder}/t", "-p", protocol,
                "--lake", str(lake)]
        for k, v in options.items():
            args += ["--option", f"{k}={v}"]
        r = subprocess.run(args, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    else:
        changes = read_changes(spark, f"file://{folder}/t", protocol, options, schema_store=str(lake / "_schemas"))
        q = apply_changes(changes, str(lake), checkpoint=str(lake / "_cp"))
        q.awaitTermination()
        assert q.exception() is None
    dead = spark.read.format("delta").load(str(lake / "_changefeed/dead_letters")).collect()
    first, last = len(msgs), len(msgs) + MUTATED
    offsets = set()
    for d in dead:
        off = d["offset"]
        assert f"t/0@{off}" in d["reason"], d["reason"]  # the reason names the message
        assert first <= off < last, d["reason"]  # the real messages around them are not harmed
        offsets.add(off)
    for i, (_, v) in enumerate(mutated):
        try:
            obj = orjson.loads(v or b"")
        except orjson.JSONDecodeError:
            obj = None
        if not isinstance(obj, dict):
            assert first + i in offsets, (first + i, v[:200] if v else v)
