"""The bronze changelog: each micro-batch's append (and its dead letters), made while its tables are written, and
the cutoff it keeps rows past (`restart.restart_rows`), recorded before the append."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from .options import CHANGELOG_STATS
from .params import bind, within
from .restart import restart_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from .lake import Lake
    from .options import ApplyOptions
    from .state import BatchReport, ProgressLog


class Changelog:
    """The consumer's changelog and dead letters in the lake, and the changelog cutoff of its latest batch."""

    def __init__(self, store: Lake, progress: ProgressLog, options: ApplyOptions) -> None:
        self.store = store
        self.progress = progress
        self.o = options
        self.bronze = store.layout.changelog
        self.dead = store.layout.dead_letters
        # the latest batch's changelog cutoff recorded (batch id, cutoff): read back once, then kept here
        self._recorded: tuple[int, int] | None = None

    def cutoff(self, batch_id: int, upto: int, floor: int | None = None) -> int:
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

    def start(self, changes: DataFrame, rows: DataFrame, batch_id: int, rep: BatchReport, upto: int) -> Appending:
        """The batch's dead letters and changelog rows appended while its tables are written (nothing reads this
        batch from them before its progress is saved): every row (changelog "full"), or those a restart may
        read (`restart_rows`: the rows past `upto` and the control rows)."""
        log = Appending()
        if self.o.changelog == "full":
            kept = rows
        else:
            kept = within(rows, restart_rows("_p_upto", self.o), _p_upto=upto)
            if self.o.watermarks:  # cached as the append reads them, held for the next window (`backlog`)
                kept = log.kept = kept.persist()
        log.thread = threading.Thread(target=self._append, args=(changes, kept, batch_id, rep, log.failed),
                                      name=f"changelog-{batch_id}", daemon=True)
        log.thread.start()
        return log

    def _append(self, changes: DataFrame, rows: DataFrame, batch_id: int, rep: BatchReport,
                failed: list[BaseException]) -> None:
        from pyspark.sql import functions as F

        try:
            t0 = time.monotonic()
            if rep.errors:
                self.store.append(bind(changes.where("kind = 'error'").select(
                    "topic", "partition", "offset", "key", "value", F.col("error").alias("reason")),
                    _batch=batch_id), self.dead, batch_id, rep.errors)
            if not self.store.exists(self.bronze):
                # what it keeps, and the text of its images: `changefeed replay` reads them (spark/transcode.py)
                self.store.create_log(self.bronze, rows.schema, CHANGELOG_STATS,
                                      {"changefeed.changelog": self.o.changelog,
                                       "changefeed.changelog.dialect": self.o.text_dialect})
            if not self.store.append(rows, self.bronze, batch_id, rep.messages or None) and rows.is_cached:
                rows.count()  # a replay whose rows are in: the cache filled all the same
            rep.phases["changelog (alongside)"] = time.monotonic() - t0
        except BaseException as e:  # re-raised by the batch's thread
            failed.append(e)


class Appending:
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
