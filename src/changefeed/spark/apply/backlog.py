"""The micro-batches whose rows wait for a later window: kept cached (`held`), or read back from the changelog
after a restart. Each batch's window is gathered here from its own rows and theirs, with watermarks
(`watermarked`: the window (applied, global watermark]) or without (`keyed`: up to the DDL barrier), then applied
by `segments.WindowApplier`; which rows a window may take is `schedule`'s rule."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import schedule
from .options import ROW_KINDS_SQL
from .params import within

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from .lake import Lake
    from .options import ApplyOptions
    from .segments import WindowApplier
    from .state import BatchReport, ConsumerState


class Backlog:
    """The rows read but not applied yet, per micro-batch, and the windows made of them."""

    def __init__(self, options: ApplyOptions, state: ConsumerState, store: Lake, windows: WindowApplier) -> None:
        self.o = options
        self.state = state
        self.store = store
        self.bronze = store.layout.changelog
        self.windows = windows
        # with watermarks, batches whose rows are not all applied yet: their latest commit ts (rebuilt at start)
        self.pending_rows: dict[int, int] = {}
        # micro-batches holding rows to apply later, cached: (what to unpersist, the rows), memory only; with
        # watermarks and the minimal changelog only the rows its append took (`watermarked`)
        self.held: dict[int, tuple[DataFrame, DataFrame]] = {}
        # per cached batch with rows to apply: each table's least and latest commit ts and number of changes
        self.spans: dict[int, dict[tuple[str, str], schedule.Span]] = {}

    def watermarked(self, changes: DataFrame, rows: DataFrame, batch_id: int, rep: BatchReport,
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
        self.release(self.pending_rows)

    def keyed(self, changes: DataFrame, rows: DataFrame, batch_id: int, rep: BatchReport,
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
        self.release(held)

    def release(self, keep: dict[int, Any]) -> None:
        """Uncache the micro-batches that no longer hold rows to apply (`release_batch` uncaches the current one
        when it is not kept)."""
        for b in [b for b in self.held if b not in keep]:
            self.held.pop(b)[0].unpersist()

    def release_batch(self, batch_id: int, changes: DataFrame, kept: DataFrame | None) -> None:
        """A processed batch's caches released, unless held for a later window: the batch's own and the rows its
        changelog append cached (`kept`)."""
        held = self.held.get(batch_id)
        if held is None or held[0] is not changes:
            changes.unpersist()
        if kept is not None and (held is None or held[0] is not kept):
            kept.unpersist()
