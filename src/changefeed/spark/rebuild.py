"""Change rows (`read_changes`' shape) back into model Events: the inverse of decode's text maps.

A decode task writes a table's definition (`table_def`) on the first row of each shape it emits, not on every
row; `DefBook` gathers the definitions a DataFrame carries (a small aggregation on the driver) and picks, for a
row without one, the definition in force at its commit ts. Values go back through the inverse of the text
the decoder wrote: `make_text_parser(..., "base64")` for the "text" dialect (types.text_of), `"latin1"` for
canal-json's own value text (the "canal" dialect).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from ..errors import ChangefeedError
from ..eventline import table_from_json
from ..model import Column, Event, Kind, TableInfo
from ..mysqltypes import Family
from ..mysqltypes.text import make_text_parser
from .apply.catalog import table_of

# the columns a rebuilt Event needs, in this order (stage inputs select them)
EVENT_COLUMNS = ("kind", "database", "table", "commit_ts", "schema_version", "position", "before", "after",
                 "ddl", "ddl_type", "table_def", "pre_table_def")


class DefBook:
    """Table definitions by (database, table): (first commit ts seen, schema version, rank, JSON text). Rank 2: a
    DDL's or BOOTSTRAP's (upstream's own definition); 1: a row's (its decoder's view: Debezium's, say, from the
    Connect schema); 0: canal-json's row shape (short types). Plain data, pickled to the executors."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, str], list[tuple[int, int | None, int, str]]] = {}

    def add(self, database: str, table: str, ts: int, version: int | None, text: str, rank: int = 1) -> None:
        lst = self.entries.setdefault((database, table), [])
        for i, (ts0, v0, r0, t0) in enumerate(lst):
            if t0 == text:
                lst[i] = (min(ts, ts0), v0, max(rank, r0), t0)
                lst.sort(key=lambda e: e[0])
                return
        lst.append((ts, version, rank, text))
        lst.sort(key=lambda e: e[0])

    def upstream(self) -> list[list[Any]]:
        """The DDL's and BOOTSTRAP's definitions (rank 2), as plain lists: kept beside a stream's checkpoint, since a
        micro-batch after a restart may hold none of the DDL its rows follow."""
        return [[db, tb, ts, ver, text] for (db, tb), lst in self.entries.items() for ts, ver, rank, text in lst
                if rank == 2]

    def merge(self, rows: Iterable[Any]) -> None:
        """Rows of (database, table, schema_version, table_def, first commit_ts, rank)."""
        for db, tb, ver, text, ts, rank in rows:
            if db is not None and tb is not None and text:
                self.add(db, tb, int(ts or 0), ver, text, 0 if '"mysqlType":{' in text else rank)

    def __len__(self) -> int:
        return sum(len(v) for v in self.entries.values())


_ROUNDED = (Family.DECIMAL, Family.DATETIME, Family.TIMESTAMP, Family.TIME)


def _parser(c: Column, binary: str) -> Callable[[str], Any]:
    """A column's text back to its datum, rounded to the column's scale or fsp as TiDB stores it (a decoder's view
    of a DECIMAL(10,2) may have been a double: 1.5, not 1.50)."""
    parse = make_text_parser(c.type, binary)
    if c.type.family in _ROUNDED:
        store = c.store
        return lambda s: store(parse(s))
    return parse


class Rebuilder:
    """Rows to Events on an executor: definitions parsed once, value parsers built once per definition."""

    def __init__(self, book: DefBook, dialect: str) -> None:
        self.book = book
        self.binary = "latin1" if dialect == "canal" else "base64"
        self.parsed: dict[str, TableInfo] = {}
        self.shapes: set[str] = set()  # canal-json's row shapes (short types): a full definition is preferred
        self.parsers: dict[int, tuple[TableInfo, dict[str, Callable[[str], Any]]]] = {}
        self.found: dict[tuple, TableInfo | None] = {}
        self.merged: dict[tuple, tuple[TableInfo, TableInfo]] = {}
        self.ts_index = {k: [e[0] for e in v] for k, v in book.entries.items()}

    def table(self, text: str) -> TableInfo:
        t = self.parsed.get(text)
        if t is None:
            if '"mysqlType":{' in text:
                self.shapes.add(text)
                t = self.parsed[text] = table_of(text)
            else:
                t = self.parsed[text] = table_from_json(orjson.loads(text))
        return t

    def _fits(self, t: TableInfo, names: Iterable[str]) -> bool:
        by = t.by_name
        return all(n in by for n in names)

    def lookup(self, database: str, table: str, ts: int, version: int | None, names: list[str],
               min_rank: int = 0) -> TableInfo | None:
        """The definition for a row: of the highest rank, the latest first seen at or before its commit ts with
        the row's columns exactly, else one that holds them (later ones last); its schema version's first."""
        entries = self.book.entries.get((database, table))
        if not entries:
            return None
        i = bisect.bisect_right(self.ts_index[(database, table)], ts)
        key = (database, table, version, i, tuple(names), min_rank)
        if key in self.found:
            return self.found[key]
        if len(self.found) > 65536:
            self.found.clear()
        t = self.found[key] = self._search(entries, i, version, names, min_rank)
        return t

    def _search(self, entries: list[tuple[int, int | None, int, str]], i: int, version: int | None,
                names: list[str], min_rank: int) -> TableInfo | None:
        order = list(range(i - 1, -1, -1)) + list(range(i, len(entries)))
        if version is not None:
            order.sort(key=lambda j: entries[j][1] != version)  # stable: its version's first
        want = set(names)
        for rank in range(2, min_rank - 1, -1):
            for exact in (True, False):
                for j in order:
                    if entries[j][2] != rank:
                        continue
                    t = self.table(entries[j][3])
                    if (set(t.by_name) == want) if exact else self._fits(t, names):
                        return t
        return None

    def completed(self, db: str, tb: str, shape: TableInfo) -> TableInfo:
        """A canal-json row shape (short types: `set`, `decimal`) with each column's full type taken from the latest
        upstream definition that has a column of its name (a row whose exact definition the changes lack: after a
        RENAME COLUMN the transcoder did not see, say)."""
        key = (db, tb, id(shape))
        got = self.merged.get(key)
        if got is not None and got[0] is shape:
            return got[1]
        full: dict[str, Column] = {}
        for _, _, rank, text in self.book.entries.get((db, tb), []):
            if rank == 2:
                for c in self.table(text).columns:
                    full[c.name] = c
        cols = [Column(c.name, full[c.name].mysql_type, charset=full[c.name].charset, collate=full[c.name].collate,
                       nullable=full[c.name].nullable, primary_key=c.primary_key) if c.name in full else c
                for c in shape.columns]
        t = TableInfo(shape.schema, shape.table, columns=cols, indexes=shape.indexes)
        self.merged[key] = (shape, t)
        return t

    def values(self, t: TableInfo, pairs: list[tuple[str, str | None]] | None) -> dict[str, Any] | None:
        if pairs is None:
            return None
        held = self.parsers.get(id(t))
        if held is None or held[0] is not t:  # an id is only unique while its table lives
            if len(self.parsers) > 4096:
                self.parsers.clear()
            shape = any(self.parsed.get(x) is t for x in self.shapes)  # short types: no scale to round to
            held = self.parsers[id(t)] = (t, {c.name: make_text_parser(c.type, self.binary) if shape
                                              else _parser(c, self.binary) for c in t.columns})
        ps = held[1]
        try:
            return {k: None if v is None else ps[k](v) for k, v in pairs}
        except Exception as e:  # noqa: BLE001 - say which value
            for k, v in pairs:
                try:
                    None if v is None else ps[k](v)
                except Exception:  # noqa: BLE001
                    typ = t.by_name[k].mysql_type if k in t.by_name else "?"
                    raise ChangefeedError(f"{t.qualified}: column {k!r} ({typ}) cannot hold {str(v)[:40]!r}: {e}"
                                          ) from None
            raise

    def event(self, row: tuple) -> Event:
        """One row (EVENT_COLUMNS, as pyarrow's to_pylist gives them) as an Event."""
        kind_s, db, tb, ts, ver, pos, before, after, ddl, ddl_type, tdef, pre = row
        kind = Kind(kind_s)
        ts = int(ts or 0)
        if kind is Kind.DDL:
            return Event(kind=kind, commit_ts=ts, table=self.table(tdef) if tdef else None,
                         pre_table=self.table(pre) if pre else None, query=ddl, ddl_type=ddl_type,
                         position=orjson.loads(pos) if pos else None)
        names = [k for k, _ in (after or before or [])]
        best = self.lookup(db, tb, ts, ver, names, min_rank=2)  # upstream's definition in force, when known
        own = self.table(tdef) if tdef else None
        tried = [t for t in (best, own if own is not None and tdef not in self.shapes else None) if t is not None]
        if not tried:
            t = self.lookup(db, tb, ts, ver, names) or own
            if t is not None and any(self.parsed.get(x) is t for x in self.shapes):
                t = self.completed(db, tb, t)
            if t is None:
                raise ChangefeedError(f"a change of {db}.{tb} at commit ts {ts} and no table definition of it in "
                                      "the changes (they carry one on the first row of each table shape)")
            tried = [t]
        for n, t in enumerate(tried):
            try:
                return Event(kind=kind, commit_ts=ts, table=t, before=self.values(t, before),
                             after=self.values(t, after), position=orjson.loads(pos) if pos else None)
            except ChangefeedError:
                if n == len(tried) - 1:
                    raise
        raise AssertionError("unreachable")
