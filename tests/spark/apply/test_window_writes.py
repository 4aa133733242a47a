"""A window's table writes and DDL in the order and with the versions the lake records (a small DataFrame, the
writes and DDL recorded instead of made): a version already recorded is taken as applied, so a later write of
the same table must carry a higher one."""

from __future__ import annotations

from changefeed.model import Index, TableInfo
from changefeed.spark.apply import ApplyOptions, BatchReport, ConsumerState
from changefeed.spark.apply.catalog import TableCatalog
from changefeed.spark.apply.ddlplan import Ddl
from changefeed.spark.apply.segments import TableWrite, WindowApplier

from .test_segments import _t

ROWS = "database string, `table` string, kind string, commit_ts long, topic string, partition int, offset long"


def _replay(spark, ddl_ts: int, hi: int) -> list[tuple[str, int, int]]:
    """The window (50, hi] of rows of db.t at 60 and 90 and a DROP INDEX of db.t at `ddl_ts`: what is recorded,
    as (what, version, rows written) in order; a write at or below the table's last version is skipped, as
    `TableWriters._plan` does."""
    b = _t("id", "a")
    with_index = TableInfo("db", "t", columns=b.columns, indexes=[*b.indexes, Index("ia", ["a"])])
    cat = TableCatalog(ApplyOptions(), ConsumerState())
    cat.defs[("db", "t")] = with_index
    d = Ddl(ddl_ts, "DROP INDEX ia ON db.t", "ActionDropIndex", "db", "t", b, with_index)
    cat.pending[(d.commit_ts, d.query)] = d
    done: list[tuple[str, int, int]] = []
    version = [0]

    def write(work: list[TableWrite]) -> list[tuple[str, str]]:
        for w in work:
            if w.version > version[0]:
                done.append(("rows", w.version, w.rows.count()))
                version[0] = w.version
        return [(w.database, w.table) for w in work]

    def ddl(steps: list) -> None:
        for s in steps:
            done.append(("ddl", s.version, 0))
            version[0] = max(version[0], s.version)

    window = spark.createDataFrame([("db", "t", "insert", 60, "t", 0, 1), ("db", "t", "update", 90, "t", 0, 2)],
                                   ROWS)
    WindowApplier(ApplyOptions(), cat, ConsumerState(), write, ddl).apply(
        window, 50, hi, BatchReport(0), keyed_batch=None, from_cache=True)
    return done


def test_rows_before_a_ddl_at_the_windows_end_are_written(spark) -> None:
    # the DDL at the window's upper end: its version is the window's; the rows go first, as commit 99
    assert _replay(spark, 100, 100) == [("rows", 99, 2), ("ddl", 100, 0)]
    # the DDL inside the window: the rows may follow it, as the window's commit
    assert _replay(spark, 95, 100) == [("ddl", 95, 0), ("rows", 100, 2)]
