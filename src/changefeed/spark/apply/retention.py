"""The bronze changelog's retention: what a restart no longer needs is deleted from it, at the maintenance cadence,
so that weeks of micro-batches leave a changelog of bounded size.

A restart reads back (`restart.restore`, `backlog`): every DDL and BOOTSTRAP (and truncates), the first row that
carried each table shape (`catalog.order_control` learns a shape at its least commit ts), and the rows not applied
yet: with watermarks those past the applied watermark, without them the rows of the batches still holding some
(`ConsumerState.key_held`). Nothing reads back a watermark row, an applied row, or a second copy of a shape. Those
are deleted, but only in micro-batches before the running one and at or below the applied watermark of the last
progress record (what the running batch started from): a replay of the running batch, after a crash, reads
exactly what the first attempt read.

With `changelog="full"` (every change, an audit log) nothing is deleted unless a retention is given
(`--changelog-retention`): then the same rows are deleted once their commit is older than the retention.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...tso import compose
from .options import ROW_KINDS_SQL, q, sql_string

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from .options import ApplyOptions
    from .state import ConsumerState

KEY = ("_batch", "topic", "partition", "offset", "idx")  # a changelog row's identity
IDENTITY = "concat_ws('/', " + ", ".join(f"CAST({c} AS STRING)" for c in KEY) + ")"  # as one string (SQL)


@dataclass(frozen=True)
class Trim:
    """What a trim of the changelog may delete: rows of batches before `before_batch`, at or below `applied_ts`
    (with watermarks; None: every row of those batches is applied), committed before `older_than_ts` (a full
    changelog's retention; None: any age)."""

    before_batch: int
    applied_ts: int | None
    older_than_ts: int | None = None
    truncates: str | None = None  # the user's truncate expression: such rows are control rows, kept


def trim_bound(options: ApplyOptions, state: ConsumerState, batch_id: int, now_ms: int) -> Trim | None:
    """The trim a micro-batch may make, from the state it started from (its last progress record's); None when
    the changelog is kept whole ("full" without a retention)."""
    older: int | None = None
    if options.changelog == "full":
        if options.changelog_retention_hours is None:
            return None
        older = compose(max(0, now_ms - int(options.changelog_retention_hours * 3_600_000)))
    if options.watermarks:
        return Trim(batch_id, state.applied_ts, older, options.apply_as_truncates)
    return Trim(min([batch_id, *state.key_held]), None, older, options.apply_as_truncates)


def _applied(t: Trim) -> str:
    """Rows of the trim's reach: of an earlier batch, applied, old enough (SQL)."""
    cond = f"_batch < {t.before_batch}"
    if t.applied_ts is not None:  # a row with no commit ts is never in a window: kept as it came
        cond += f" AND commit_ts <= {t.applied_ts}"
    if t.older_than_ts is not None:
        cond += f" AND coalesce(commit_ts, 0) < {t.older_than_ts}"
    if t.truncates:
        cond += f" AND NOT coalesce({t.truncates}, false)"
    return cond


def shape_keepers(bronze: DataFrame, t: Trim) -> list[Any]:
    """The first row of each table shape (by commit ts, then identity) that the trim could otherwise delete."""
    from pyspark.sql import functions as F

    first = bronze.where(f"kind IN {ROW_KINDS_SQL} AND table_def IS NOT NULL").groupBy("table_def").agg(
        F.min(F.struct(F.coalesce("commit_ts", F.lit(0)).alias("commit_ts"), *KEY)).alias("k")).select("k.*")
    return first.where(_applied(t)).select(*KEY).collect()


def condition(t: Trim, keepers: list[Any]) -> str:
    """The rows a trim deletes (Spark SQL, no subquery: a Delta DELETE's condition)."""
    shape = f"kind IN {ROW_KINDS_SQL} AND table_def IS NOT NULL"
    if keepers:
        ids = ", ".join(sql_string("/".join(str(v) for v in k)) for k in keepers)
        shape += f" AND {IDENTITY} NOT IN ({ids})"
    return (f"({_applied(t)}) AND (kind = 'watermark' OR (kind IN {ROW_KINDS_SQL} AND table_def IS NULL) "
            f"OR ({shape}))")


def trim(spark: Any, path: str, t: Trim) -> int:
    """Delete what a restart no longer needs from the changelog at `path`; the rows deleted (-1: not said)."""
    bronze = spark.read.format("delta").load(path)
    cond = condition(t, shape_keepers(bronze, t))
    out = spark.sql(f"DELETE FROM delta.{q(path)} WHERE {cond}").collect()
    return int(out[0][0]) if out and len(out[0]) else -1
