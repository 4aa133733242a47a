"""Interoperability with an independent implementation: Kafka Connect's own JsonConverter must read our
schema-enabled messages into Connect records whose values are the payload (scripts/connect-json)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson

from changefeed.config import build_config
from changefeed.debezium import DebeziumEncoder
from tests.conftest import ROOT
from tests.debezium.test_ticdc_golden import _events


def _connect(lines: list[bytes]) -> list[str]:
    r = subprocess.run([str(ROOT / "scripts" / "connect-json")], input=b"\n".join(lines) + b"\n",
                       capture_output=True, timeout=600)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    return r.stdout.decode().rstrip("\n").split("\n")  # not splitlines(): U+2028 stays raw in Connect's JSON


def _declared(payload, schema):
    """The payload as Connect sees it: the declared fields only (TiCDC's source adds commit_ts and cluster_id),
    each declared field present (absent ones read as null)."""
    if isinstance(payload, dict) and schema.get("type") == "struct":
        return {f["field"]: _declared(payload.get(f["field"]), f) for f in schema["fields"]}
    if isinstance(payload, list) and schema.get("type") == "array":
        return [_declared(v, schema.get("items", {})) for v in payload]
    return payload


def test_kafka_connect_json_converter_reads_our_messages(tmp_path: Path):
    cfg = build_config("debezium", {"enable-tidb-extension": "true"})
    enc = DebeziumEncoder(cfg, clock_ms=lambda: 1)
    values = []
    for _, ev in _events().items():
        for m in enc.encode(ev):
            values.append(m.value)
    assert len(values) >= 10
    out = _connect(values)
    assert len(out) == len(values)
    for ours, theirs in zip(values, out, strict=True):
        assert not theirs.startswith("ERROR"), theirs
        msg = orjson.loads(ours)
        got = orjson.loads(theirs)
        want = _declared(msg["payload"], msg["schema"])
        assert got == want
