"""Applying decoded changes to Delta tables: in commit order, transaction-consistent, exactly once.

Every micro-batch lands in the bronze changelog (append-only, one Delta commit per batch, idempotent through
Delta's txnAppId/txnVersion, written beside the tables and before the batch's progress record): by default
only what a restart reads back (`restart.restart_rows`), with `changelog="full"` every change. Rows are applied
from the micro-batch's cache (after a restart: from the changelog) only up to the global
watermark (the smallest of the partitions' watermarks), in commit order, table by table, split at each DDL's
commit ts so that a DDL is applied (once) between the rows before and after it. Each table's commit carries
`txnVersion` = the commit ts it is complete up to: a replay after a crash finds the table's own version in its
Delta log and skips what it already holds, and rows at or below the applied watermark (an at-least-once
redelivery) never enter a window again. Streams without watermarks (Avro, real Debezium) are applied batch by
batch, each key in its commit (or binlog) order.

The modules, each step of a micro-batch in its own: `schedule` (which rows a batch may apply: the rule between
batches), `backlog` (the batches holding rows for a later window, and each window gathered from them), `ordering` (in
which order: the rule within a window), `segments` (a window cut at its DDL), `tablewrites` (a step's table writes and
DDL), `scd1`/`scd2` (the MERGEs), `multiwrite` (many small tables in one job; `drivermerge`: a small table's merge on
the driver), `catalog` (table definitions and pending DDL), `ddlplan` (a DDL as values), `ddl` (a DDL applied on
Delta; `ddldriver`: one the log expresses alone, committed by the driver), `changelog` (each batch's append and
cutoff), `state` (what survives a restart, and the progress records),
`restart` (what a restart reads back), `lake` (Delta and the file system; under it the driver's Delta log writers:
`deltalog`, `log_rs`, `log_jvm`, `logfile`, `tablefiles`), `params` (a batch's values as data), `options`,
`projection`, `pycycles` (Python's cycles collected between batches, so that the JVM frees what they used); `names`
(the tables by name in a Spark catalog) and `iceberg`/`iceberg_schema` (their Iceberg side), told by `lake`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from ..caching import cache_in_session
from ..objectstore import is_s3, put, put_if_absent
from . import schedule
from .backlog import Backlog
from .catalog import SHAPE_HASH, TableCatalog
from .changelog import Appending, Changelog
from .ddl import DdlApplier
from .ddlplan import Ddl
from .iceberg import SyncReport
from .lake import Lake, read_json_files
from .lease import OWNER, OWNERS, Lease
from .maintenance import Maintenance
from .names import table_names
from .options import DEAD_LETTER_SCHEMA, END_AT, ROW_KINDS_SQL, START_AT, ApplyOptions, q
from .ordering import date_deletes
from .params import bind
from .projection import Projection
from .pycycles import CycleCollector
from .restart import restore
from .retention import trim_bound
from .segments import WindowApplier
from .state import BatchReport, ConsumerState, Laps, ProgressLog, read_progress
from .tablewrites import TableWriters

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["DEAD_LETTER_SCHEMA", "END_AT", "ROW_KINDS_SQL", "START_AT", "ApplyOptions", "BatchReport",
           "ChangeApplier", "ConsumerState", "Ddl", "claim_lake", "q", "read_progress"]


def claim_lake(spark: SparkSession, lake: str, app_id: str = "changefeed") -> None:
    """The lake claimed for this process before a consumer's slow start (its warm-up, its query's start and first
    micro-batch), where the applier's own claim comes: a second consumer is refused in one line once its session is
    up, not after its query started (39-50 s, bench/RESULTS.md). The applier's claim then takes the record over
    (the same process: `lease.Lease.holder`)."""
    lake_lease(Lake(spark, lake.rstrip("/"), app_id), app_id).claim()


def lake_lease(store: Lake, app_id: str) -> Lease:
    """The lake's owner record: one file renamed into place on a local lake (the same host's processes are
    checked), numbered claims created by conditional PUT on S3 (`lease`)."""
    meta = store.layout.meta

    def last_in(folder: str, prefix: str) -> Callable[[], dict[str, Any] | None]:
        def read() -> dict[str, Any] | None:
            got = read_json_files(store.spark, folder, prefix, last=True)
            return got[-1] if got else None
        return read

    if not is_s3(store.layout.lake):
        return Lease(store.layout.lake, app_id, last_in(meta, OWNER.removesuffix(".json")),
                     lambda rec: store.write_json(meta, OWNER, rec, "the lake's owner record"))
    folder = f"{meta}/{OWNERS}"

    def name(rec: dict[str, Any]) -> str:
        return f"{int(rec['claim']):020d}.json"

    return Lease(store.layout.lake, app_id, last_in(folder, ""),
                 lambda rec: put(store.spark, f"{folder}/{name(rec)}", orjson.dumps(rec)),
                 lambda rec: put_if_absent(store.spark, f"{folder}/{name(rec)}", orjson.dumps(rec)))


class ChangeApplier:
    """The driver side of a consumer: owns the lake's layout and the consumer's progress, and runs each
    micro-batch's steps in order (`process`)."""

    def __init__(self, spark: SparkSession, lake: str, *, app_id: str = "changefeed",
                 options: ApplyOptions | None = None,
                 partitions: dict[str, int] | Callable[[], dict[str, int]] | None = None,
                 on_batch: Callable[[BatchReport], None] | None = None) -> None:
        self.lake = lake.rstrip("/")
        self.app_id = app_id
        self.o = options or ApplyOptions()
        self.o.check()
        self._partitions = partitions
        self.on_batch = on_batch
        self.store = Lake(spark, self.lake, app_id)
        self.layout = self.store.layout
        self.progress = ProgressLog(self.store)
        self._loaded = False
        self._tables: list[str] = []  # the lake's tables at start (with names or an Iceberg side)
        self.state = ConsumerState()  # persisted in each progress record (see `state`)
        self.catalog = TableCatalog(self.o, self.state)  # rebuilt from the changelog at start
        self.proj = Projection(self.o, self.catalog)
        self.ddl = DdlApplier(self.o, self.store, self.catalog, self.proj)
        self.upkeep = Maintenance(self.store, self.o.vacuum_retention_hours, self.o.compact)
        self.cycles = CycleCollector()
        self.lease = lake_lease(self.store, app_id)
        self.writers = TableWriters(self.o, self.store, self.catalog, self.proj, self.ddl)
        self.windows = WindowApplier(self.o, self.catalog, self.state, self.writers.write, self.writers.ddls)
        self.backlog = Backlog(self.o, self.state, self.store, self.windows)
        self.changelog = Changelog(self.store, self.progress, self.o)
        self.names = table_names(self.lake, self.o, self.layout.meta)
        self.store.names = self.names if self.names.active else None

    @property
    def spark(self) -> SparkSession:
        """The session of the calling thread (see `Lake.spark`)."""
        return self.store.spark

    @property
    def held(self) -> dict[int, tuple[DataFrame, DataFrame]]:
        """The cached micro-batches holding rows for a later window (`backlog`)."""
        return self.backlog.held

    def path(self, database: str, table: str) -> str:
        return self.store.path(database, table)

    def exists(self, path: str) -> bool:
        return self.store.exists(path)

    def next_batch_id(self) -> int:
        """For changes applied as a batch: one more than the last batch the lake recorded."""
        return self.progress.next_batch_id()

    def partitions(self) -> dict[str, int]:
        p = self._partitions
        if p is None:
            return {}
        return p() if callable(p) else dict(p)

    def global_watermark(self) -> int:
        return schedule.global_watermark(self.state.watermarks, self.partitions())

    def _load(self) -> None:
        """Progress, watermarks, table definitions and pending DDL, from the lake itself (once)."""
        if self._loaded:
            return
        self.lease.claim()  # one consumer per lake: refused in one line while another one runs
        self._loaded = True
        self.backlog.pending_rows = restore(self.store, self.progress, self.state, self.catalog, self.o)
        # what a run stopped between a shared write and its commits left staged (never in any table's log)
        self.store.remove_own(self.store.staging)
        if self.names.active:  # names for the tables already there (a catalog turned on over a lake)
            self._tables = self.store.all_tables()
            self.names.start(self.spark, self._tables)

    # --- one micro-batch --------------------------------------------------------------------------
    def process(self, changes: DataFrame, batch_id: int) -> BatchReport:
        """One micro-batch (`_batch`), then Python's cycles collected: the JVM objects the batch's DataFrames held
        (its broadcast hash relations, the rows it sent the JVM) released before the next trigger (`pycycles`)."""
        rep = self._batch(changes, batch_id)
        self.cycles.now()
        return rep

    def _batch(self, changes: DataFrame, batch_id: int) -> BatchReport:
        from pyspark.sql import functions as F

        t0 = time.monotonic()
        self._load()
        st = self.state
        trim = trim_bound(self.o, st, batch_id, int(time.time() * 1000))  # from the state the batch starts from
        rep = BatchReport(batch_id)
        lap = Laps(rep)
        if self.cycles.due():  # what the caller let go of since the last batch's end, released (`pycycles`)
            lap("python gc")
        cache_in_session(changes.sparkSession)  # the batch's caches planned in its session, not in a clone
        changes = changes.persist()
        log: Appending | None = None
        try:
            # one job (it also fills the cache): counts, the latest commit ts, each partition's watermark, and
            # each table's span of commit ts (a window without DDL then needs no job to find its tables)
            agg = changes.groupBy("kind", "topic", "partition", "database", "table").agg(
                F.count("*").alias("n"), F.max("commit_ts").alias("ts"), F.min("commit_ts").alias("lo"),
                F.min(F.expr(SHAPE_HASH)).alias("shape_lo"), F.max(F.expr(SHAPE_HASH)).alias("shape_hi")).collect()
            lap("decode")
            spans = schedule.batch_spans(agg)
            rep.count(agg)
            rows = bind(changes.where("kind <> 'error'"), _batch=batch_id)  # as data: params.py
            if self.o.untimed_deletes:
                rows = date_deletes(rows, st.floors)
            schedule.raise_watermarks(st.watermarks, agg)
            if self.o.untimed_deletes:
                schedule.raise_delete_floors(st.floors, agg)
            if self.o.watermarks:
                hi = self.global_watermark()
                upto = self.changelog.cutoff(batch_id, max(st.applied_ts, hi), floor=st.applied_ts)
                hi = upto if upto > st.applied_ts else hi  # with an earlier attempt's cutoff, if higher
                log = self.changelog.start(changes, rows, batch_id, rep, upto)
                self.catalog.take(rows, agg)
                lap("control")
                self.backlog.watermarked(changes, rows, batch_id, rep, lap, spans, hi, log.kept)
            else:
                self.catalog.take(rows, agg)
                lap("control")
                hi = self.changelog.cutoff(batch_id, schedule.barrier(
                    self.catalog.pending.values(), self.catalog.copies, self.catalog.ddl_seen, self.partitions())
                ) if self.o.ddl_barrier else schedule.UNBOUNDED
                log = self.changelog.start(changes, rows, batch_id, rep, hi)
                self.backlog.keyed(changes, rows, batch_id, rep, lap, hi)
            log.wait()
            lap("changelog wait")
        finally:
            if log is not None and log.thread is not None:
                log.thread.join()  # a failed write: the append still reads the cache
            self.backlog.release_batch(batch_id, changes, log.kept if log is not None else None)
        if self.names.mirror is not None:  # the Iceberg side in step with the batch's Delta commits
            synced = SyncReport()
            self.names.sync(sorted({*self._tables, *self.store.known_tables()}), synced)
            rep.iceberg_commits = synced.tables
            lap("iceberg")
        self.upkeep.after_batch(self.changelog.bronze, self.store.known_tables(), trim)
        lap("maintenance")
        rep.applied_ts = st.applied_ts
        rep.watermarks = dict(st.watermarks)
        rep.known_tables = len(self.catalog.defs)
        rep.upgrades, self.ddl.upgrades = self.ddl.upgrades, []
        self.progress.save(batch_id, st, rep)
        self.lease.renew()
        lap("progress")
        rep.seconds = time.monotonic() - t0
        if self.on_batch is not None:
            self.on_batch(rep)
        return rep
