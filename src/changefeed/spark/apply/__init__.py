"""Applying decoded changes to Delta tables: in commit order, transaction-consistent, exactly once.

Every micro-batch lands in the bronze changelog (append-only, one Delta commit per batch, idempotent through
Delta's txnAppId/txnVersion, written beside the tables and before the batch's progress record): by default
only what a restart reads back (`state.restart_rows`), with `changelog="full"` every change. Rows are applied
from the micro-batch's cache (after a restart: from the changelog) only up to the global
watermark (the smallest of the partitions' watermarks), in commit order, table by table, split at each DDL's
commit ts so that a DDL is applied (once) between the rows before and after it. Each table's commit carries
`txnVersion` = the commit ts it is complete up to: a replay after a crash finds the table's own version in its
Delta log and skips what it already holds, and rows at or below the applied watermark (an at-least-once
redelivery) never enter a window again. Streams without watermarks (Avro, real Debezium) are applied batch by
batch, each key in its commit (or binlog) order.

The modules: `schedule` (which rows a batch may apply: the rule between batches), `ordering` (in which order:
the rule within a window), `segments` (a window cut at its DDL), `catalog` (table definitions and pending DDL),
`ddl` (DDL planned and applied), `scd1`/`scd2` (the MERGEs), `lake` (Delta and the file system), `state` (what
survives a restart, and the progress records), `params` (a batch's values as data), `options`, `projection`.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ...errors import ApplyError
from . import schedule
from .catalog import SHAPE_HASH, TableCatalog, control_rows
from .ddl import Ddl, DdlApplier
from .lake import Lake
from .multiwrite import MultiWriter, Planned
from .options import (
    CHANGELOG_STATS,
    DEAD_LETTER_SCHEMA,
    END_AT,
    ROW_KINDS_SQL,
    START_AT,
    ApplyOptions,
    q,
)
from .ordering import date_deletes
from .params import bind, within
from .projection import Projection
from .scd1 import merge_scd1
from .scd2 import merge_scd2
from .segments import DdlStep, TableWrite, WindowApplier
from .state import BatchReport, ConsumerState, Laps, ProgressLog, read_progress, restart_rows, restore

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["DEAD_LETTER_SCHEMA", "END_AT", "ROW_KINDS_SQL", "START_AT", "ApplyOptions", "BatchReport",
           "ChangeApplier", "ConsumerState", "Ddl", "q", "read_progress"]


class ChangeApplier:
    """The driver side of a consumer: owns the lake's layout and the consumer's progress."""

    def __init__(self, spark: SparkSession, lake: str, *, app_id: str = "changefeed",
                 options: ApplyOptions | None = None,
                 partitions: dict[str, int] | Callable[[], dict[str, int]] | None = None,
                 on_batch: Callable[[BatchReport], None] | None = None) -> None:
        self.lake = lake.rstrip("/")
        self.app_id = app_id
        self.o = options or ApplyOptions()
        if self.o.scd_type not in (1, 2):
            raise ApplyError(f"stored_as_scd_type must be 1 or 2, not {self.o.scd_type}")
        if self.o.on_ddl_error not in ("stop", "skip"):
            raise ApplyError(f"on_ddl_error is stop or skip, not {self.o.on_ddl_error!r}")
        if self.o.track_history_column_list is not None and self.o.scd_type != 2:
            raise ApplyError("track_history_column_list applies to stored_as_scd_type=2")
        self._partitions = partitions
        self.on_batch = on_batch
        self._pool: ThreadPoolExecutor | None = None
        self.store = Lake(spark, self.lake, app_id)
        self.layout = self.store.layout
        self.bronze = self.layout.changelog
        self.dead = self.layout.dead_letters
        self.progress = ProgressLog(self.store)
        self._loaded = False
        self.state = ConsumerState()  # persisted in each progress record (see `state`)
        self.catalog = TableCatalog(self.o, self.state)  # rebuilt from the changelog at start
        self.proj = Projection(self.o, self.catalog)
        self.ddl = DdlApplier(self.o, self.store, self.catalog, self.proj)
        self.multi = MultiWriter(self.store, self.proj, self.o)
        self.windows = WindowApplier(self.o, self.catalog, self.state, self._apply_tables, self._apply_ddls)
        # with watermarks, batches whose rows are not all applied yet: their latest commit ts (rebuilt at start)
        self.pending_rows: dict[int, int] = {}
        # micro-batches holding rows to apply later, cached: (what to unpersist, the rows), memory only; with
        # watermarks and the minimal changelog only the rows its append took (`_apply_watermarked`)
        self.held: dict[int, tuple[DataFrame, DataFrame]] = {}
        # per cached batch with rows to apply: each table's least and latest commit ts and number of changes
        self.spans: dict[int, dict[tuple[str, str], schedule.Span]] = {}
        # the latest batch's changelog cutoff recorded (batch id, cutoff): read back once, then kept here
        self._recorded: tuple[int, int] | None = None

    @property
    def spark(self) -> SparkSession:
        """The session of the calling thread (see `Lake.spark`)."""
        return self.store.spark

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
        self._loaded = True
        self.pending_rows = restore(self.store, self.progress, self.state, self.catalog, self.o)
        # what a run stopped between a shared write and its commits left staged (never in any table's log)
        self.store.remove_own(self.store.staging)

    # --- one micro-batch --------------------------------------------------------------------------
    def process(self, changes: DataFrame, batch_id: int) -> BatchReport:
        from pyspark.sql import functions as F

        t0 = time.monotonic()
        self._load()
        st = self.state
        rep = BatchReport(batch_id)
        lap = Laps(rep)
        changes = changes.persist()
        log: _Appending | None = None
        try:
            # one job (it also fills the cache): counts, the latest commit ts, each partition's watermark, and
            # each table's span of commit ts (a window without DDL then needs no job to find its tables)
            agg = changes.groupBy("kind", "topic", "partition", "database", "table").agg(
                F.count("*").alias("n"), F.max("commit_ts").alias("ts"), F.min("commit_ts").alias("lo"),
                F.min(F.expr(SHAPE_HASH)).alias("shape_lo"), F.max(F.expr(SHAPE_HASH)).alias("shape_hi")).collect()
            lap("decode")
            spans = schedule.batch_spans(agg)
            counts: Counter[str] = Counter()
            for r in agg:
                counts[r["kind"]] += r["n"]
            rep.max_ts = max((r["ts"] or 0 for r in agg if r["kind"] in ("insert", "update", "delete")), default=0)
            marks = [(schedule.partition_key(r["topic"], r["partition"]), r["ts"]) for r in agg
                     if r["kind"] == "watermark"]
            rep.errors = counts.get("error", 0)
            rep.rows_in = sum(counts.get(k, 0) for k in ("insert", "update", "delete"))
            rows = bind(changes.where("kind <> 'error'"), _batch=batch_id)  # as data: params.py
            if self.o.untimed_deletes:
                rows = date_deletes(rows, st.floors)
            for k, ts in marks:
                st.watermarks[k] = max(st.watermarks.get(k, 0), ts)
            if self.o.untimed_deletes:
                schedule.raise_delete_floors(st.floors, agg)
            if self.o.watermarks:
                hi = self.global_watermark()
                upto = self._cutoff(batch_id, max(st.applied_ts, hi), floor=st.applied_ts)
                hi = upto if upto > st.applied_ts else hi  # with an earlier attempt's cutoff, if higher
                log = self._log_batch(changes, rows, batch_id, rep, upto)
                self._learn(rows, agg)
                lap("control")
                self._apply_watermarked(changes, rows, batch_id, rep, lap, spans, hi, log.kept)
            else:
                self._learn(rows, agg)
                lap("control")
                hi = self._cutoff(batch_id, schedule.barrier(
                    self.catalog.pending.values(), self.catalog.copies, self.catalog.ddl_seen, self.partitions())
                ) if self.o.ddl_barrier else schedule.UNBOUNDED
                log = self._log_batch(changes, rows, batch_id, rep, hi)
                self._apply_keyed(changes, rows, batch_id, rep, lap, hi)
            log.wait()
            lap("changelog wait")
        finally:
            if log is not None and log.thread is not None:
                log.thread.join()  # a failed write: the append still reads the cache
            held = self.held.get(batch_id)
            if held is None or held[0] is not changes:
                changes.unpersist()
            if log is not None and log.kept is not None and (held is None or held[0] is not log.kept):
                log.kept.unpersist()
        rep.applied_ts = st.applied_ts
        rep.watermarks = dict(st.watermarks)
        rep.known_tables = len(self.catalog.defs)
        rep.upgrades, self.ddl.upgrades = self.ddl.upgrades, []
        self.progress.save(batch_id, st, rep)
        lap("progress")
        rep.seconds = time.monotonic() - t0
        if self.on_batch is not None:
            self.on_batch(rep)
        return rep

    def _learn(self, rows: DataFrame, counts: list[Any]) -> None:
        """What the batch's control rows teach the catalog: their job only where its counts show something new."""
        if not self.catalog.nothing_new(counts, self.o.apply_as_truncates):
            self.catalog.learn(control_rows(rows, self.o.apply_as_truncates))

    def _cutoff(self, batch_id: int, upto: int, floor: int | None = None) -> int:
        """The batch's changelog cutoff: at least the one an earlier attempt of this batch recorded, recorded
        before the append. Each attempt reads the topic's partition count anew (a watermark or a DDL barrier then
        waits for a partition the first attempt did not know); its changelog commit keeps only the rows past its
        cutoff, so a replay that landed none of its own applies at least up to it (a cutoff is a watermark every
        partition known then had passed: TiCDC sent nothing older after it). A cutoff at `floor` (the applied
        watermark, which every attempt starts from) is not recorded: no attempt computes less."""
        if self.o.changelog != "minimal":
            return upto
        if self._recorded is None:
            self._recorded = self.progress.cutoff() or (-1, -1)
        b, earlier = self._recorded
        if b == batch_id and earlier >= upto:
            return earlier
        if floor is not None and upto <= floor:
            return upto
        self.progress.save_cutoff(batch_id, upto)
        self._recorded = (batch_id, upto)
        return upto

    def _apply_watermarked(self, changes: DataFrame, rows: DataFrame, batch_id: int, rep: BatchReport,
                           lap: Callable[[str], None],
                           spans: dict[tuple[str, str], schedule.Span] | None, hi: int,
                           kept: DataFrame | None) -> None:
        """With watermarks: the window (applied, `hi`] (the global watermark) of this batch and the earlier ones
        holding rows. `kept`: the batch's rows its changelog append caches (those past the cutoff, and the
        control rows), held for a later window instead of the whole batch (None, with the "full" changelog: the
        batch is held)."""
        st = self.state
        if rep.rows_in:
            self.pending_rows[batch_id] = rep.max_ts
        if rep.rows_in and spans is not None and not self.o.untimed_deletes:
            self.spans[batch_id] = spans
        rep.watermark = hi
        win = schedule.next_window(st.applied_ts, hi)
        if win is not None:
            span = f"kind IN {ROW_KINDS_SQL} AND commit_ts > _p_lo AND commit_ts <= _p_hi"
            # this batch's rows from the cache; earlier batches' only if they still hold rows past the
            # applied watermark (each batch's files carry its _batch: Delta skips the others)
            cached = rows
            older = [b for b in self.pending_rows if b != batch_id]
            for b in older:
                if b in self.held:
                    cached = cached.unionByName(self.held[b][1])
            window = within(cached, span, _p_lo=win.lo, _p_hi=win.hi)  # one relation of bounds for all of them
            unheld = [b for b in older if b not in self.held]
            if unheld:  # after a restart: from the changelog
                window = window.unionByName(self.store.read(self.bronze).where(
                    f"_batch >= {min(unheld)} AND _batch < {batch_id} AND kind IN {ROW_KINDS_SQL} AND {win.sql()}"))
            self.windows.apply(window, win.lo, win.hi, rep, keyed_batch=None, lap=lap, from_cache=not unheld,
                               spans=schedule.window_spans(self.spans, self.pending_rows, [batch_id, *older]))
            st.applied_ts = hi
            self.pending_rows = schedule.unapplied(self.pending_rows, hi)
            self.spans = {b: v for b, v in self.spans.items() if b in self.pending_rows}
        if batch_id in self.pending_rows:  # rows past the watermark: kept cached for a later window
            # only those (a few thousand of a batch's 250k in bench/spark_pipeline.py) when the changelog append
            # cached them: the next window then scans them, not the whole batch again, and the batch's cache is
            # released a batch earlier (bench/RESULTS.md)
            self.held[batch_id] = (kept, kept) if kept is not None else (changes, rows)
        self._release_held(self.pending_rows)

    def _apply_keyed(self, changes: DataFrame, rows: DataFrame, batch_id: int, rep: BatchReport,
                     lap: Callable[[str], None], hi: int) -> None:
        """Without watermarks: the batch's rows (those with no commit ts too: plain avro carries none) and the
        rows earlier batches hold, each key in its order, up to `hi`: the first DDL still waiting for a
        partition (`schedule.barrier`)."""
        st = self.state
        row_kinds = f"kind IN {ROW_KINDS_SQL}"
        window = within(rows, f"{row_kinds} AND coalesce(commit_ts, 0) <= _p_hi", _p_hi=hi)
        fresh = schedule.RedeliveryFloors(st.key_floors).column()
        unheld = []
        for b, (lo, _) in st.key_held.items():
            if b == batch_id:
                continue  # a replayed batch: all of it is here
            if b in self.held:
                window = window.unionByName(within(self.held[b][1], f"{row_kinds} AND commit_ts > _p_lo AND "
                                                   "commit_ts <= _p_hi", _p_lo=lo, _p_hi=hi))
            else:
                unheld.append(f"(_batch = {b} AND commit_ts > {lo})")
        if unheld:  # after a restart: from the changelog
            window = window.unionByName(self.store.read(self.bronze).where(
                f"{row_kinds} AND commit_ts <= {hi} AND ({' OR '.join(unheld)})"))
        if fresh is not None:
            window = window.where(fresh)
        self.windows.apply(window, -1, hi, rep, keyed_batch=batch_id, lap=lap, from_cache=not unheld)
        held = schedule.keyed_held(st.key_held, batch_id, hi, rep.max_ts)
        if batch_id in held:
            self.held[batch_id] = (changes, rows)
        st.key_held = held
        self._release_held(held)

    def _release_held(self, keep: dict[int, Any]) -> None:
        """Uncache the micro-batches that no longer hold rows to apply (`process` uncaches the current one when it
        is not kept)."""
        for b in [b for b in self.held if b not in keep]:
            self.held.pop(b)[0].unpersist()

    def _log_batch(self, changes: DataFrame, rows: DataFrame, batch_id: int, rep: BatchReport,
                   upto: int) -> _Appending:
        """The batch's dead letters and changelog rows appended while its tables are written (nothing reads this
        batch from them before its progress is saved): every row (changelog "full"), or those a restart may
        read (`restart_rows`: the rows past `upto` and the control rows)."""
        log = _Appending()
        if self.o.changelog == "full":
            kept = rows
        else:
            kept = within(rows, restart_rows("_p_upto", self.o), _p_upto=upto)
            if self.o.watermarks:  # cached as the append reads them, held for the next window (`_apply_watermarked`)
                kept = log.kept = kept.persist()
        log.thread = threading.Thread(target=self._append_batch, args=(changes, kept, batch_id, rep, log.failed),
                                      name=f"changelog-{batch_id}", daemon=True)
        log.thread.start()
        return log

    def _append_batch(self, changes: DataFrame, rows: DataFrame, batch_id: int, rep: BatchReport,
                      failed: list[BaseException]) -> None:
        from pyspark.sql import functions as F

        try:
            t0 = time.monotonic()
            if rep.errors:
                self.store.append(bind(changes.where("kind = 'error'").select(
                    "topic", "partition", "offset", "key", "value", F.col("error").alias("reason")),
                    _batch=batch_id), self.dead, batch_id)
            if not self.store.exists(self.bronze):
                self.store.create_log(self.bronze, rows.schema, CHANGELOG_STATS)
            if not self.store.append(rows, self.bronze, batch_id) and rows.is_cached:
                rows.count()  # a replay whose rows are in: the cache filled all the same
            rep.phases["changelog (alongside)"] = time.monotonic() - t0
        except BaseException as e:  # re-raised by the batch's thread
            failed.append(e)

    # --- table writes -----------------------------------------------------------------------------
    def _apply_tables(self, work: list[TableWrite]) -> list[tuple[str, str]]:
        """The writes of one step: each table ready (`_plan`), then the small plain tables of one shape in one
        job (`multiwrite`), the others each its MERGE, up to `table_writers` at once; the tables that took rows.
        Every table keeps its own idempotent Delta commit, so a failure part-way leaves each table whole, at its
        old or its new version."""
        planned = [p for p in self._each(self._plan, work) if p is not None]
        groups, rest = self.multi.groups(planned)
        for g in groups:
            self.multi.write(g, self.store.committed, self._each)
        self._each(self._merge, rest)
        return [(p.write.database, p.write.table) for p in planned]

    def _each(self, fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
        """`fn` over `items`, up to `table_writers` at once (each writer thread in its own session)."""
        if len(items) <= 1 or self.o.table_writers <= 1:
            return [fn(x) for x in items]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.o.table_writers, thread_name_prefix="changefeed-writer")

        def one(x: Any) -> Any:
            self.store.own_session()
            return fn(x)

        return list(self._pool.map(one, items))

    def _apply_ddls(self, steps: list[DdlStep]) -> None:
        """DDL steps of different tables (`segments.ddl_groups`), one after another: their writes before them
        went at once; the DDL themselves stay sequential (Delta features turned on from several sessions at
        once are not something this consumer has been shown to get right), except a run of CREATE TABLE."""
        if len(steps) > 1 and all(s.ddl.ddl_type == "ActionCreateTable" for s in steps):
            # new tables, each its own: created at once (a database's tables arrive as a run of these)
            self._each(lambda s: self.ddl.apply(s.ddl, s.version), steps)
            return
        for s in steps:
            self.ddl.apply(s.ddl, s.version)

    def _plan(self, w: TableWrite) -> Planned | None:
        """A table write made ready: the table created if new, following its definition, and the lake columns
        it sets; None when the table already holds these rows (a replay after a crash)."""
        db, tbl, version = w.database, w.table, w.version
        path = self.store.path(db, tbl)
        if self.store.txn_version(path) >= version:
            return None
        t = self.catalog.definition(db, tbl, lambda: w.rows)
        self.ddl.create(t, path)
        # the lake's columns, not the definition's: a segment's rows may predate a definition learnt from later
        # messages of the same micro-batch (a column renamed after them still has its old name in the lake)
        keys = set(self.proj.keys(t))
        lake_cols = self.store.columns(path)
        shape = self.catalog.drift.pop((db, tbl), None)
        if shape is not None:
            lake_cols = self.ddl.follow(t, shape, path, lake_cols)
            t = self.catalog.defs[(db, tbl)]
        cols = [c for c in lake_cols if c not in (START_AT, END_AT) and self.proj.selected(c, keys)]
        return Planned(w, t, path, cols)

    def _merge(self, p: Planned) -> None:
        merge = merge_scd1 if self.o.scd_type == 1 else merge_scd2
        merge(self.store, self.proj, self.o, p.t, p.path, p.write.rows, p.cols, p.write.version)


class _Appending:
    """A batch's changelog append, running beside its table writes."""

    def __init__(self) -> None:
        self.failed: list[BaseException] = []
        # the rows appended, cached: filled by the append's own job (or a count, when a replay finds them in),
        # so that they stay when the batch's cache is released (Spark keeps a cache built on another only once
        # it is loaded)
        self.kept: DataFrame | None = None
        self.thread: threading.Thread | None = None

    def wait(self) -> None:
        if self.thread is not None:
            self.thread.join()
        if self.failed:
            raise self.failed[0]
