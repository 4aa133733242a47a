"""What a restart reads back: the rows of each micro-batch its changelog commit keeps (`restart_rows`), and the
consumer's start from its last progress record and the changelog (`restore`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .catalog import control_rows
from .options import DEAD_LETTER_SCHEMA, DEAD_LETTER_STATS, ROW_KINDS_SQL

if TYPE_CHECKING:
    from .catalog import TableCatalog
    from .lake import Lake
    from .options import ApplyOptions
    from .state import ConsumerState, ProgressLog


def restart_rows(upto: str, options: ApplyOptions) -> str:
    """The rows of a micro-batch a restart may read back from the changelog (SQL): every control row (DDL,
    BOOTSTRAP, watermarks, truncates) and row shape (`restore` rebuilds the catalog from them), and the rows not
    applied by the batch's end, those past `upto` (with watermarks: the applied watermark then; without: the DDL
    barrier). The rows at or below it are in their tables, each table's commit made before the batch's progress
    record. A replayed batch computes `upto` from the same progress record and records, but also from the topic's
    partition count of its own time: it applies at least up to the cutoff an earlier attempt recorded
    (`changelog.Changelog.cutoff`), whose changelog commit may be the one that landed. `upto`: the name of the column
    that holds it (`params.within`: a literal would make the plan's code new every batch)."""
    cond = f"kind NOT IN {ROW_KINDS_SQL} OR table_def IS NOT NULL OR commit_ts > {upto}"
    if options.watermarks:  # never applied in a window: kept as they came
        cond += " OR commit_ts IS NULL"
    if options.apply_as_truncates:
        cond += f" OR coalesce({options.apply_as_truncates}, false)"
    return cond


def restore(lake: Lake, progress: ProgressLog, state: ConsumerState, catalog: TableCatalog,
            options: ApplyOptions) -> dict[int, int]:
    """A consumer's start: the state from its last progress record, the catalog from the changelog, and (with
    watermarks) the batches whose rows are not all applied yet, with their latest commit ts (returned)."""
    from pyspark.sql import functions as F

    dead = lake.layout.dead_letters
    if not lake.exists(dead):  # there from the start, so readers find it empty rather than missing
        lake.create_log(dead, lake.spark.createDataFrame([], DEAD_LETTER_SCHEMA).schema, DEAD_LETTER_STATS)
    last = progress.last()
    if last is not None:
        state.restore(last)
    pending_rows: dict[int, int] = {}
    if lake.exists(lake.layout.changelog):
        bronze = lake.read(lake.layout.changelog)
        catalog.learn(control_rows(bronze, options.apply_as_truncates))
        if options.watermarks:
            pending_rows = {r["_batch"]: r["ts"] for r in bronze.where(
                f"kind IN {ROW_KINDS_SQL} AND commit_ts > {state.applied_ts}").groupBy("_batch").agg(
                F.max("commit_ts").alias("ts")).collect()}
    return pending_rows
