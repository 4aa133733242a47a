"""Streams out of Spark: a live stream re-encoded in another protocol (`transcode`), a lake's bronze changelog
sent again (`replay`). Both go through `write_changes` (produce.py).

Transcode is a Structured Streaming query whose micro-batches `ChangeWriter` sends. Its guarantee: Spark's
checkpoint commits a micro-batch's source offsets only after every message of it was acknowledged (Kafka's
idempotent producer, acks=all; files fsynced), so a restart after a crash (SIGKILL included) sends again the
micro-batch it was in, and nothing before it: at least once, the re-sent part bounded by one micro-batch. The
changes sent again carry their commit ts and come before any watermark past them, so a consumer that keeps
the latest change per key by commit ts (ours, TiCDC's) lands each exactly once. A target partition's watermark
goes out only when every source partition has passed it (the source's own watermarks; for a source without
any, the commit ts every partition has moved past), and never goes back, across restarts too: what the
writer knows of the source's watermarks is kept beside the checkpoint (`producer-state.json`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ..errors import ChangefeedError
from .caching import cache_in_session
from .produce import DefBook, SinkPlan, Targets, WriteReport, survey, write_changes

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

STATE_FILE = "producer-state.json"


@dataclass
class WriterState:
    """What the stream writer knows between micro-batches (and restarts)."""

    marks: dict[str, int] = field(default_factory=dict)  # "topic/partition" -> the source's latest watermark
    heads: dict[str, int] = field(default_factory=dict)  # "topic/partition" -> the latest commit ts seen
    floor: int | None = None  # the last watermark sent
    defs: list[list[Any]] = field(default_factory=list)  # the upstream's definitions seen (DefBook.upstream)
    ddl: list[str] = field(default_factory=list)  # the DDL sent (produce.ddl_key) that a source copy may still follow
    events: int = 0
    messages: int = 0
    batches: int = 0

    @classmethod
    def load(cls, folder: str | None) -> WriterState:
        if folder and not folder.startswith(("s3a:", "s3:")) and (Path(folder) / STATE_FILE).is_file():
            known = set(cls.__dataclass_fields__)
            return cls(**{k: v for k, v in orjson.loads((Path(folder) / STATE_FILE).read_bytes()).items()
                          if k in known})
        return cls()

    def save(self, folder: str | None) -> None:
        if not folder or folder.startswith(("s3a:", "s3:")):
            return
        path = Path(folder)
        path.mkdir(parents=True, exist_ok=True)
        tmp = path / f".{STATE_FILE}.tmp"
        tmp.write_bytes(orjson.dumps(self.__dict__))
        os.replace(tmp, path / STATE_FILE)


class ChangeWriter:
    """foreachBatch: each micro-batch of decoded changes sent with `write_changes`, watermarks once resolved."""

    def __init__(self, sink_uri: str, *, source_partitions: Any, source_watermarks: bool, config: str | None = None,
                 dialect: str = "text", state_folder: str | None = None, watermark_interval_ms: int = 1000,
                 ddl_to_all_partitions: bool = False) -> None:
        self.sink_uri, self.config, self.dialect = sink_uri, config, dialect
        self.source_partitions = source_partitions  # () -> {topic: partition count}
        self.source_watermarks = source_watermarks
        self.folder = state_folder
        self.interval = watermark_interval_ms
        self.ddl_to_all = ddl_to_all_partitions
        self.state = WriterState.load(state_folder)
        self.book = DefBook()
        for db, tb, ts, ver, text in self.state.defs:
            self.book.add(db, tb, ts, ver, text, 2)
        self.targets: Targets | None = None
        self.last: WriteReport | None = None

    def resolved(self) -> int | None:
        """The commit ts every source partition has passed (None: not yet known for each)."""
        parts = [f"{t}/{p}" for t, n in self.source_partitions().items() for p in range(n)]
        if self.source_watermarks:
            if not parts or any(k not in self.state.marks for k in parts):
                return None
            return min(self.state.marks[k] for k in parts)
        seen = [self.state.heads[k] - 1 for k in parts if k in self.state.heads]
        return min(seen) if seen else None

    def low_water(self) -> int | None:
        """The commit ts every source partition had reached before this micro-batch (None: one has sent nothing
        yet): a copy of a DDL arrives in this micro-batch or a later one, at or after it."""
        parts = [f"{t}/{p}" for t, n in self.source_partitions().items() for p in range(n)]
        if not parts or any(k not in self.state.heads for k in parts):
            return None
        return min(self.state.heads[k] for k in parts)

    @staticmethod
    def still_followed(keys: set[str], low: int | None, cap: int = 10_000) -> list[str]:
        """The DDL keys a copy may still come after (a micro-batch run again after a restart included: `low`
        is taken before it), at most `cap` of them, the latest."""
        kept = sorted(keys, key=lambda k: int(k.split("/", 1)[0]))
        if low is not None:
            kept = [k for k in kept if int(k.split("/", 1)[0]) >= low]
        return kept[-cap:]

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        cache_in_session(batch.sparkSession)  # no session clone per cache (caching.py)
        batch = batch.persist()
        try:
            seen = survey(batch)
            st = self.state
            low = self.low_water()
            for book, marks in ((st.marks, True), (st.heads, False)):
                for key, ts in seen.partition_ts(marks).items():
                    book[key] = max(book.get(key, -1), ts)
            rep = write_changes(batch, self.sink_uri, config=self.config, resolved=self.resolved(),
                                ddl_to_all_partitions=self.ddl_to_all, watermark_interval_ms=self.interval,
                                dialect=self.dialect, book=self.book, targets=self.targets, floor=st.floor,
                                seen=seen, sent_ddl=frozenset(st.ddl))
        finally:
            batch.unpersist()
        st.ddl = self.still_followed(set(st.ddl) | seen.ddl_keys(), low)
        self.targets = rep.plan
        if rep.resolved is not None:
            st.floor = rep.resolved
        st.events += rep.events
        st.messages += rep.messages
        st.batches += 1
        st.defs = self.book.upstream()
        st.save(self.folder)
        self.last = rep

    def finish(self, spark: SparkSession) -> WriteReport | None:
        """A drained stream without watermarks of its own (available-now): a last watermark at its last commit."""
        if self.source_watermarks or not self.state.heads:
            return None
        last = max(self.state.heads.values())
        if self.state.floor is not None and last <= self.state.floor:
            return None
        from .decode import CHANGES_SCHEMA

        empty = spark.createDataFrame([], CHANGES_SCHEMA)
        rep = write_changes(empty, self.sink_uri, config=self.config, resolved=last, dialect=self.dialect,
                            book=self.book, targets=self.targets, floor=self.state.floor)
        self.state.floor = last
        self.state.save(self.folder)
        return rep


def start_transcode(spark: SparkSession, source: str, protocol: str, options: dict[str, str], sink_uri: str, *,
                    checkpoint: str, trigger: str = "available-now", config: str | None = None,
                    kafka_settings: dict[str, str] | None = None, max_records_per_trigger: int | None = None,
                    watermark_interval_ms: int = 1000, ddl_to_all_partitions: bool = False,
                    batch_guard: Any = None) -> tuple[StreamingQuery, ChangeWriter]:
    """The streaming query that transcodes `source` into `sink_uri`, and its writer (its state, its totals)."""
    from .pipeline import _carried, read_changes

    if sink_uri.split("?", 1)[0] == source.split("?", 1)[0]:
        raise ChangefeedError(f"--sink-uri {sink_uri} is the stream it reads: choose another topic")
    changes = read_changes(spark, source, protocol, options, schema_store=f"{checkpoint}/schemas",
                           max_records_per_trigger=max_records_per_trigger, kafka_settings=kafka_settings)
    stream = _carried(changes)
    assert stream is not None
    SinkPlan(sink_uri, config).resolve()  # a bad sink URI or TOML: one line, before the query starts
    writer = ChangeWriter(sink_uri, source_partitions=stream.source.partitions,
                          source_watermarks=stream.traits.watermarks, config=config,
                          dialect=stream.traits.text_dialect, state_folder=checkpoint,
                          watermark_interval_ms=watermark_interval_ms, ddl_to_all_partitions=ddl_to_all_partitions)
    fn = batch_guard(writer) if batch_guard else writer
    w = changes.writeStream.foreachBatch(fn).option("checkpointLocation", f"{checkpoint}/query")
    if trigger == "available-now":
        w = w.trigger(availableNow=True)
    elif trigger.startswith("processing-time="):
        w = w.trigger(processingTime=trigger.split("=", 1)[1])
    else:
        raise ChangefeedError(f"--trigger {trigger}: available-now or processing-time=<interval>")
    return w.start(), writer


CHANGELOG_PROPERTY = "changefeed.changelog"
DIALECT_PROPERTY = "changefeed.changelog.dialect"


def changelog_changes(spark: SparkSession, lake: str, *, from_ts: int | None = None,
                      tables: list[str] | None = None) -> tuple[DataFrame, DataFrame, str]:
    """A lake's bronze changelog as changes (read_changes' shape): (the changes to send, every change of the
    tables named, for their definitions; the images' text dialect). Refused unless the changelog is "full"."""
    from .layout import LakeLayout

    path = LakeLayout(lake).changelog
    try:
        detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]
    except Exception:  # noqa: BLE001 - not a Delta table, not there
        raise ChangefeedError(f"--lake {lake}: no changelog at {path} (not a lake changefeed consume wrote)") from None
    props = detail["properties"] or {}
    if props.get(CHANGELOG_PROPERTY) != "full":
        raise ChangefeedError(f"--lake {lake}: its changelog keeps only what a restart reads, not every change: "
                              "consume with --changelog full to replay it, or publish a table's change data feed "
                              "(changefeed.spark.cdf.cdf_changes)")
    df = spark.read.format("delta").load(path).where("kind <> 'error'")
    if tables:
        from pyspark.sql import functions as F

        cond = None
        for name in tables:
            db, _, tb = name.partition(".")
            c = (F.col("database") == db) & ((F.col("table") == tb) if tb and tb != "*" else F.lit(True))
            cond = c if cond is None else cond | c
        df = df.where(cond | F.col("table").isNull() & F.col("kind").isin("watermark"))
    everything = df
    if from_ts is not None:
        df = df.where(f"commit_ts >= {int(from_ts)}")
    return df, everything, props.get(DIALECT_PROPERTY, "text")


def replay(spark: SparkSession, lake: str, sink_uri: str, *, from_ts: int | None = None,
           tables: list[str] | None = None, config: str | None = None, watermark_interval_ms: int = 1000,
           ddl_to_all_partitions: bool = False) -> WriteReport:
    """Every change of a lake's full changelog (from `from_ts`, of `tables`) sent again, in commit order."""
    df, everything, dialect = changelog_changes(spark, lake, from_ts=from_ts, tables=tables)
    if from_ts is None:
        seen = survey(df)
        book = seen.book()
    else:
        book = survey(everything).book()  # the definitions in force at from_ts came before it
        seen = survey(df)
    return write_changes(df, sink_uri, config=config, resolved="complete", dialect=dialect, book=book, seen=seen,
                         watermark_interval_ms=watermark_interval_ms, ddl_to_all_partitions=ddl_to_all_partitions)
