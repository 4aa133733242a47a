"""Spark as the producer (spark/produce.py, spark/transcode.py): canal-json -> debezium (a transcode SIGKILLed
mid-stream and restarted) -> canal-json through two streaming transcodes gives back the source's changes and DDL,
in commit order per key with watermarks only past what every partition sent; the transcoded stream, consumed into
a lake with the full changelog, replayed as another protocol and consumed into a second lake, equals upstream
(each change landed exactly once). One test for all of it: a Spark streaming query costs seconds per micro-batch."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from changefeed.cli import app
from changefeed.codecs import make_decoder
from changefeed.config import build_config
from changefeed.eventline import EventWriter
from changefeed.model import Event, Kind
from changefeed.spark.pipeline import apply_changes, read_changes
from changefeed.spark.transcode import WriterState, replay, start_transcode
from changefeed.transport.files import read_topic
from changefeed.upstream import final_state
from changefeed.workload import generate

from ..conftest import ROOT
from .test_pipeline import lake_equals

CANAL = {"enable-tidb-extension": "true"}


def decoded(folder: Path, topic: str, protocol: str, options: dict[str, str], records: Any = None
            ) -> list[tuple[int, int, Event]]:
    """Every event of a file topic (or of `records`), decoded by a consumer per partition: (partition, offset,
    event)."""
    cfg = build_config(protocol, options)
    decoders: dict[int, object] = {}
    out = []
    for rec in records if records is not None else read_topic(folder, topic):
        dec = decoders.setdefault(rec.partition, make_decoder(cfg))
        for ev in dec.decode(rec.value, rec.key):  # type: ignore[attr-defined]
            out.append((rec.partition, rec.offset, ev))
    return out


def changes_of(events: list[Event]) -> collections.Counter:
    """Row changes (kind, commit ts, table, images as event-line JSON) and DDL (commit ts, query), counted."""
    w = EventWriter()
    out: collections.Counter = collections.Counter()
    for ev in events:
        if ev.is_row:
            obj = orjson.loads(w.line(ev))
            out[orjson.dumps([ev.kind.value, ev.commit_ts, ev.table.table, obj["before"], obj["after"]],
                             option=orjson.OPT_SORT_KEYS)] += 1
        elif ev.kind is Kind.DDL:
            out[orjson.dumps(["ddl", ev.commit_ts, ev.query])] += 1
    return out


def check_order(stream: list[tuple[int, int, Event]]) -> int:
    """Per partition: no change at or before a watermark the partition already carried, a key's changes in commit
    order, but for changes sent again (a restart re-sends the micro-batch it was in: a change this partition
    already carried may come again, after a later change of its key or a watermark); returns the watermarks seen."""
    marks: dict[int, int] = {}
    last: dict[tuple, int] = {}
    sent: set[tuple] = set()
    w = EventWriter()
    n = 0
    for part, off, ev in stream:
        if ev.kind is Kind.BOOTSTRAP:
            continue
        if ev.kind is Kind.WATERMARK:
            assert ev.commit_ts >= marks.get(part, 0), f"partition {part}@{off}: the watermark went back"
            marks[part] = ev.commit_ts
            n += 1
            continue
        if not ev.is_row:
            assert ev.commit_ts > marks.get(part, -1), f"partition {part}@{off}: a DDL at or before a watermark"
            continue
        t = ev.table
        image = ev.after if ev.after is not None else ev.before
        key = (part, t.schema, t.table, tuple(image[k] for k in t.handle_key))
        change = (key, w.line(ev))
        again = change in sent
        assert ev.commit_ts > marks.get(part, -1) or again, f"partition {part}@{off}: a change at or before a watermark"
        assert ev.commit_ts >= last.get(key, 0) or again, f"partition {part}@{off}: a key's changes out of commit order"
        sent.add(change)
        last[key] = max(ev.commit_ts, last.get(key, 0))
    return n


# Canal's FlatMessage, as the canal-json spec lists its fields (shared/specs/canal-json-protocol.zh.txt), with the
# JSON type of each; `_tidb` is TiCDC's extension (enable-tidb-extension)
FLAT_MESSAGE = {"id": int, "database": str, "table": str, "pkNames": (list, type(None)), "isDdl": bool, "type": str,
                "es": int, "ts": int, "sql": str, "sqlType": (dict, type(None)), "mysqlType": (dict, type(None)),
                "data": (list, type(None)), "old": (list, type(None)), "_tidb": dict}


def check_envelopes(folder: Path, debezium: str, canal: str) -> None:
    """A transcoded stream read by others' parsers: every Debezium value through Kafka Connect's own JsonConverter
    (schemas.enable: exactly schema + payload, the payload's declared fields), every canal-json message with
    exactly FlatMessage's fields and their JSON types."""
    from tests.debezium.test_connect_interop import _connect, _declared

    values = [r.value for r in read_topic(folder, debezium) if r.value is not None]
    for ours, theirs in zip(values, _connect(values), strict=True):
        msg = orjson.loads(ours)
        assert set(msg) == {"schema", "payload"} and not theirs.startswith("ERROR"), theirs
        assert orjson.loads(theirs) == _declared(msg["payload"], msg["schema"])
    n = 0
    for r in read_topic(folder, canal):
        m = orjson.loads(r.value)
        assert set(m) == set(FLAT_MESSAGE), (r.partition, r.offset, sorted(set(m) ^ set(FLAT_MESSAGE)))
        bad = [k for k, t in FLAT_MESSAGE.items() if not isinstance(m[k], t) or t is int and isinstance(m[k], bool)]
        assert not bad, (r.partition, r.offset, bad)
        for image in (m["data"] or []) + (m["old"] or []):
            assert all(isinstance(v, str | None) for v in image.values()), image
        n += 1
    assert n > 0 and values


def transcode(spark, src: str, protocol: str, options: dict[str, str], sink: str, cp: Path) -> WriterState:
    query, writer = start_transcode(spark, src, protocol, options, sink, checkpoint=str(cp))
    query.awaitTermination()
    assert query.exception() is None
    writer.finish(spark)
    return writer.state


def test_a_transcode_killed_mid_stream_then_transcoded_back_and_replayed_from_the_lake(spark, kafka_broker: str,
                                                                                      tmp_path: Path) -> None:
    """Kafka canal-json (DDL to every partition) -> transcode to debezium files, SIGKILLed mid-stream and restarted
    -> transcode back to canal-json: the source's changes and DDL (each DDL once), in commit order per key, with
    watermarks only past what every partition sent, the restart's re-sent part at most a micro-batch -> a lake
    with the full changelog -> replayed as simple -> a second lake: both lakes equal upstream."""
    from changefeed.errors import ChangefeedError
    from changefeed.linecodec import topic_records
    from changefeed.sinkconfig import parse_sink_uri

    per = 100  # records per micro-batch: the most a restart sends again
    events = list(generate(seed=29, transactions=150))
    lines = tmp_path / "events.jsonl"
    w = EventWriter()
    lines.write_bytes(b"".join(w.line(e) + b"\n" for e in events))
    topic = f"transcode-{os.getpid()}-{int(time.time())}"
    uri = f"kafka://{kafka_broker}/{topic}?protocol=canal-json&enable-tidb-extension=true&partition-num=3"
    cli = [sys.executable, "-m", "changefeed.cli"]
    subprocess.run([*cli, "produce", "--sink-uri", uri, "--input", str(lines), "--ddl-to-all-partitions"],
                   check=True, cwd=ROOT, capture_output=True)
    s = tmp_path / "streams"
    cp = tmp_path / "cp"
    cmd = [*cli, "transcode", "--from", uri, "--sink-uri", f"file://{s}/b?protocol=debezium&partition-num=2",
           "--checkpoint", str(cp), "--max-records-per-trigger", str(per)]
    proc = subprocess.Popen([*cmd, "--trigger", "processing-time=1 second"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            if (cp / "producer-state.json").exists() and WriterState.load(str(cp)).batches >= 2:
                break
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:]  # type: ignore[union-attr]
            time.sleep(0.1)
        else:
            pytest.fail("the transcode sent no micro-batch in 240 s")
        time.sleep(1.5)  # somewhere inside a later micro-batch
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    killed_at = WriterState.load(str(cp)).batches
    # the restart: the command again, run in this process on the shared session (the killed process was the one
    # under test; a second JVM of its own only cost its start and a cold first micro-batch), without the cap: the
    # micro-batch the kill interrupted is re-run with the offsets Spark logged for it (at most `per` records),
    # the rest comes in one micro-batch, not in micro-batches of `per`. Its signal handlers (a transcode stops
    # gracefully on SIGTERM/SIGINT) are this process's again afterwards
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        done = CliRunner().invoke(app, cmd[len(cli):-2])
    finally:
        for sig, h in handlers.items():
            signal.signal(sig, h)
    assert done.exit_code == 0, (done.output[-3000:], done.exception)
    assert "transcoded" in done.stderr
    assert killed_at < WriterState.load(str(cp)).batches  # the restart went on
    check_order(decoded(s, "b", "debezium", {}))

    st = transcode(spark, f"file://{s}/b", "debezium", {},
                   f"file://{s}/c?protocol=canal-json&enable-tidb-extension=true&partition-num=3", tmp_path / "cp2")
    assert st.events > 0
    source = changes_of([e for _, _, e in decoded(tmp_path, "", "canal-json", CANAL,
                                                  topic_records(parse_sink_uri(uri)))])
    out = decoded(s, "c", "canal-json", CANAL)
    got = changes_of([e for _, _, e in out])
    assert set(got) == set(source), (list(set(source) - set(got))[:2], list(set(got) - set(source))[:2])
    assert all(n == 1 for k, n in got.items() if k.startswith(b'["ddl"')), "a DDL sent twice"
    rows = sum(n for k, n in source.items() if not k.startswith(b'["ddl"'))
    again = sum(n for k, n in got.items() if not k.startswith(b'["ddl"')) - rows
    assert again <= per, f"{again} changes sent again: more than the micro-batch the kill interrupted"
    assert check_order(out) > 0  # watermarks where they may be, none before a change they cover
    check_envelopes(s, "b", "c")

    lake1, lake2 = tmp_path / "lake1", tmp_path / "lake2"
    q = apply_changes(read_changes(spark, f"file://{s}/c", "canal-json", CANAL, schema_store=str(lake1 / "_s")),
                      str(lake1), checkpoint=str(lake1 / "_cp"), changelog="full")
    q.awaitTermination()
    expected = final_state(events)
    lake_equals(spark, lake1, expected)  # each change landed once, though some came twice

    rep = replay(spark, str(lake1), f"file://{s}/d?protocol=simple&partition-num=2")
    assert rep.events >= rows
    check_order(decoded(s, "d", "simple", {}))
    q = apply_changes(read_changes(spark, f"file://{s}/d", "simple", {}, schema_store=str(lake2 / "_s")),
                      str(lake2), checkpoint=str(lake2 / "_cp"))
    q.awaitTermination()
    lake_equals(spark, lake2, expected)
    with pytest.raises(ChangefeedError, match="--changelog full"):  # lake2's changelog is the minimal one
        replay(spark, str(lake2), f"file://{s}/e?protocol=simple")


def test_a_delta_change_data_feed_published_to_kafka_as_canal_json(spark, kafka_broker: str, tmp_path: Path) -> None:
    from decimal import Decimal

    from delta.tables import DeltaTable

    from changefeed.linecodec import topic_records
    from changefeed.sinkconfig import parse_sink_uri
    from changefeed.spark.cdf import cdf_changes
    from changefeed.spark.produce import write_changes

    path = str(tmp_path / "orders")
    rows = [(1, "a", Decimal("1.50"), b"\x00\xff"), (2, "b", None, None), (3, "c", Decimal("-3.25"), b"x")]
    (spark.createDataFrame(rows, "id long, name string, amount decimal(10,2), raw binary").write.format("delta")
     .option("delta.enableChangeDataFeed", "true").save(path))
    dt = DeltaTable.forPath(spark, path)
    dt.update("id = 2", {"name": "'b2'", "amount": "2.00"})
    dt.delete("id = 3")
    changes = cdf_changes(spark, path, database="shop", table="orders", keys=["id"])
    uri = (f"kafka://{kafka_broker}/cdf-{os.getpid()}-{int(time.time())}?protocol=canal-json"
           "&enable-tidb-extension=true&partition-num=2")
    rep = write_changes(changes, uri, dialect="text")
    assert rep.events == 5 and rep.targets == 2
    out = decoded(tmp_path, "", "canal-json", CANAL, topic_records(parse_sink_uri(uri)))
    check_order(out)
    w = EventWriter()
    got = sorted(((e.commit_ts, e.kind.value, orjson.loads(w.line(e))) for _, _, e in out if e.is_row),
                 key=lambda g: (g[0], g[1], orjson.dumps(g[2], option=orjson.OPT_SORT_KEYS)))
    assert [g[1] for g in got] == ["insert", "insert", "insert", "update", "delete"]
    assert got[0][0] < got[3][0] < got[4][0]  # the versions' order
    after = {g[2]["after"]["id"]: g[2]["after"] for g in got if g[1] == "insert"}
    assert after[1] == {"id": 1, "name": "a", "amount": "1.50", "raw": {"$b64": "AP8="}}
    assert after[2]["amount"] is None
    upd = got[3][2]
    assert upd["before"]["name"] == "b" and upd["after"] == {"id": 2, "name": "b2", "amount": "2.00", "raw": None}
    assert got[4][2]["before"]["id"] == 3
