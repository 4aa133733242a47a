"""A window step's table writes and DDL: each table made ready (created if new, following its definition), then
the small plain tables of one shape written in one job (`multiwrite`), the others each its MERGE (`scd1`,
`scd2`), up to `table_writers` at once; the step's DDL applied in order (`ddl`)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from .ddldriver import DriverDdl
from .multiwrite import MultiWriter, Planned
from .options import END_AT, START_AT, WRITE_ATTEMPTS, conflicted
from .scd1 import merge_scd1
from .scd2 import merge_scd2

if TYPE_CHECKING:
    from .catalog import TableCatalog
    from .ddl import DdlApplier
    from .lake import Lake
    from .options import ApplyOptions
    from .projection import Projection
    from .segments import DdlStep, TableWrite


class TableWriters:
    """Writes a window step's tables and applies its DDL, for `segments.WindowApplier`."""

    def __init__(self, options: ApplyOptions, store: Lake, catalog: TableCatalog, proj: Projection,
                 ddl: DdlApplier) -> None:
        self.o = options
        self.store = store
        self.catalog = catalog
        self.proj = proj
        self.ddl = ddl
        self.multi = MultiWriter(store, proj, options)
        # a DDL the driver commits itself keeps the rows it holds for the table's next rewrite (`ddldriver`)
        ddl.driver = DriverDdl(store, self.multi.kept, options.scd_type, options.table_features)
        self._pool: ThreadPoolExecutor | None = None

    def write(self, work: list[TableWrite]) -> list[tuple[str, str]]:
        """The writes of one step: each table ready (`_plan`), then the small plain tables of one shape in one
        job (`multiwrite`), the others each its MERGE, up to `table_writers` at once; the tables that took rows.
        Every table keeps its own idempotent Delta commit, so a failure part-way leaves each table whole, at its
        old or its new version."""
        planned = [p for p in self._each(self._plan, work) if p is not None]
        groups, rest = self.multi.groups(planned)
        # tables whose rows the driver holds: merged there, after one job for all of them
        groups = self.multi.write_on_driver(groups, self.store.committed, self._each)
        for g in groups:
            self.multi.write(g, self.store.committed, self._each)
        # new tables not made by their first commit above (`ddls`): made now, before a MERGE or a DDL reads them
        self.store.materialize()
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

    def ddls(self, steps: list[DdlStep]) -> None:
        """DDL steps of different tables (`segments.ddl_groups`), one after another: their writes before them
        went at once; the DDL themselves stay sequential (Delta features turned on from several sessions at
        once are not something this consumer has been shown to get right), except a run of CREATE TABLE."""
        self.store.materialize()  # (none left by the write before them: `write` makes them)
        if len(steps) > 1 and all(s.ddl.ddl_type == "ActionCreateTable" for s in steps):
            # new tables, each its own: created at once (a database's tables arrive as a run of these), their
            # first log files made together (`DdlApplier.create_all`), then each DDL applied (finding its table).
            # A local lake's plain ones are made by their first commit, the step's next write: the creation and
            # the first rows in one log file per table (`write` makes those it did not commit)
            self.ddl.create_all([(s.ddl, s.version) for s in steps], defer=True)
            # those made: nothing left to apply (1,000 no-ops through the writer threads took ~0.1 s of handoffs)
            self._each(lambda s: self.ddl.apply(s.ddl, s.version),
                       [s for s in steps if not self.ddl.made(s.ddl, s.version)])
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
        if self.catalog.drift.get((db, tbl)) is not None:  # its columns changed below: made first
            self.store.materialize([path])
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
        """The table's MERGE; again on the table's new version when another writer's commit (a user's OPTIMIZE,
        DELETE or UPDATE) came between its read and its commit (Delta's conflict checker says so, and nothing of
        it was committed): the stream does not stop for another writer."""
        merge = merge_scd1 if self.o.scd_type == 1 else merge_scd2
        for attempt in range(WRITE_ATTEMPTS):
            try:
                merge(self.store, self.proj, self.o, p.t, p.path, p.write.rows, p.cols, p.write.version)
                return
            except Exception as e:
                if attempt + 1 == WRITE_ATTEMPTS or not conflicted(e):
                    raise
