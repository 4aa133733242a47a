"""What keeps a consumer's lake bounded while it runs for weeks, beside its commits.

A table committed every micro-batch gains a log file each time, and its data files grow in number: the
changelog one file per batch, a MERGE-written table a few per window, and every rewrite leaves the files it
replaced on disk. Delta's own writers bound the first (a checkpoint every `delta.checkpointInterval` commits, 10
by default, then expired log files removed: `log_rs` does both after the commits it writes itself); the rest is
here, after each micro-batch:
- MERGE-written tables: Delta's auto compaction (turned on in the consumer's session unless the user set it),
  which compacts a table's small files once it holds `spark.databricks.delta.autoCompact.minNumFiles` (50).
- the changelog (appended outside Spark's writer, so no auto compaction follows): compacted once it holds
  `COMPACT_MIN_FILES` files (delta-rs's OPTIMIZE on a local lake, Delta's elsewhere). Compaction changes no row
  (its commit says dataChange=false): readers and the consumer's own replays see the same rows.
- the changelog's rows a restart no longer needs, deleted every `TRIM_EVERY` micro-batches (`retention`; the full
  changelog's only with a retention), before its compaction.
- with a retention (`--vacuum-retention HOURS`, off by default): VACUUM of each table the consumer committed
  to, at most once per `VACUUM_EVERY_S`, deleting the files its commits removed once older than the retention
  (Delta's VACUUM: any file the table's log no longer lists, older than that).
A failure here is reported and the stream goes on: nothing the consumer applied depends on it.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ...errors import ApplyError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from .lake import Lake
    from .retention import Trim

AUTO_COMPACT = "spark.databricks.delta.autoCompact.enabled"
RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
COMPACT_MIN_FILES = 50  # as Delta's autoCompact.minNumFiles
VACUUM_EVERY_S = 600.0  # a table vacuumed at most this often
VACUUM_PER_BATCH = 8  # tables vacuumed after one micro-batch at most (the others at the next)
TRIM_EVERY = COMPACT_MIN_FILES  # micro-batches between two trims of the changelog (each adds a file to it)

log = logging.getLogger(__name__)


def auto_compact(spark: SparkSession) -> None:
    """Delta's auto compaction on in the session, unless the user set it either way."""
    if spark.conf.get(AUTO_COMPACT, None) is None:
        spark.conf.set(AUTO_COMPACT, "true")


class Maintenance:
    def __init__(self, lake: Lake, vacuum_retention_hours: float | None = None, compact: bool = True) -> None:
        if vacuum_retention_hours is not None and vacuum_retention_hours < 0:
            raise ApplyError(f"vacuum retention is a number of hours >= 0, not {vacuum_retention_hours}")
        self.lake = lake
        self.retention = vacuum_retention_hours
        self.compact = compact
        self._vacuumed: dict[str, float] = {}  # table path -> when it was last vacuumed (monotonic)
        self._untrimmed = 0  # micro-batches since the changelog's last trim (or the start)
        if compact:
            auto_compact(lake.spark)

    def after_batch(self, changelog: str, tables: list[str], trim: Trim | None = None) -> list[str]:
        """The batch's upkeep: the changelog trimmed (`trim`: what it may delete) and compacted when they are due,
        then tables due a VACUUM; what was done (a failure is logged and skipped)."""
        done: list[str] = []
        if trim is not None:
            self._untrimmed += 1
            if self._untrimmed >= TRIM_EVERY:
                self._untrimmed = 0
                self._guard(f"trim {changelog}", lambda: self._trim(changelog, trim, done))
        if self.compact:
            self._guard(f"compact {changelog}", lambda: self._compact(changelog, done))
        if self.retention is not None:
            now = time.monotonic()
            due = [p for p in dict.fromkeys([changelog, *tables])
                   if now - self._vacuumed.get(p, float("-inf")) >= VACUUM_EVERY_S]
            for p in due[:VACUUM_PER_BATCH]:
                self._vacuumed[p] = now
                self._guard(f"vacuum {p}", lambda p=p: self._vacuum(p, done))  # type: ignore[misc]
        return done

    def _guard(self, what: str, fn: object) -> None:
        try:
            fn()  # type: ignore[operator]
        except Exception as e:  # noqa: BLE001 - upkeep never stops the stream
            log.warning("changefeed: %s failed (the stream goes on): %s", what, str(e).splitlines()[0])

    def _compact(self, path: str, done: list[str]) -> None:
        if not self.lake.exists(path) or len(self.lake.logs.files(path).files) < COMPACT_MIN_FILES:
            return
        folder = self.lake.logs.local(path)
        if folder is not None:
            from deltalake import DeltaTable

            DeltaTable(folder).optimize.compact()
        else:
            self.lake.sql(f"OPTIMIZE delta.`{path.replace('`', '``')}`")
        self.lake.logs.forget(path)  # its files changed: read again at its next commit
        done.append(f"compacted {path}")

    def _trim(self, path: str, trim: Trim, done: list[str]) -> None:
        from .retention import trim as delete_unneeded

        if not self.lake.exists(path):
            return
        n = delete_unneeded(self.lake.spark, path, trim)
        self.lake.logs.forget(path)  # its files changed: read again at its next commit
        done.append(f"trimmed {path}" + (f" ({n} rows)" if n >= 0 else ""))

    def _vacuum(self, path: str, done: list[str]) -> None:
        if not self.lake.exists(path):
            return
        hours = float(self.retention or 0)
        folder = self.lake.logs.local(path)
        if folder is not None:
            from deltalake import DeltaTable

            # delta-rs takes whole hours: a fraction rounds up (never less retention than asked)
            gone = DeltaTable(folder).vacuum(retention_hours=int(-(-hours // 1)), dry_run=False,
                                             enforce_retention_duration=False)
            n = len(gone)
        else:
            with self.lake.session_conf(RETENTION_CHECK, "false"):
                self.lake.sql(f"VACUUM delta.`{path.replace('`', '``')}` RETAIN {hours} HOURS").collect()
            n = -1
        self.lake.logs.forget(path)
        done.append(f"vacuumed {path}" + (f" ({n} files)" if n >= 0 else ""))
