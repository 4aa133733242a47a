"""The upstream tables' state after a stream of events, computed in plain Python (no Spark, no Delta).

This is what a consumer's tables must equal: `verify` compares a lake with it, the workload keeps its rows
with it. Rows are keyed by the table's handle key (all columns for a table without one); DDL changes the
rows as the upstream database does (ADD COLUMN fills the default, DROP and RENAME COLUMN move values).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .ddl import drops_schema, drops_table, renames_columns, truncates
from .model import Event, Kind, Row, TableInfo


def row_key(t: TableInfo, row: Row) -> tuple:
    names = t.handle_key or [c.name for c in t.columns]
    if len(names) == 1:  # the common case, without a generator
        return (row.get(names[0]),)
    return tuple([row.get(n) for n in names])


@dataclass
class TableState:
    table: TableInfo
    rows: dict[tuple, Row] = field(default_factory=dict)


def column_renames(before: TableInfo, after: TableInfo, action: str) -> dict[str, str]:
    """Old name -> new name of the columns a DDL renamed (paired in table order)."""
    if not renames_columns(action):
        return {}
    gone = [c.name for c in before.columns if c.name not in after.by_name]
    new = [c.name for c in after.columns if c.name not in before.by_name]
    return dict(zip(gone, new, strict=True)) if len(gone) == len(new) else {}


class UpstreamState:
    """Tables by (schema, table); `apply` one event at a time, in commit order."""

    def __init__(self) -> None:
        self.tables: dict[tuple[str, str], TableState] = {}
        self.commit_ts = 0

    def apply(self, ev: Event) -> None:
        if ev.kind in (Kind.WATERMARK, Kind.BOOTSTRAP):
            return
        self.commit_ts = max(self.commit_ts, ev.commit_ts)
        if ev.kind is Kind.DDL:
            self._ddl(ev)
            return
        t = ev.table
        assert t is not None
        st = self.tables.get((t.schema, t.table))
        if st is None:
            st = self.tables[(t.schema, t.table)] = TableState(t)
        st.table = t
        if ev.before is not None:
            st.rows.pop(row_key(t, ev.before), None)
        if ev.after is not None and ev.kind is not Kind.DELETE:
            full = {c.name: None for c in t.columns}
            full.update(ev.after)
            st.rows[row_key(t, full)] = full

    def _ddl(self, ev: Event) -> None:
        a = ev.ddl_type or ""
        before, after = ev.pre_table, ev.table
        if drops_schema(a):
            schema = (before or after).schema if (before or after) else ""
            for k in [k for k in self.tables if k[0] == schema]:
                del self.tables[k]
            return
        if drops_table(a):
            t = before or after
            if t is not None:
                self.tables.pop((t.schema, t.table), None)
            return
        if after is None or not after.columns:
            return
        old_key = (before.schema, before.table) if before is not None else (after.schema, after.table)
        st = self.tables.pop(old_key, None)
        if a == "ActionCreateTable" or st is None:
            self.tables[(after.schema, after.table)] = TableState(after)
            return
        if truncates(a):
            st.rows.clear()
        renames = column_renames(before, after, a) if before is not None else {}
        old_names = set(before.by_name) if before is not None else set(st.table.by_name)
        defaults: dict[str, Any] = {}
        for c in after.columns:
            if c.name not in old_names and c.name not in renames.values():
                try:
                    defaults[c.name] = c.normalize(c.default) if c.default is not None else None
                except Exception:
                    defaults[c.name] = None  # an expression default: no one value
        rows: dict[tuple, Row] = {}
        for row in st.rows.values():
            new: Row = {}
            for c in after.columns:
                src = next((o for o, n in renames.items() if n == c.name), c.name)
                new[c.name] = row[src] if src in row else defaults.get(c.name)
            rows[row_key(after, new)] = new
        self.tables[(after.schema, after.table)] = TableState(after, rows)


def final_state(events: Iterable[Event], upto: int | None = None) -> UpstreamState:
    """The state after every event (or those with commit ts <= upto), taken in commit ts order."""
    s = UpstreamState()
    for ev in events:
        if upto is not None and ev.commit_ts > upto and ev.kind is not Kind.WATERMARK:
            continue
        s.apply(ev)
    return s


def state_events(state: UpstreamState) -> Iterator[Event]:
    """The state as event lines a consumer's final state is compared with: per table, a CREATE TABLE (its
    definition) and one INSERT per row, all at the state's commit ts. `final_state` of them is `state` again,
    so `verify --against` takes this file as it takes a whole stream, without replaying the stream."""
    for (db, name), st in sorted(state.tables.items()):
        t = st.table
        cols = ", ".join(f"`{c.name}` {c.mysql_type}" for c in t.columns)
        yield Event(kind=Kind.DDL, commit_ts=state.commit_ts, table=t, ddl_type="ActionCreateTable",
                    query=f"CREATE TABLE `{db}`.`{name}` ({cols})")
        for row in st.rows.values():
            yield Event(kind=Kind.INSERT, commit_ts=state.commit_ts, table=t, after=row)
