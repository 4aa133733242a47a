"""A consumer run as a service: `changefeed consume` in a subprocess on a stream still being written, scraped on
/metrics, stopped by SIGTERM in the middle of a micro-batch (exit 0, its summary, the batch completed), restarted
(nothing applied twice), then `changefeed status` and `changefeed verify` against the lake."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import orjson
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from changefeed.cli import app
from changefeed.model import Kind
from changefeed.produce import open_producer
from changefeed.tso import physical_ms
from changefeed.workload import Workload

from ..conftest import _free_port

ROWS = (Kind.INSERT, Kind.UPDATE, Kind.DELETE)


class Source:
    """The upstream: workload transactions written to a file topic at a pace, stopped at a transaction boundary
    when told, closed with a last watermark."""

    def __init__(self, uri: str, rate: float) -> None:
        self.uri, self.rate = uri, rate
        self.stop = threading.Event()
        self.rows = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        producer, transport, _ = open_producer(self.uri, None, ddl_to_all_partitions=True, watermark_interval_ms=100)
        start, last = time.monotonic(), None
        try:
            for ev in Workload(7, 20_000, start_ms=int(time.time() * 1000)):
                if self.stop.is_set() and ev.commit_ts != last:
                    break
                producer.send(ev)
                last = ev.commit_ts
                self.rows += ev.kind in ROWS
                if producer.events > 300:  # the tables and a first burst at once, then a live source's pace
                    time.sleep(max(0.0, (producer.events - 300) / self.rate - (time.monotonic() - start)))
            producer.close()
        finally:
            transport.close()


def cli(*args: str, timeout: float = 600, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "changefeed.cli", *args], capture_output=True, timeout=timeout,
                          env=env)


def late_python(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """Spark waits a fixed 10 s for the Python reader of a `file://` stream to connect back when a query starts; on
    a loaded machine it may take longer (bench/soak.py failed so). A PYSPARK_PYTHON that holds the reader's first
    start back 12 s, and the file it leaves once it did."""
    held = tmp_path / "held"
    slow = tmp_path / "python"
    slow.write_text("#!/bin/sh\ncase \"$*\" in *python_streaming_source_runner*)\n"
                    f"  if [ ! -e {held} ]; then touch {held}; sleep 12; fi;;\nesac\nexec {sys.executable} \"$@\"\n")
    slow.chmod(0o755)
    return {**os.environ, "PYSPARK_PYTHON": str(slow)}, held


def wait_for(what: str, cond, timeout: float = 300, proc: subprocess.Popen | None = None, log: Path | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"consume exited {proc.returncode} before {what}:\n"
                                 f"{log.read_text() if log else ''}")
        time.sleep(0.1)
    raise AssertionError(f"no {what} within {timeout} s:\n{log.read_text() if log else ''}")


def records(lake: Path) -> list[dict]:
    folder = lake / "_changefeed" / "progress"
    return [orjson.loads(p.read_bytes()) for p in sorted(folder.glob("batch-*.json"))]


def in_flight(lake: Path) -> int | None:
    """A micro-batch the consumer is applying now: it recorded its changelog cutoff (its first write, before
    the changelog append and the tables' commits), not yet its progress record."""
    folder = lake / "_changefeed" / "progress"
    try:
        cut = orjson.loads((folder / "changelog-cutoff.json").read_bytes())["batch_id"]
    except (OSError, ValueError):
        return None
    return None if (folder / f"batch-{cut:020d}.json").exists() else cut


def scrape(url: str) -> dict[str, list]:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_consume_stops_cleanly_on_sigterm_mid_batch_and_reports_metrics(spark, tmp_path: Path) -> None:
    stream = f"file://{tmp_path / 'stream'}/changes?protocol=canal-json&enable-tidb-extension=true&partition-num=3"
    lake, log = tmp_path / "lake", tmp_path / "consume.log"
    cp = lake / "_changefeed" / "checkpoint"
    port = _free_port()
    (tmp_path / "stream").mkdir()  # the transport's folder is there; its topic comes once the consumer is up
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "changefeed.cli", "consume", "--from", stream, "--lake",
                                 str(lake), "--trigger", "processing-time=1 second", "--metrics-port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=err)
    src: Source | None = None
    try:
        url = f"http://127.0.0.1:{port}"
        # the source starts once Spark is up (the metrics server is), so the first micro-batch stays small
        wait_for("the metrics server", lambda: "metrics on" in log.read_text(), timeout=600, proc=proc, log=log)
        src = Source(stream, rate=60)
        wait_for("a micro-batch with changes", lambda: any(r["rows"] for r in records(lake)), timeout=600, proc=proc,
                 log=log)

        # /metrics while it runs, parsed: each figure is one the lake's progress records hold (a batch's figures
        # follow its progress record, so a scrape between the two still shows the batch before)
        m = wait_for("a micro-batch in /metrics", lambda: (lambda m: m if m["changefeed_batches"][0].value else None)(
            scrape(url)), timeout=120, proc=proc, log=log)
        recs = records(lake)
        batches = m["changefeed_batches"][0].value
        assert 1 <= batches <= len(recs)
        applied = m["changefeed_applied_commit_ts"][0].value
        assert applied in {float(physical_ms(r["applied_ts"])) for r in recs[:int(batches)]}
        assert m["changefeed_changes_applied"][0].value == sum(r["rows"] for r in recs[:int(batches)])
        hist = {s.name: s.value for s in m["changefeed_batch_seconds"]}
        assert hist["changefeed_batch_seconds_count"] == batches and hist["changefeed_batch_seconds_sum"] > 0
        marks = {s.labels["partition"]: s.value for s in m["changefeed_partition_watermark"]}
        assert set(marks) == {f"changes/{p}" for p in range(3)}
        assert all(v <= physical_ms(max(r["watermarks"][k] for r in recs)) for k, v in marks.items())
        assert {s.labels["phase"] for s in m["changefeed_batch_phase_seconds"]} >= {"decode", "progress"}
        assert m["changefeed_lag_seconds"][0].value >= 0
        with urllib.request.urlopen(url + "/healthz", timeout=10) as r:
            assert r.status == 200 and r.read() == b"ok\n"

        # SIGTERM while a micro-batch is being applied
        running = wait_for("a micro-batch in flight", lambda: in_flight(lake), timeout=600, proc=proc, log=log)
        os.kill(proc.pid, signal.SIGTERM)
        # then the source closes (a transaction boundary, its last watermark: milliseconds, while the batch in
        # flight takes seconds to finish), so the batch Spark plans after this one holds the whole rest of the
        # stream and one restart takes it (a source still writing left a tail for a second restart: a JVM start
        # and a cold micro-batch more, ~45 s, for no property of its own). The signal goes first: a batch that
        # ended while the source closed would otherwise let the next one be the batch the SIGTERM lands in
        src.stop.set()
        src.thread.join(60)
        rc = proc.wait(600)
    finally:
        if proc.poll() is None:
            proc.kill()
        if src is not None:
            src.stop.set()
            src.thread.join(60)
    assert src is not None
    text = log.read_text()
    assert rc == 0, text
    assert "SIGTERM: finishing the running micro-batch" in text
    assert "stopped on SIGTERM" in text
    # the summary: every change the applied micro-batches took in (none before this run)
    summary = [x for x in text.splitlines() if x.startswith("consumed ")]
    assert len(summary) == 1, text
    assert summary[0].startswith(f"consumed {sum(r['rows'] for r in records(lake)):,} changes into {lake} in "), text
    assert "Traceback" not in text, text
    # the batch in hand completed: committed by Spark and recorded by the consumer
    assert (cp / "commits" / str(running)).exists()
    stopped = records(lake)
    assert stopped[-1]["batch_id"] == running
    kept = {r["batch_id"]: (lake / "_changefeed" / "progress" / f"batch-{r['batch_id']:020d}.json").stat().st_mtime_ns
            for r in stopped}
    try:
        urllib.request.urlopen(url + "/metrics", timeout=5)
        raise AssertionError("the metrics server outlived the consumer")
    except urllib.error.URLError:
        pass

    # a restart takes the rest of the stream and re-applies nothing (the file source has no available-now: a
    # batch Spark planned before the stop, refused, is all a first restart runs, as Spark's trigger-once does).
    # The first restart's Python reader connects back late: the consumer starts the query again and says so once.
    env, held = late_python(tmp_path)
    for attempt in range(2):
        r = cli("consume", "--from", stream, "--lake", str(lake), env=env if attempt == 0 else None)
        assert r.returncode == 0, r.stderr.decode()
        if attempt == 0:
            assert held.exists(), r.stderr.decode()  # the reader was started through the wrapper, held back once
            assert r.stderr.decode().count("did not connect back within 10 s") == 1, r.stderr.decode()
        if sum(x["rows"] for x in records(lake)) >= src.rows:
            break
    after = records(lake)
    assert [x["batch_id"] for x in after] == list(range(len(after)))
    assert after[len(stopped)]["batch_id"] == stopped[-1]["batch_id"] + 1
    for b, mtime in kept.items():  # no batch of the first run was run again
        assert (lake / "_changefeed" / "progress" / f"batch-{b:020d}.json").stat().st_mtime_ns == mtime
    assert sum(x["rows"] for x in after) == src.rows  # each change of the stream taken in once

    # status: the same figures, from the lake, with no consumer running. status and verify are the commands run
    # in this process (the consumer is the process under test, they are not): verify on the shared session, not a
    # JVM of its own
    r = CliRunner().invoke(app, ["status", "--lake", str(lake), "--json"])
    assert r.exit_code == 0, r.output
    st = orjson.loads(r.stdout_bytes)
    assert st["batches"] == len(after) and st["last_batch_id"] == after[-1]["batch_id"]
    assert st["applied_ts"] == after[-1]["applied_ts"] > 0
    assert st["watermarks"] == after[-1]["watermarks"]
    assert st["changes"] == src.rows and st["dead_letters"] == 0
    assert st["table_names"] == sorted(f"app.{p.name}" for p in (lake / "app").iterdir())
    r = CliRunner().invoke(app, ["status", "--lake", str(lake)])
    assert r.exit_code == 0 and f"{src.rows:,} changes" in r.stdout, r.output

    # verify against the stream: compared at the applied watermark, which the source's last watermark reached
    r = CliRunner().invoke(app, ["verify", "--lake", str(lake), "--against", stream])
    assert r.exit_code == 0, r.output
    assert f"compared at the lake's applied watermark {st['applied_ts']}: 0 changes" in r.stderr, r.output
    assert "verification passed" in r.stderr, r.output
