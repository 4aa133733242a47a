"""Every protocol through a real Kafka broker and back (scripts/kafka starts it)."""

from __future__ import annotations

import subprocess
import sys
import uuid

import orjson
import pytest

from tests.conftest import ROOT

EXAMPLE = ROOT / "src" / "changefeed" / "examples" / "events.jsonl"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "changefeed.cli", *args], capture_output=True, timeout=180)


@pytest.mark.parametrize("protocol", ["canal-json", "simple", "debezium", "avro", "debezium-avro"])
def test_every_protocol_through_kafka(kafka_broker, schema_registry_url, protocol, tmp_path):
    topic = f"t{uuid.uuid4().hex[:8]}"
    opts = "partition-num=3" if protocol == "simple" else "enable-tidb-extension=true&partition-num=3"
    if protocol in ("avro", "debezium-avro"):
        opts += f"&schema-registry={schema_registry_url}"
    uri = f"kafka://{kafka_broker}/{topic}?protocol={protocol}&{opts}"
    # The Avro protocols need one table per topic, so route each table to its own topic.
    cfg = tmp_path / "changefeed.toml"
    cfg.write_text(
        "[sink]\ndispatchers = [{matcher = ['*.*'], "
        f'topic = "{topic}_{{schema}}_{{table}}", partition = "index-value"}}]\n'
    )
    extra = ["--config", str(cfg)] if protocol in ("avro", "debezium-avro") else []
    r = cli("produce", "--sink-uri", uri, *extra, "-i", str(EXAMPLE))
    assert r.returncode == 0, r.stderr
    tail_topic = f"{topic}_shop_orders" if protocol in ("avro", "debezium-avro") else topic
    t = cli("tail", "--from", f"kafka://{kafka_broker}/{tail_topic}?protocol={protocol}&{opts}")
    assert t.returncode == 0, t.stderr
    events = [orjson.loads(x) for x in t.stdout.splitlines()]
    rows = [e for e in events if e["kind"] in ("insert", "update", "delete")]
    assert len(rows) == 5 and all(e["topic"] == tail_topic for e in events)
    for part in range(3):  # per partition, commit order
        # (an Avro DELETE is a key with a tombstone value: it carries no commit ts)
        ts = [e["commitTs"] for e in rows if e["partition"] == part and e["commitTs"]]
        assert ts == sorted(ts)
    if protocol in ("canal-json", "simple", "debezium"):
        wm_parts = {e["partition"] for e in events if e["kind"] == "watermark"}
        assert wm_parts == {0, 1, 2}  # watermarks broadcast to every partition


def test_message_over_max_message_bytes_is_an_error(kafka_broker):
    topic = f"t{uuid.uuid4().hex[:8]}"
    uri = f"kafka://{kafka_broker}/{topic}?protocol=canal-json&max-message-bytes=300"
    r = cli("produce", "--sink-uri", uri, "-i", str(EXAMPLE))
    assert r.returncode == 1 and b"over max-message-bytes=300" in r.stderr
