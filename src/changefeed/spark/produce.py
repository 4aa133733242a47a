"""Spark as the producer: a DataFrame of changes (`read_changes`' shape) encoded and sent on the executors.

Two `mapInArrow` stages. The first rebuilds each change's Event (rebuild.py) and asks the sink's router
(routing.py, TiCDC's dispatchers) for its target topic and partition: a row goes to one (an UPDATE whose
partition key changes, split as TiCDC splits it, to two), a DDL to every partition of its topic (of every
topic when it names no table). The rows are then repartitioned by target and sorted by commit ts (then their
place in the source), so that one task writes one target partition, in commit order. The second stage runs,
per target, the CLI's own `Producer` (produce.py: encoder, BOOTSTRAP, DDL placement) over a transport that
writes only that target partition (`OnePartition`): the other copies of a broadcast are other tasks' to write.

Watermarks: a target partition gets a WATERMARK for ts W only when every change at or before W is in the
DataFrame (`resolved`): the whole DataFrame for a batch (`resolved="complete"`), or, for a stream, the
source's own watermarks once every source partition passed them (transcode.py). It gets the WATERMARK after
its changes at or before W, at the same commit-time cadence as `changefeed produce`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ..eventline import table_from_json
from ..model import Event, Kind, TableInfo
from ..tso import physical_ms
from .rebuild import EVENT_COLUMNS, DefBook, Rebuilder

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

# the source's place of a change: the sort key after commit_ts within a target partition
ORDER_COLUMNS = ("topic", "partition", "offset", "idx")
ROUTED_SCHEMA = ("kind string, database string, `table` string, commit_ts long, schema_version long, "
                 "position string, before map<string,string>, after map<string,string>, ddl string, ddl_type string, "
                 "table_def string, pre_table_def string, topic string, partition int, offset long, idx int, "
                 "_tid int")
SENT_SCHEMA = "_tid int, events long, messages long"


def ddl_key(commit_ts: int, database: str | None, table: str | None, query: str | None) -> str:
    """A DDL's identity across micro-batches (its copies from each source partition, a batch run again):
    commit ts first, the statement as a digest (the key is kept in the writer's state file)."""
    import hashlib

    digest = hashlib.sha1((query or "").encode()).hexdigest()[:16]
    return f"{int(commit_ts)}/{database or ''}/{table or ''}/{digest}"


@dataclass(frozen=True)
class SinkPlan:
    """What every task needs to open the sink: plain data, pickled to the executors."""

    sink_uri: str
    config: str | None = None
    ddl_to_all_partitions: bool = False
    watermark_interval_ms: int = 1000

    def resolve(self) -> tuple[Any, Any, Any]:
        """(sink, codec config, router), set as `open_producer` sets them."""
        from ..sinkconfig import resolve

        sink, cfg, router = resolve(self.sink_uri, self.config)
        router.canal_ddl_to_partition_zero = cfg.protocol == "canal-json" and not self.ddl_to_all_partitions
        router.split_key_changes = cfg.protocol == "avro"
        return sink, cfg, router

    def transport(self, sink: Any, cfg: Any) -> Any:
        if sink.scheme == "file":
            from ..transport.files import FileProducer

            return FileProducer(sink.folder, sink.partition_num)
        from ..transport.kafka import KafkaTransport

        return KafkaTransport(sink, cfg.max_message_bytes)


def topic_of(ev: Event, router: Any, cfg: Any) -> str | None:
    """The topic of an event's messages (None: a DDL that names no table goes to every topic)."""
    t = ev.route_table
    if t is None or not t.table:
        return None
    if cfg.protocol == "debezium-avro" and not router.has_topic_rules:
        from ..debezium.encoder import topic_name

        return topic_name(cfg.cluster_id, t.schema, t.table)
    return router.topic(t.schema, t.table)


@dataclass
class Targets:
    """Every (topic, partition) the DataFrame's messages go to, numbered: the shuffle key."""

    partitions: dict[str, int] = field(default_factory=dict)  # topic -> partition count

    def ids(self) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        for topic in sorted(self.partitions):
            for p in range(self.partitions[topic]):
                out[(topic, p)] = len(out)
        return out


class OnePartition:
    """A transport that writes one partition of one topic: broadcasts and sends elsewhere are other tasks'."""

    def __init__(self, inner: Any, topic: str, partition: int, counts: dict[str, int]) -> None:
        self.inner, self.topic, self.partition, self.counts = inner, topic, partition, counts
        self.sent = 0

    def partitions(self, topic: str) -> int:
        return self.counts.get(topic) or self.inner.partitions(topic)

    def send(self, topic: str, partition: int, key: bytes | None, value: bytes | None) -> None:
        if topic == self.topic and partition == self.partition:
            self.inner.send(topic, partition, key, value)
            self.sent += 1

    def broadcast(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        self.send(topic, self.partition if topic == self.topic else -1, key, value)

    def flush(self) -> None:
        self.inner.flush()


def _rows(batch: pa.RecordBatch, names: tuple[str, ...]) -> list[tuple]:
    cols = [batch.column(batch.schema.get_field_index(n)).to_pylist() for n in names]
    return list(zip(*cols, strict=True))


def route_stage(plan: SinkPlan, book: DefBook, dialect: str, targets: Targets, sent_ddl: frozenset[str] = frozenset()
                ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Stage one (executors): each change row with the number of each target it goes to (none: a DDL in
    `sent_ddl`, which an earlier micro-batch sent)."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        _, cfg, router = plan.resolve()
        rb = Rebuilder(book, dialect)
        ids = targets.ids()
        counts = targets.partitions
        every = list(ids.values())
        for batch in batches:
            take: list[int] = []
            tids: list[int] = []
            for i, row in enumerate(_rows(batch, EVENT_COLUMNS)):
                if sent_ddl and row[0] == "ddl" and ddl_key(row[3], row[1], row[2], row[8]) in sent_ddl:
                    continue
                ev = router.column_selector.apply(rb.event(row))
                if ev.kind is Kind.DDL:
                    topic = topic_of(ev, router, cfg)
                    dest = every if topic is None else [ids[(topic, p)] for p in range(counts[topic])]
                else:
                    dest = []
                    for part in router.split_update(ev):
                        topic = topic_of(part, router, cfg) or router.default_topic
                        router.partition_num = counts[topic]
                        tid = ids[(topic, router.partition(part) or 0)]
                        if tid not in dest:
                            dest.append(tid)
                take.extend([i] * len(dest))
                tids.extend(dest)
            cols = batch.select([n for n in ROUTED_SCHEMA_NAMES if n != "_tid"]).take(pa.array(take, pa.int64()))
            yield pa.RecordBatch.from_arrays([*cols.columns, pa.array(tids, pa.int32())], names=ROUTED_SCHEMA_NAMES)

    return run


ROUTED_SCHEMA_NAMES = (*EVENT_COLUMNS, *ORDER_COLUMNS, "_tid")


def send_stage(plan: SinkPlan, book: DefBook, dialect: str, targets: Targets, resolved: int | None,
               floor: int | None = None) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Stage two (executors): the rows of some targets, sorted by target then commit order, sent by the CLI's
    Producer, one per target, with watermarks up to `resolved`."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        from ..codecs import make_encoder
        from ..produce import Producer

        sink, cfg, router = plan.resolve()
        names = {v: k for k, v in targets.ids().items()}
        rb = Rebuilder(book, dialect)
        inner = plan.transport(sink, cfg)
        avro_topics = router if cfg.protocol == "avro" or router.has_topic_rules else None
        stats: dict[int, list[int]] = {}
        cur: _TargetWriter | None = None
        try:
            for batch in batches:
                tid_col = batch.column(batch.schema.get_field_index("_tid")).to_pylist()
                for tid, row in zip(tid_col, _rows(batch, EVENT_COLUMNS), strict=True):
                    if cur is None or cur.tid != tid:
                        if cur is not None:
                            stats[cur.tid] = cur.finish()
                        topic, p = names[tid]
                        out = OnePartition(inner, topic, p, targets.partitions)
                        producer = Producer(make_encoder(cfg, topic=avro_topics), router, out, watermarks=False)
                        producer.topics = {router.default_topic: None, topic: None}
                        cur = _TargetWriter(tid, producer, out, resolved, plan.watermark_interval_ms)
                        cur.marked = floor  # a watermark never goes back (nor repeats) across micro-batches
                    if row[0] == "watermark":
                        cur.watermark(int(row[3]))
                    else:
                        cur.send(rb.event(row))
            if cur is not None:
                stats[cur.tid] = cur.finish()
            inner.flush()  # Kafka: every delivery acknowledged (or the task fails); files: fsync
        finally:
            close = getattr(inner, "close", None)
            if close is not None:
                close()
        tids = list(stats)
        yield pa.RecordBatch.from_arrays(
            [pa.array(tids, pa.int32()), pa.array([stats[t][0] for t in tids], pa.int64()),
             pa.array([stats[t][1] for t in tids], pa.int64())], names=["_tid", "events", "messages"])

    return run


class _TargetWriter:
    """One target partition's Producer, with the watermarks it may send."""

    def __init__(self, tid: int, producer: Any, out: OnePartition, resolved: int | None, interval_ms: int) -> None:
        self.tid, self.producer, self.out, self.resolved, self.interval = tid, producer, out, resolved, interval_ms
        self.events = 0
        self.current: int | None = None
        self.marked: int | None = None
        self.marked_ms: int | None = None

    def watermark(self, ts: int) -> None:
        if self.marked is None or ts > self.marked:
            self.producer.send(Event(kind=Kind.WATERMARK, commit_ts=ts))
            self.marked, self.marked_ms = ts, physical_ms(ts)

    def send(self, ev: Event) -> None:
        cur = self.current
        if cur is not None and ev.commit_ts != cur and self.resolved is not None and cur <= self.resolved and (
                self.marked_ms is None or physical_ms(cur) - self.marked_ms >= self.interval):
            self.watermark(cur)  # the transaction at `cur` is complete here, and everywhere (resolved)
        self.current = ev.commit_ts
        self.producer.send(ev)
        self.events += 1

    def finish(self) -> list[int]:
        return [self.events, self.out.sent]


@dataclass
class WriteReport:
    events: int = 0
    messages: int = 0
    targets: int = 0
    resolved: int | None = None
    topics: list[str] = field(default_factory=list)
    plan: Targets | None = None  # the targets known after this write (the next micro-batch's `targets`)


def _dialect_of(df: DataFrame) -> str:
    from .pipeline import _carried

    stream = _carried(df)
    return stream.traits.text_dialect if stream is not None else "text"


@dataclass
class Survey:
    """What one aggregation over the changes tells the driver: per source partition, kind, table and table
    definition, the first and last commit ts (a few rows: most rows carry no definition)."""

    rows: list[Any]

    def book(self, book: DefBook | None = None) -> DefBook:
        """The table definitions the changes carry (a row's shape, a DDL's before and after), first commit ts each."""
        book = book if book is not None else DefBook()  # an empty book is falsy (__len__)
        for r in self.rows:
            kind, db, tb, ver, tdef, pre, lo = (r["kind"], r["database"], r["table"], r["schema_version"],
                                               r["table_def"], r["pre_table_def"], r["lo"])
            if tdef and kind in ("insert", "update", "delete", "ddl", "bootstrap"):
                book.merge([(db, tb, ver, tdef, lo, 2 if kind in ("ddl", "bootstrap") else 1)])
            if pre:  # a DDL's before: the definition in force until it
                t = table_from_json(orjson.loads(pre))
                if t.table:
                    book.add(t.schema, t.table, max(0, int(lo or 0) - 1), t.version, pre, 2)
        return book

    def tables(self) -> list[tuple[str | None, str | None]]:
        return sorted({(r["database"], r["table"]) for r in self.rows if r["kind"] in SENT_KINDS})

    def last_ts(self) -> int | None:
        return max((r["hi"] for r in self.rows if r["kind"] in SENT_KINDS and r["hi"] is not None), default=None)

    def ddl_keys(self) -> set[str]:
        """The DDL the changes hold (`ddl_key`)."""
        return {ddl_key(r["lo"], r["database"], r["table"], r["ddl"]) for r in self.rows if r["kind"] == "ddl"}

    def partition_ts(self, watermarks: bool) -> dict[str, int]:
        """Per source partition ("topic/partition"): its last watermark, or its last change's commit ts."""
        out: dict[str, int] = {}
        for r in self.rows:
            if (r["kind"] == "watermark") == watermarks and (watermarks or r["kind"] in SENT_KINDS) \
                    and r["hi"] is not None:
                k = f"{r['topic']}/{r['partition']}"
                out[k] = max(out.get(k, -1), int(r["hi"]))
        return out


SENT_KINDS = ("insert", "update", "delete", "ddl")


def survey(df: DataFrame) -> Survey:
    from pyspark.sql import functions as F

    rows = (df.where("kind <> 'error'")
            .groupBy("topic", "partition", "kind", "database", "table", "schema_version", "table_def", "pre_table_def",
                     "ddl")
            .agg(F.min("commit_ts").alias("lo"), F.max("commit_ts").alias("hi")).collect())
    return Survey(rows)


def collect_defs(df: DataFrame, book: DefBook | None = None) -> DefBook:
    """The table definitions the changes carry (a row's shape, a DDL's before and after), first commit ts each."""
    return survey(df).book(book)


def sendable(df: DataFrame) -> DataFrame:
    """The changes a producer sends: rows and DDL (a DDL once, however many partitions it came through);
    the source's watermarks and BOOTSTRAP messages are its own (the sink gets its own), dead letters stay."""
    cols = [*EVENT_COLUMNS, *ORDER_COLUMNS]
    rows = df.where("kind IN ('insert', 'update', 'delete')").select(*cols)
    ddl = df.where("kind = 'ddl'").dropDuplicates(["commit_ts", "database", "table", "ddl"]).select(*cols)
    return rows.unionByName(ddl)


def plan_targets(plan: SinkPlan, tables: list[tuple[str | None, str | None]], known: Targets | None = None) -> Targets:
    """The topics the tables' messages go to (and the default topic), created now if missing, with their
    partition counts (before any task runs: tasks never race to create a topic)."""
    sink, cfg, router = plan.resolve()
    out = Targets(dict(known.partitions) if known else {})
    names = {router.default_topic}
    for db, tb in tables:
        if db and tb:
            topic = topic_of(Event(kind=Kind.INSERT, table=TableInfo(db, tb)), router, cfg)
            names.add(topic or router.default_topic)
    missing = [n for n in sorted(names) if n not in out.partitions]
    if missing:
        transport = plan.transport(sink, cfg)
        try:
            for n in missing:
                out.partitions[n] = transport.partitions(n)
        finally:
            close = getattr(transport, "close", None)
            if close is not None:
                close()
    return out


def write_changes(df: DataFrame, sink_uri: str, *, config: str | Path | None = None,
                  resolved: int | str | None = "complete", ddl_to_all_partitions: bool = False,
                  watermark_interval_ms: int = 1000, dialect: str | None = None, book: DefBook | None = None,
                  targets: Targets | None = None, floor: int | None = None, seen: Survey | None = None,
                  sent_ddl: frozenset[str] = frozenset()) -> WriteReport:
    """Send a (batch) DataFrame of changes to a sink URI (`kafka://...` or `file:///...`, any protocol),
    encoded on the executors, routed and partitioned as TiCDC routes them, in commit order per partition.

    `resolved`: "complete" (every change up to the DataFrame's last commit ts is in it: a replay, a change
    data feed), a commit ts up to which it is complete (a stream's micro-batch), or None (no watermark).
    `dialect`: the text of the images ("canal" for a plain canal-json stream's, else "text"; by default
    what `read_changes` gave). `book`, `targets`: what earlier micro-batches learnt (the report's `plan` is the
    next one's `targets`); `floor`: the watermark they sent last (none at or below it is sent again); `seen`: the
    changes' `survey`, when the caller made it already; `sent_ddl`: the DDL earlier micro-batches sent (`ddl_key`),
    not sent again (a DDL comes once per source partition, not always in the same micro-batch)."""
    from pyspark.sql import functions as F

    plan = SinkPlan(sink_uri, str(config) if config else None, ddl_to_all_partitions, watermark_interval_ms)
    dialect = dialect or _dialect_of(df)
    seen = seen or survey(df)
    book = seen.book(book)
    changes = sendable(df)
    targets = plan_targets(plan, seen.tables(), targets)
    rep = WriteReport(topics=sorted(targets.partitions))
    if resolved == "complete":
        resolved = seen.last_ts()
    assert resolved is None or isinstance(resolved, int)
    rep.resolved = resolved
    spark = df.sparkSession
    ids = targets.ids()
    routed = changes.mapInArrow(route_stage(plan, book, dialect, targets, frozenset(sent_ddl)), ROUTED_SCHEMA)
    if resolved is not None and floor is not None and resolved <= floor:
        resolved = None  # nothing new is complete
    if resolved is not None:  # every target partition gets the watermark, after its changes at or before it
        marks = spark.createDataFrame([("watermark", resolved, tid) for tid in ids.values()],
                                      "kind string, commit_ts long, _tid int")
        routed = routed.unionByName(marks, allowMissingColumns=True)
    n = max(1, len(ids))
    ordered = (routed.repartition(n, "_tid")
               .sortWithinPartitions("_tid", "commit_ts", F.col("kind") == "watermark", *ORDER_COLUMNS))
    sent = ordered.mapInArrow(send_stage(plan, book, dialect, targets, resolved, floor), SENT_SCHEMA).collect()
    rep.events = sum(r["events"] for r in sent)
    rep.messages = sum(r["messages"] for r in sent)
    rep.targets = len(sent)
    rep.plan = targets
    return rep
