"""The local file transport and `produce` / `tail` over it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from changefeed.errors import DecodeError
from changefeed.transport.files import FileProducer, read_topic
from tests.conftest import ROOT

EXAMPLE = ROOT / "src" / "changefeed" / "examples" / "events.jsonl"


def test_layout_offsets_and_broadcast(tmp_path: Path):
    p = FileProducer(tmp_path, partition_num=3)
    assert p.send("t", 1, None, b'{"a":1}') == 0
    assert p.send("t", 1, b"k", b"\x00\x01") == 1
    p.broadcast("t", None, b"{}")
    p.close()
    recs = list(read_topic(tmp_path, "t"))
    assert [(r.partition, r.offset) for r in recs] == [(0, 0), (1, 0), (1, 1), (1, 2), (2, 0)]
    assert recs[2].key == b"k" and recs[2].value == b"\x00\x01"
    assert orjson.loads((tmp_path / "t" / "meta.json").read_bytes()) == {"partitions": 3}


def test_torn_tail_is_detected_and_dropped_before_appending(tmp_path: Path):
    p = FileProducer(tmp_path, partition_num=1)
    p.send("t", 0, None, b'{"a":1}')
    p.close()
    f = tmp_path / "t" / "partition-0.jsonl"
    f.write_bytes(f.read_bytes() + b'{"offset":1,"key":null,"val')  # a crash mid-write
    with pytest.raises(DecodeError, match="torn last record") as e:
        list(read_topic(tmp_path, "t"))
    assert e.value.offset is not None
    p = FileProducer(tmp_path, partition_num=1)
    assert p.send("t", 0, None, b'{"b":2}') == 1  # the torn record was never acknowledged: replaced
    p.close()
    assert [r.value for r in read_topic(tmp_path, "t")] == [b'{"a":1}', b'{"b":2}']


def test_damaged_record_is_named(tmp_path: Path):
    p = FileProducer(tmp_path, partition_num=1)
    p.send("t", 0, None, b'{"a":1}')
    p.close()
    f = tmp_path / "t" / "partition-0.jsonl"
    f.write_bytes(f.read_bytes().replace(b'a\\":1', b'a\\":2'))
    with pytest.raises(DecodeError, match="checksum mismatch"):
        list(read_topic(tmp_path, "t"))


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "changefeed.cli", *args], capture_output=True, timeout=120)


@pytest.mark.parametrize("protocol", ["canal-json", "simple", "debezium"])
def test_produce_and_tail(tmp_path: Path, protocol: str):
    uri = f"file://{tmp_path}/changes?protocol={protocol}&enable-tidb-extension=true&partition-num=2" if \
        protocol != "simple" else f"file://{tmp_path}/changes?protocol=simple&partition-num=2"
    r = cli("produce", "--sink-uri", uri, "-i", str(EXAMPLE))
    assert r.returncode == 0, r.stderr
    t = cli("tail", "--from", uri)
    assert t.returncode == 0, t.stderr
    events = [orjson.loads(x) for x in t.stdout.splitlines()]
    rows = [e for e in events if e["kind"] in ("insert", "update", "delete")]
    assert [e["kind"] for e in rows] == ["insert", "insert", "update", "delete", "insert"]
    assert all({"topic", "partition", "offset"} <= set(e) for e in events)
    # per partition, rows in commit order; watermarks on every partition, never going back
    for part in (0, 1):
        mine = [e for e in events if e["partition"] == part]
        ts = [e["commitTs"] for e in mine if e["kind"] in ("insert", "update", "delete")]
        assert ts == sorted(ts)
        wms = [e["commitTs"] for e in mine if e["kind"] == "watermark"]
        assert wms == sorted(set(wms)) and wms
    if protocol == "simple":
        assert any(e["kind"] == "bootstrap" for e in events)


def test_column_selectors_drop_columns_from_row_messages(tmp_path: Path):
    """TiCDC's column-selectors: the first matching selector decides; DDL messages keep the whole table."""
    cfg = tmp_path / "changefeed.toml"
    cfg.write_text("[sink]\ncolumn-selectors = [\n"
                   "  {matcher = ['SHOP.ORD*'], columns = ['*', '!NOTE', '!t?gs', '!*_at']},\n"
                   "  {matcher = ['*.*'], columns = ['id']},\n]\n")
    uri = f"file://{tmp_path}/changes?protocol=canal-json&enable-tidb-extension=true"
    r = cli("produce", "--sink-uri", uri, "--config", str(cfg), "-i", str(EXAMPLE))
    assert r.returncode == 0, r.stderr
    t = cli("tail", "--from", uri)
    assert t.returncode == 0, t.stderr
    events = [orjson.loads(x) for x in t.stdout.splitlines()]
    rows = [e for e in events if e["kind"] in ("insert", "update", "delete")]
    assert len(rows) == 5
    dropped = {"note", "tags", "created_at", "updated_at"}
    for e in rows:
        names = [c["name"] for c in e["table"]["columns"]]
        assert not dropped & set(names) and "id" in names and "amount" in names
        assert not dropped & set(e["after"] or e["before"])


def test_column_selector_may_not_drop_a_key_column(tmp_path: Path):
    cfg = tmp_path / "changefeed.toml"
    cfg.write_text("[sink]\ncolumn-selectors = [{matcher = ['shop.*'], columns = ['*', '!id']}]\n")
    r = cli("produce", "--sink-uri", f"file://{tmp_path}/changes?protocol=canal-json", "--config", str(cfg),
            "-i", str(EXAMPLE))
    assert r.returncode == 1 and b"shop.orders.id cannot be filtered out" in r.stderr
