"""The main job: a source, an encoder, a transport, the Spark consumer into Delta, and verification, in one run.

The producer (source -> encoder -> router -> transport) runs in a thread while the Spark consumer keeps
applying micro-batches, so the lag measured is the real one: from the moment a commit ts left the producer
to the moment the lake held every table at (at least) that commit ts.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ConfigError
from .eventline import EventReader, EventWriter, read_lines
from .model import Event
from .traits import stream_traits
from .upstream import UpstreamState, state_events
from .workdir import open_folder

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from .spark.apply import BatchReport
    from .spark.verify import VerifyReport

log = logging.getLogger("changefeed.job")


@dataclass
class RunOptions:
    protocol: str = "canal-json"
    options: dict[str, str] = field(default_factory=lambda: {"enable-tidb-extension": "true"})
    sink_uri: str | None = None  # default: file://<work>/stream/changes, 3 partitions
    work: Path = Path("changefeed-run")
    source: str = "workload"  # or a file of event lines, or mysql://user:pass@host:port/?tables=db.*
    transactions: int = 1000
    seed: int = 1
    scd: int = 1
    trigger_interval: str = "1 second"
    max_records_per_trigger: int | None = None
    rate: int | None = None  # events per second the source sends at most (None: as fast as it can)
    table_features: str = "auto"  # auto | minimal (spark/table_features.py)
    watermark_interval_ms: int = 100  # of commit time
    config: Path | None = None  # a changefeed TOML (dispatchers, column selectors ...)
    vacuum_retention: float | None = None  # hours: the consumer VACUUMs its tables (None: never)
    lake_uri: str | None = None  # the lake where the user keeps it (a folder, s3a://...); None: <work>/lake
    catalog: str | None = None  # a Spark catalog naming the tables (spark/apply/names.py)
    database_prefix: str = ""
    table_format: str = "delta"  # or delta+iceberg
    fresh: bool = True  # --fresh: a lake of the user's (lake_uri) must not hold an earlier run's tables

    @property
    def lake(self) -> Path:
        return self.work / "lake"

    @property
    def lake_location(self) -> str:
        """Where the run's lake is: the user's --lake, else the work folder's."""
        return self.lake_uri or str(self.lake.resolve())


@dataclass
class Sample:
    """One point of the run's timeline (seconds since the start)."""

    at: float
    produced: int  # events the producer had sent
    applied: int  # changes the consumer had taken in
    lag: float | None  # seconds from a commit ts leaving the producer to the lake holding it


@dataclass
class RunReport:
    options: RunOptions
    events: int = 0
    messages: int = 0
    produce_seconds: float = 0.0
    changes: int = 0
    dead_letters: int = 0
    ddl: int = 0
    upgrades: list[str] = field(default_factory=list)  # Delta features DDL turned on, one line each
    batches: int = 0
    consume_seconds: float = 0.0
    verify_seconds: float = 0.0
    seconds: float = 0.0
    samples: list[Sample] = field(default_factory=list)
    verification: VerifyReport | None = None
    chart: Path | None = None
    expected: Path | None = None
    stopped: str | None = None  # why the source stopped before its end (a signal), if it did

    @property
    def lags(self) -> list[float]:
        return [s.lag for s in self.samples if s.lag is not None]


class Hooks:
    """What a caller (the CLI's progress bars) hears about: override what you need."""

    def stage(self, name: str, total: int | None = None) -> None: ...
    def produced(self, events: int) -> None: ...
    def batch(self, rep: BatchReport, changes_total: int, lag: float | None = None) -> None: ...


def default_sink(opts: RunOptions) -> str:
    q = "&".join(f"{k}={v}" for k, v in opts.options.items())
    return f"file://{(opts.work / 'stream').resolve()}/changes?protocol={opts.protocol}&partition-num=3" + \
        (f"&{q}" if q else "")


def table_topics(sink_uri: str, protocol: str, opts: RunOptions) -> tuple[str | None, str]:
    """The Avro protocols write one topic per table: unless the user's TOML routes tables, a changefeed TOML
    giving each table `<topic>_{schema}_{table}`, and the consumer's source, a pattern taking every topic of
    the changefeed (those created mid-stream too); with the user's TOML, the patterns of its dispatchers'
    topic expressions. Other protocols: the TOML given and the sink's topic."""
    base = sink_uri.split("?", 1)[0]
    if not stream_traits(protocol).table_per_topic:
        return (str(opts.config) if opts.config else None), base
    head, topic = base.rsplit("/", 1)
    if opts.config is not None:  # the topics the user's dispatchers can give, not every topic there is
        if "*" in topic:
            return str(opts.config), base
        from .sinkconfig import resolve

        return str(opts.config), f"{head}/{','.join(resolve(sink_uri, opts.config)[2].topic_globs())}"
    cfg = opts.work / "changefeed.toml"
    cfg.write_text("[sink]\ndispatchers = [{matcher = ['*.*'], topic = \"" + topic + "_{schema}_{table}\"}]\n")
    return str(cfg), f"{head}/{topic}*"


def source_events(opts: RunOptions, state_box: list[UpstreamState]) -> Iterator[Event]:
    """The source's events; `state_box[0]` is the upstream state once they are all out."""
    if opts.source == "workload":
        from .workload import Workload

        w = Workload(opts.seed, opts.transactions)
        yield from w
        state_box.append(w.state)
        return
    from .mysql.uri import is_mysql_uri

    if is_mysql_uri(opts.source):
        from .mysql.source import mysql_events

        yield from mysql_events(opts.source, state_box)
        return
    state = UpstreamState()
    reader = EventReader()
    with open(opts.source, "rb") as f:
        for _, line in read_lines(f):
            ev = reader.parse(line)
            state.apply(ev)
            yield ev
    state_box.append(state)


class _Sent:
    """When each commit ts left the producer (sampled), to measure the lag of what the consumer applied."""

    def __init__(self) -> None:
        self.ts: list[int] = []
        self.at: list[float] = []
        self.events: list[int] = []
        self.lock = threading.Lock()

    def note(self, commit_ts: int, at: float, events: int) -> None:
        with self.lock:
            if not self.ts or commit_ts > self.ts[-1]:
                self.ts.append(commit_ts)
                self.at.append(at)
                self.events.append(events)

    def when(self, commit_ts: int) -> float | None:
        """The time the first commit ts >= `commit_ts` was sent (the transaction was complete by then)."""
        with self.lock:
            i = bisect.bisect_left(self.ts, commit_ts)
            return self.at[i] if i < len(self.ts) else None


def produce(events: Iterable[Event], sink_uri: str, opts: RunOptions, rep: RunReport, sent: _Sent,
            on_progress: Callable[[int], None], t0: float, config: str | None = None,
            stop: threading.Event | None = None) -> None:
    """Send the source's events; once `stop` is set, stop at the next transaction boundary (a new commit ts),
    and close with a last watermark: the stream is then complete up to what it holds."""
    from .produce import open_producer

    producer, transport, _ = open_producer(sink_uri, config, ddl_to_all_partitions=True,
                                           watermark_interval_ms=opts.watermark_interval_ms)
    start = time.monotonic()
    last_note = 0.0
    last_ts: int | None = None
    try:
        for ev in events:
            if ev.commit_ts != last_ts and stop is not None and stop.is_set():
                rep.stopped = f"the source stopped on request after {producer.events:,} events"
                break
            producer.send(ev)
            last_ts = ev.commit_ts
            now = time.monotonic()
            if opts.rate and producer.events > opts.rate * (now - start):
                time.sleep(producer.events / opts.rate - (now - start))  # a live source's pace
                now = time.monotonic()
            if now - last_note > 0.02:
                sent.note(ev.commit_ts, now - t0, producer.events)
                last_note = now
                on_progress(producer.events)
        producer.close()
    finally:
        transport.close()
    rep.events, rep.messages = producer.events, producer.sent
    rep.produce_seconds = time.monotonic() - start
    if producer.last_commit_ts is not None:  # the final watermark went out just now
        sent.note(producer.last_commit_ts, time.monotonic() - t0, producer.events)
    on_progress(producer.events)


def produce_source(opts: RunOptions, sink_uri: str, config: str | None, t0: float, sent: _Sent,
                   stop: threading.Event | None) -> tuple[RunReport, UpstreamState | None]:
    """What the source's process runs (sourceproc.py): the source produced, its totals, and the upstream state
    once the source is all out (None when it stopped before its end)."""
    rep = RunReport(opts)
    box: list[UpstreamState] = []
    produce(source_events(opts, box), sink_uri, opts, rep, sent, lambda _n: None, t0, config, stop)
    return rep, (box[0] if box else None)


# what `run` writes in its --work folder (listed in the folder's marker, so --fresh removes exactly these)
RUN_ENTRIES = ("stream", "lake", "expected.jsonl", "run-report.png", "changefeed.toml")


def run(spark: SparkSession, opts: RunOptions, hooks: Hooks | None = None, stop: threading.Event | None = None,
        on_report: Callable[[BatchReport, float | None], None] | None = None) -> RunReport:
    """Produce, consume and verify; the report says how fast and whether the lake equals upstream. `stop`: set,
    the source stops at a transaction boundary, the consumer applies what it sent, and that is verified.
    `on_report`: each micro-batch's report and the lag measured (metrics)."""
    from .sinkconfig import codec_options
    from .spark.layout import LakeLayout, schema_store
    from .spark.pipeline import WORKER_RESTARTS, apply_changes, read_changes, worker_was_late
    from .spark.source import uncapped
    from .spark.verify import verify

    hooks = hooks or Hooks()
    rep = RunReport(opts)
    sink_uri = opts.sink_uri or default_sink(opts)
    protocol, codec_opts = codec_options(sink_uri)
    work = open_folder(opts.work, "--work")  # refused when it holds files changefeed did not create
    for name in RUN_ENTRIES:
        work.claim(name, "--work")
    config, consume_uri = table_topics(sink_uri, protocol, opts)
    lake = opts.lake_location
    if opts.lake_uri:
        from .spark.objectstore import check_store

        check_store(spark, lake)  # a wrong endpoint or bad credentials: one line naming the store
        if opts.fresh:
            _fresh_lake(spark, lake)
    cp = LakeLayout(lake).checkpoint
    t0 = time.monotonic()
    sent = _Sent()

    # the topic (and its partitions) exist before the consumer starts reading
    from .produce import open_producer

    probe, transport, _ = open_producer(sink_uri, config)
    transport.partitions(probe.router.default_topic)  # creates a Kafka topic (a file topic's folder exists)
    transport.close()

    hooks.stage("produce", opts.transactions if opts.source == "workload" else None)
    # the source in its own process (sourceproc.py), started now so that its imports overlap the consumer's start
    from .sourceproc import SourceProcess

    worker = SourceProcess(produce_source, opts, sink_uri, config, t0, rep, sent, hooks.produced, stop)

    def on_batch(b: BatchReport) -> None:
        rep.batches += 1
        rep.changes += b.rows_in
        rep.dead_letters += b.errors
        rep.ddl += b.ddl_applied
        rep.upgrades += [u.line() for u in b.upgrades]
        now = time.monotonic() - t0
        upto = b.applied_ts or b.max_ts
        at = sent.when(upto) if upto else None
        rep.samples.append(Sample(now, rep.events or 0, rep.changes, None if at is None else max(0.0, now - at)))
        hooks.batch(b, rep.changes, rep.samples[-1].lag)
        if on_report is not None:
            on_report(b, rep.samples[-1].lag)

    from .sinkconfig import kafka_settings

    said = uncapped(consume_uri, opts.max_records_per_trigger)
    if said:
        log.warning("changefeed: %s", said)
    try:  # the source's process ends with the run, however it ends
        changes = read_changes(spark, consume_uri, protocol, codec_opts, schema_store=schema_store(cp),
                               max_records_per_trigger=opts.max_records_per_trigger,
                               kafka_settings=kafka_settings(sink_uri, opts.config))  # the sink's TLS/SASL
        consume_start = time.monotonic()
        for _ in range(1 + WORKER_RESTARTS):  # again when Spark's Python reader connected back late (pipeline.py)
            query: Any = apply_changes(changes, lake, checkpoint=cp, stored_as_scd_type=opts.scd,
                                       trigger=f"processing-time={opts.trigger_interval}", on_batch=on_batch,
                                       table_features=opts.table_features, vacuum_retention_hours=opts.vacuum_retention,
                                       catalog=opts.catalog, database_prefix=opts.database_prefix,
                                       table_format=opts.table_format)
            ready = time.monotonic() + 300
            while query.lastProgress is None and query.exception() is None and time.monotonic() < ready \
                    and "Waiting for data" not in str(query.status.get("message", "")):
                time.sleep(0.2)  # the consumer is up: from here on the lag is the pipeline's, not Spark's start-up
            if not worker_was_late(query.exception()):
                break
            log.warning("changefeed: Spark's Python reader did not connect back within 10 s (a loaded machine): "
                        "starting the query again from its checkpoint")
    except BaseException:
        worker.close()
        raise
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.5)
            if query.exception() is not None:
                break
        if worker.failure is not None:
            raise worker.failure
        hooks.stage("consume")
        query.processAllAvailable()  # everything the producer wrote, then stop
    finally:
        query.stop()
        worker.close()
    if query.exception() is not None:
        raise query.exception()
    rep.consume_seconds = time.monotonic() - consume_start
    state = worker.state or sent_state(opts, rep, sink_uri)
    rep.expected = opts.work / "expected.jsonl"
    with open(rep.expected, "wb") as f:
        f.writelines(expected_lines(state))
    hooks.stage("verify")
    v0 = time.monotonic()
    rep.verification = verify(spark, lake, state)
    rep.verify_seconds = time.monotonic() - v0
    rep.seconds = time.monotonic() - t0
    rep.samples.append(Sample(rep.seconds, rep.events, rep.changes, rep.samples[-1].lag if rep.samples else None))
    rep.chart = chart(rep, sent, opts.work / "run-report.png")
    return rep


def sent_state(opts: RunOptions, rep: RunReport, sink_uri: str) -> UpstreamState:
    """The upstream state after the events a stopped source sent: its first events again (a workload or a file
    gives the same ones), or, from a live server, the stream as the consumer reads it."""
    from itertools import islice

    from .mysql.uri import is_mysql_uri
    from .upstream import final_state

    if is_mysql_uri(opts.source):
        from .spark.verify import events_from_stream

        return final_state(events_from_stream(sink_uri))
    return final_state(islice(source_events(opts, []), rep.events))


def _fresh_lake(spark: SparkSession, lake: str) -> None:
    """A fresh run on a lake of the user's: refused when an earlier consumer's state is there (its checkpoint
    would resume, against a stream made anew). changefeed never deletes a lake it was given."""
    from .spark.layout import LakeLayout

    jvm = spark._jvm  # type: ignore[attr-defined]
    p = jvm.org.apache.hadoop.fs.Path(LakeLayout(lake).meta)
    if p.getFileSystem(spark._jsc.hadoopConfiguration()).exists(p):  # type: ignore[attr-defined]
        raise ConfigError(f"--lake {lake} already holds a consumer's tables and checkpoint: give a new path, or "
                          "--resume to go on from them (changefeed does not delete a lake it was given)")


def chart(rep: RunReport, sent: _Sent, path: Path) -> Path:
    """Progress (events produced, changes applied) and end-to-end lag over the run, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    prod_rate = rep.events / rep.produce_seconds if rep.produce_seconds else 0
    cons_rate = rep.changes / rep.consume_seconds if rep.consume_seconds else 0
    ax1.plot([0.0, *sent.at], [0, *sent.events], label=f"events produced ({prod_rate:,.0f}/s)")
    s = rep.samples
    ax1.step([0.0, *(p.at for p in s)], [0, *(p.applied for p in s)], where="post",
             label=f"changes applied to Delta ({cons_rate:,.0f}/s)")
    ax1.set_ylabel("cumulative")
    ax1.legend(loc="upper left")
    ok = rep.verification is not None and rep.verification.ok
    ax1.set_title(f"changefeed run: {rep.options.protocol}, {rep.events:,} events, "
                  f"verification {'passed' if ok else 'FAILED'}")
    lag = [(p.at, p.lag) for p in s if p.lag is not None]
    ax2.plot([a for a, _ in lag], [b for _, b in lag], marker="o", color="tab:red")
    ax2.set_ylim(bottom=0)
    ax2.set_ylabel("end-to-end lag (s)")
    ax2.set_xlabel("seconds since start")
    ax2.set_xlim(left=0)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def expected_lines(state: UpstreamState) -> Iterator[bytes]:
    writer = EventWriter()
    for ev in state_events(state):
        yield writer.line(ev) + b"\n"

