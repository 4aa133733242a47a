"""A window's rows cut at the DDL that touch their tables, and applied step by step in commit order.

Each table's rows up to a DDL that touches it are written (a `TableWrite`), then the DDL is applied (a
`DdlStep`), then its later rows; a DDL splits only the tables it names, so one table's DDL costs others
nothing. The writes of one step go together (`write_tables`, concurrently); each is its own idempotent Delta
commit at the version `schedule.txn_version` gives.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from ...ddl import TABLE_RENAMING, changes_columns, drops_schema, drops_table, truncates
from ...model import TableInfo
from . import schedule
from .ddlplan import complete
from .options import sql_string
from .params import within

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from .catalog import TableCatalog
    from .ddlplan import Ddl
    from .options import ApplyOptions
    from .state import BatchReport, ConsumerState

TableKey = tuple[str, str]


@dataclass(frozen=True)
class TableWrite:
    """Rows of one table, written as its commit `version`: those of `window` of this table with a commit ts in
    (`after`, `upto`] (None: unbounded), with or without watermarks: a window's small tables are written together
    (`multiwrite`, each key's changes in the order `ordering` gives, as its own MERGE would). `changes`: at most
    this many of the table's changes are among them (None: not counted)."""

    database: str
    table: str
    version: int
    window: DataFrame
    after: int | None = None
    upto: int | None = None
    changes: int | None = None

    @property
    def rows(self) -> DataFrame:
        """The write's rows, selected when asked: a window of many tables written together (`multiwrite`) needs
        no selection per table, and making one costs a few py4j calls per table."""
        cond = f"database = {sql_string(self.database)} AND `table` = {sql_string(self.table)}"
        bounds: dict[str, int | None] = {}  # as data, not literals: params.py
        if self.after is not None:
            cond += " AND commit_ts > _p_after"
            bounds["_p_after"] = self.after
        if self.upto is not None:
            cond += " AND commit_ts <= _p_upto"
            bounds["_p_upto"] = self.upto
        return within(self.window, cond, **bounds)


@dataclass(frozen=True)
class DdlStep:
    """A DDL, applied as commit `version` of the tables it changes."""

    ddl: Ddl
    version: int


def touches(d: Ddl, tables: dict[TableKey, int]) -> list[TableKey]:
    """The tables (among those with rows) a DDL changes: named before or after it, or all of a schema."""
    named = {(t.schema, t.table) for t in (d.before, d.after) if t is not None and t.table}
    if d.database and d.table:
        named.add((d.database, d.table))
    if drops_schema(d.ddl_type) and d.database:
        named |= {k for k in tables if k[0] == d.database}
    return sorted(k for k in named if k in tables)


def _later_ddls(ddls: list[Ddl], tables: dict[TableKey, int]) -> Callable[[TableKey, int], list[Ddl]]:
    """`later(table, step)`: the DDL after `ddls[step]` that touch `table`, each DDL's tables found once, as it
    was before any of the window's DDL was completed (a database's first window holds a CREATE TABLE per table:
    asking every later DDL again for each one was quadratic, 1.7 s of a 1,000-table window)."""
    steps: dict[TableKey, list[int]] = {}
    for i, x in enumerate(ddls):
        for t in touches(x, tables):
            steps.setdefault(t, []).append(i)

    def later(table: TableKey, step: int) -> list[Ddl]:
        idx = steps.get(table, [])
        return [ddls[j] for j in idx[bisect.bisect_right(idx, step):]]

    return later


def stamps_from_spans(spans: list[dict[TableKey, schedule.Span]], lo: int, hi: int, ddls: list[Ddl],
                      ddl_definitions: bool) -> tuple[dict[TableKey, int], dict[TableKey, list[int]]] | None:
    """Each table's changes in the window (lo, hi] and its rows' least commit ts per batch read, from the batches'
    spans, exactly what `WindowApplier._segments`' job finds when it matters: every span lies inside the window or
    wholly outside it, and no DDL that may touch a table falls within one of its spans (a database's first window:
    each CREATE TABLE before its table's rows). A stretch between the DDL of a table then holds all of a span or
    none of it, so one stamp per span answers `any_rows` as the job's per-segment stamps do. None otherwise (a
    rename, whose old table `complete` finds only later; a span astride the window's ends or a DDL)."""
    counts: dict[TableKey, int] = {}
    ranges: dict[TableKey, list[tuple[int, int]]] = {}
    for per_batch in spans:
        for k, (least, latest, n) in per_batch.items():
            if latest <= lo or least > hi:
                continue  # none of its rows in the window
            if least <= lo or latest > hi:
                return None
            counts[k] = counts.get(k, 0) + n
            ranges.setdefault(k, []).append((least, latest))
    for d in ddls:
        if d.ddl_type in TABLE_RENAMING:
            return None
        if (d.after is None or not d.after.columns) and (not ddl_definitions or changes_columns(d.ddl_type)):
            named = list(counts)  # its definitions still to be read from its statement (`complete`): any table
        else:
            named = touches(d, counts)
        if any(least <= d.commit_ts <= latest for k in named for least, latest in ranges[k]):
            return None
    return counts, {k: sorted(least for least, _ in r) for k, r in ranges.items()}


WRITE, KEEP, DISCARD = "write", "keep", "discard"
# DDL that touch no row of a table (indexes, comments, options, columns): only these may leave its rows for
# later, and only when its columns and key are still what the rows need
_ROWS_UNTOUCHED = frozenset({
    "ActionAddIndex", "ActionDropIndex", "ActionRenameIndex", "ActionAddPrimaryKey", "ActionDropPrimaryKey",
    "ActionAlterIndexVisibility", "ActionModifyTableComment", "ActionModifyTableCharsetAndCollate",
    "ActionAlterTableAttributes", "ActionAlterTTLInfo", "ActionAlterTTLRemove", "ActionSetDefaultValue",
    "ActionModifyColumn", "ActionDropColumn", "ActionDropColumns", "ActionMultiSchemaChange"})


def before_ddl(d: Ddl, table: TableKey, later: list[Ddl], scd_type: int, keys: list[str] | None) -> str:
    """What becomes of a table's rows that precede a DDL touching it, in the same window.

    WRITE: written before the DDL (the window is cut there). KEEP: left for the table's next write, after the
    DDL, which changes nothing they need: the same columns and key (an index, a comment), or columns dropped
    when no later DDL of the window touches the table (a later one could bring a dropped name back).
    DISCARD: never written, since the DDL removes whatever they would leave (DROP TABLE / DATABASE; TRUNCATE
    with SCD1, where no history is kept). Each saves a Delta write of the table. A DDL sharing its commit ts with
    a later one of the table always cuts: the rows' later write must get a higher txnVersion than the DDL."""
    a = d.ddl_type
    if drops_table(a) or drops_schema(a) or (truncates(a) and scd_type == 1):
        return DISCARD
    b, t = d.before, d.after
    if a not in _ROWS_UNTOUCHED or b is None or t is None or not b.columns or not t.columns \
            or (b.schema, b.table) != table or (t.schema, t.table) != table \
            or any(x.commit_ts <= d.commit_ts for x in later):
        return WRITE
    if _key(b, keys) != _key(t, keys) or any(c.name not in b.by_name or b.by_name[c.name] != c for c in t.columns):
        return WRITE
    if len(t.columns) == len(b.columns):
        return KEEP
    return WRITE if later else KEEP


def ddl_groups(ddls: list[Ddl]) -> list[list[int]]:
    """The window's DDL (in commit order) as runs that can be applied together: consecutive DDL each changing
    one table of its own, none the table of another in the run. Their tables' writes before them go at once
    (different Delta tables, each its own commit), then the DDL; anything else (a rename, a
    schema's DDL, a second DDL of a table) starts a new run."""
    groups: list[list[int]] = []
    seen: set[TableKey] = set()
    for i, d in enumerate(ddls):
        table = _own_table(d)
        if groups and table is not None and table not in seen and _own_table(ddls[groups[-1][0]]) is not None:
            groups[-1].append(i)
        else:
            groups.append([i])
            seen = set()
        if table is not None:
            seen.add(table)
    return groups


def _own_table(d: Ddl) -> TableKey | None:
    """The one table a DDL changes, when it changes exactly one and keeps its name."""
    if d.ddl_type in TABLE_RENAMING or drops_schema(d.ddl_type) or not d.database or not d.table:
        return None
    names = {(t.schema, t.table) for t in (d.before, d.after) if t is not None and t.table}
    return (d.database, d.table) if names <= {(d.database, d.table)} else None


def _key(t: TableInfo, keys: list[str] | None) -> list[str]:
    return list(keys) if keys else (list(t.handle_key) or [c.name for c in t.columns])


class WindowApplier:
    def __init__(self, options: ApplyOptions, catalog: TableCatalog, state: ConsumerState,
                 write_tables: Callable[[list[TableWrite]], list[TableKey]],
                 apply_ddl: Callable[[list[DdlStep]], None]) -> None:
        self.o = options
        self.catalog = catalog
        self.state = state
        self.write_tables = write_tables  # the tables that took rows
        self.apply_ddl = apply_ddl  # the DDL of one run (ddl_groups), in commit order

    def _write(self, work: list[TableWrite], rep: BatchReport) -> None:
        rep.tables.update(f"{db}.{tbl}" for db, tbl in self.write_tables(work))

    def apply(self, window: DataFrame, lo: int, hi: int, rep: BatchReport, *, keyed_batch: int | None,
              lap: Callable[[str], None] | None = None, from_cache: bool = False,
              spans: list[dict[TableKey, schedule.Span]] | None = None) -> None:
        """Rows in (lo, hi] and the DDL among them (`keyed_batch`: without watermarks, the batch applied; every
        pending DDL up to hi then, and each partition's redelivery floors raised).

        `spans` (per batch read, each table's least and latest commit ts): for a window without DDL the tables
        with rows are those whose span meets (lo, hi], found without a Spark job (a table whose rows all fall
        outside the window is merged with an empty source, which changes nothing); `rows_applied` then counts
        those tables' changes in the batches read, not only the window's. A window with DDL whose tables' spans
        allow it (`stamps_from_spans`: a database's first window) finds its tables' segments without a job too.
        """
        ddls = schedule.ddls_in(self.catalog.pending.values(), lo, hi, keyed=keyed_batch is not None)
        if self.o.apply_as_deletes:
            window = window.withColumn("kind", F.when(F.expr(self.o.apply_as_deletes), F.lit("delete"))
                                       .otherwise(F.col("kind")))
        if spans is not None and not ddls and keyed_batch is None and from_cache:
            counts = schedule.tables_in_window(spans, lo, hi)
            if lap is not None:
                lap("window")
            self._write([TableWrite(db, tbl, hi, window, changes=n) for (db, tbl), n in sorted(counts.items())],
                        rep)
            rep.rows_applied += sum(counts.values())
            if lap is not None:
                lap("merge")
            return
        known = None
        if spans is not None and keyed_batch is None and from_cache:  # a database's first window: no job
            known = stamps_from_spans(spans, lo, hi, ddls, self.o.ddl_definitions)
        if not from_cache:  # read from the changelog: once, not once per table and segment
            window = window.persist()
        try:
            self._segments(window, lo, hi, ddls, rep, keyed_batch, lap, known)
        finally:
            if not from_cache:
                window.unpersist()

    def _segments(self, window: DataFrame, lo: int, hi: int, ddls: list[Ddl], rep: BatchReport,
                  keyed_batch: int | None, lap: Callable[[str], None] | None,
                  known: tuple[dict[TableKey, int], dict[TableKey, list[int]]] | None = None) -> None:
        """`known`: each table's count and stamps found without the job (`stamps_from_spans`)."""
        counts, stamps = known if known is not None else self._stamps(window, lo, ddls, keyed_batch)
        if lap is not None:
            lap("window")
        done: dict[TableKey, int] = {}  # per table: rows applied up to this commit ts

        def any_rows(table: TableKey, start: int, upto: int, inclusive: bool) -> bool:
            ts = stamps[table]
            i = bisect.bisect_right(ts, start)
            return i < len(ts) and (ts[i] <= upto if inclusive else ts[i] < upto)

        def flush(tables: list[TableKey], upto: int, step: int, *, inclusive: bool) -> list[TableWrite]:
            """Each table's rows from where it stands up to `upto` (before it: not `inclusive`)."""
            work = []
            for table in tables:
                if table not in counts:
                    continue
                start = done.get(table, lo)
                if upto <= start and keyed_batch is None:
                    continue
                db, tbl = table
                last = upto if inclusive else upto - 1
                if any_rows(table, start, upto, inclusive):
                    version = schedule.txn_version(last, keyed_batch=keyed_batch, step=step)
                    work.append(TableWrite(db, tbl, version, window, start, last, changes=counts[table]))
                done[table] = last
            return work

        later_of = _later_ddls(ddls, counts)
        for group in ddl_groups(ddls):
            work: list[TableWrite] = []
            steps: list[DdlStep] = []
            for step in group:
                d = ddls[step]
                complete(d, self.catalog.defs, self.o.ddl_definitions)
                cut = []
                for table in touches(d, counts):
                    later = later_of(table, step)
                    what = before_ddl(d, table, later, self.o.scd_type, self.o.keys)
                    if what == KEEP and keyed_batch is None and d.commit_ts >= hi:
                        # kept rows would follow the DDL as the table's commit `hi`, the DDL's own version (with
                        # watermarks a version is a commit ts): taken for done, they would never be written
                        what = WRITE
                    if what == WRITE:
                        cut.append(table)
                    elif what == DISCARD:
                        done[table] = d.commit_ts - 1
                work += flush(cut, d.commit_ts, step, inclusive=False)
                steps.append(DdlStep(d, schedule.txn_version(d.commit_ts, keyed_batch=keyed_batch, step=step,
                                                             ddl=True)))
            self._write(work, rep)
            self.apply_ddl(steps)
            for st in steps:
                self.catalog.applied(st.ddl)
                self.state.ddl_ts = max(self.state.ddl_ts, st.ddl.commit_ts)
                rep.ddl_applied += 1
        self._write(flush(sorted(counts), hi, len(ddls), inclusive=True), rep)
        rep.rows_applied += sum(counts.values())
        if lap is not None:
            lap("merge")

    def _stamps(self, window: DataFrame, lo: int, ddls: list[Ddl], keyed_batch: int | None
                ) -> tuple[dict[TableKey, int], dict[TableKey, list[int]]]:
        """One job: each table's rows per stretch between the window's DDL (their count and least commit ts),
        so finding the DDL segments with rows takes none; a few rows per table, not one per commit ts. Without
        watermarks, each partition's redelivery floors raised to what it applied of each table."""
        bounds = sorted({d.commit_ts for d in ddls})
        if len(bounds) <= 64:
            seg = sum((F.when(F.col("commit_ts") > b, 1).otherwise(0) for b in bounds), F.lit(0))
        else:  # a window dense with DDL: one row per commit ts
            seg = F.col("commit_ts")
        per_ts = window.groupBy("database", "table", seg.alias("_seg"), "topic", "partition").agg(
            F.count("*").alias("n"), F.min("commit_ts").alias("commit_ts"), F.max("commit_ts").alias("top")
        ).collect()
        counts: dict[TableKey, int] = {}
        stamps: dict[TableKey, list[int]] = {}
        floors = schedule.RedeliveryFloors(self.state.key_floors)
        for r in per_ts:
            k = (r["database"], r["table"])
            counts[k] = counts.get(k, 0) + r["n"]
            stamps.setdefault(k, []).append(r["commit_ts"] if r["commit_ts"] is not None else lo + 1)
            if keyed_batch is not None and r["top"]:  # what each partition applied, per table
                floors.raise_to(r["topic"], r["partition"], r["database"], r["table"], r["top"])
        for v in stamps.values():
            v.sort()
        return counts, stamps
