"""The working model of a table being built or altered: `_Work` and its columns and indexes.

CREATE and ALTER change a `_Work` with MySQL's rules (unnamed index names, a primary key's columns
are NOT NULL, a dropped column leaves its indexes); `build` turns it into a new `TableInfo`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import SchemaError, UnsupportedSyntax
from ..model import Column, Index, TableInfo
from ..mysqltypes import ColumnType, TypeParseError
from .defaults import stored_default
from .definitions import _STRING_FAMILIES, _accept_charset_kw, _charset_of_collation, _ColSpec, _IdxSpec
from .tokens import _P, _render, _Tok, _tokenize


@dataclass(slots=True, eq=False)
class _WCol:
    name: str
    mysql_type: str
    charset: str | None
    collate: str | None
    nullable: bool | None
    default: Any
    auto_increment: bool
    orig: str | None = None  # its name before the statement (None: added by it)


@dataclass(slots=True, eq=False)
class _WIdx:
    name: str
    cols: list[_WCol]
    primary: bool
    unique: bool


def _named(items: list[Any], name: str) -> Any:
    """The item of that name, as MySQL compares column and index names (case-insensitively)."""
    n = name.lower()
    return next((x for x in items if x.name.lower() == n), None)


@dataclass(slots=True, eq=False)
class _Work:
    stmt: str
    charset: str | None = None  # the table's default charset/collation, for columns that give none
    collate: str | None = None
    cols: list[_WCol] = field(default_factory=list)
    idxs: list[_WIdx] = field(default_factory=list)

    def fail(self, msg: str) -> SchemaError:
        return SchemaError(f"{msg}, in {self.stmt!r}")

    @classmethod
    def of(cls, t: TableInfo, stmt: str, charset: str | None, collate: str | None) -> _Work:
        w = cls(stmt, charset, collate)
        w.cols = [
            _WCol(c.name, c.mysql_type, c.charset, c.collate, c.nullable, c.default, c.auto_increment, c.name)
            for c in t.columns
        ]
        by = {c.name.lower(): c for c in w.cols}
        for i in t.indexes:
            refs = [by[n.lower()] for n in i.columns if n.lower() in by]
            if refs:
                w.idxs.append(_WIdx(i.name, refs, i.primary, i.unique or i.primary))
        if not any(i.primary for i in w.idxs):
            pk = [w.cols[k] for k, c in enumerate(t.columns) if c.primary_key]
            if pk:
                w.idxs.insert(0, _WIdx("PRIMARY", pk, True, True))
        # a unique_key flag without an index (a table from a protocol): the single-column unique index it means
        for k, c in enumerate(t.columns):
            wc = w.cols[k]
            if c.unique_key and not any(i.unique and not i.primary and i.cols == [wc] for i in w.idxs):
                w.idxs.append(_WIdx(w.index_name(c.name), [wc], False, True))
        return w

    # --- lookups --------------------------------------------------------------------------------
    def find(self, name: str) -> _WCol | None:
        """A column by its current name."""
        return _named(self.cols, name)

    def find_orig(self, name: str) -> _WCol | None:
        """A column named as in the table before the statement (MySQL resolves CHANGE/MODIFY/DROP so)."""
        n = name.lower()
        for c in self.cols:
            if c.orig is not None and c.orig.lower() == n:
                return c
        return self.find(name)

    def need(self, name: str, what: str = "column") -> _WCol:
        c = self.find_orig(name)
        if c is None:
            raise self.fail(f"{what} {name!r} does not exist")
        return c

    def find_index(self, name: str) -> _WIdx | None:
        return _named(self.idxs, name)

    def index_name(self, base: str) -> str:
        """MySQL's name for an unnamed index: its first column's name, then name_2, name_3, ..."""
        taken = {i.name.lower() for i in self.idxs}
        taken.add("primary")
        if base.lower() not in taken:
            return base
        k = 2
        while f"{base}_{k}".lower() in taken:
            k += 1
        return f"{base}_{k}"

    # --- changes --------------------------------------------------------------------------------
    def make_col(self, spec: _ColSpec) -> _WCol:
        try:
            ctype = ColumnType.parse(spec.type_text)
        except TypeParseError as e:
            raise UnsupportedSyntax(f"column {spec.name!r}: {e}, in {self.stmt!r}") from None
        cs = coll = None
        if ctype.family in _STRING_FAMILIES:
            cs, coll = spec.charset, spec.collate
            if cs is None and coll is not None:
                cs = _charset_of_collation(coll)
            elif cs is None:
                cs = self.charset
                if not spec.binary_attr:  # BINARY means the _bin collation of the charset
                    coll = self.collate
        nullable = False if spec.nullable is False or spec.serial else True
        return _WCol(spec.name, spec.type_text, cs, coll, nullable, spec.default, spec.auto_increment or spec.serial)

    def add_column(self, spec: _ColSpec, if_not_exists: bool = False) -> _WCol | None:
        if self.find(spec.name) is not None:
            if if_not_exists:
                return None
            raise self.fail(f"duplicate column name {spec.name!r}: the column already exists")
        col = self.make_col(spec)
        self.cols.append(col)
        self.inline_keys(spec, col)
        return col

    def inline_keys(self, spec: _ColSpec, col: _WCol) -> None:
        if spec.primary:
            self.add_index(_IdxSpec(None, [col.name], primary=True, unique=True), [col])
        if spec.unique or spec.serial:
            self.add_index(_IdxSpec(None, [col.name], unique=True), [col])

    def add_index(self, spec: _IdxSpec, cols: list[_WCol] | None = None) -> None:
        if cols is None:
            cols = []
            for n in spec.columns:
                c = self.find(n)
                if c is None:
                    raise self.fail(f"key column {n!r} does not exist")
                cols.append(c)
        if spec.primary:
            if any(i.primary for i in self.idxs):
                if spec.if_not_exists:
                    return
                raise self.fail("the table already has a primary key")
            if not cols:
                return
            for c in cols:
                c.nullable = False
            self.idxs.insert(0, _WIdx("PRIMARY", cols, True, True))
            return
        if spec.name is not None and (self.find_index(spec.name) or spec.name.lower() == "primary"):
            if spec.if_not_exists:
                return
            raise self.fail(f"duplicate key name {spec.name!r}")
        if not cols:  # only expression parts: nothing we can represent
            return
        name = spec.name or self.index_name("functional_index" if spec.first_expr else cols[0].name)
        # a unique index with expression parts does not make its plain columns unique
        self.idxs.append(_WIdx(name, cols, False, spec.unique and not spec.had_expr))

    def drop_column(self, col: _WCol) -> None:
        self.cols.remove(col)
        for i in self.idxs:
            i.cols = [c for c in i.cols if c is not col]
        self.idxs = [i for i in self.idxs if i.cols]

    def drop_index(self, name: str) -> None:
        if name.lower() == "primary":
            self.idxs = [i for i in self.idxs if not i.primary]
            return
        self.idxs = [i for i in self.idxs if i.primary or i.name.lower() != name.lower()]

    def redefine(self, col: _WCol, spec: _ColSpec) -> None:
        """MODIFY/CHANGE: the column takes the new definition (and keeps its indexes)."""
        new = self.make_col(spec)
        col.name = new.name
        col.mysql_type = new.mysql_type
        col.charset = new.charset
        col.collate = new.collate
        col.nullable = new.nullable
        col.default = new.default
        col.auto_increment = new.auto_increment
        self.inline_keys(spec, col)

    def place(self, col: _WCol, p: _P) -> None:
        """FIRST / AFTER x after a column definition."""
        if p.accept("FIRST"):
            self.cols.remove(col)
            self.cols.insert(0, col)
        elif p.accept("AFTER"):
            ref = p.ident()
            self.cols.remove(col)
            other = self.find(ref)
            if other is None:
                raise self.fail(f"column {ref!r} (of AFTER) does not exist")
            self.cols.insert(self.cols.index(other) + 1, col)

    def convert(self, cs: str, coll: str | None) -> None:
        """CONVERT TO CHARACTER SET: every character column takes the charset."""
        for c in self.cols:
            try:
                ctype = ColumnType.parse(c.mysql_type)
            except TypeParseError:
                continue
            if ctype.family in _STRING_FAMILIES:
                c.mysql_type = _strip_charset(c.mysql_type)
                c.charset, c.collate = cs, coll
        self.charset, self.collate = cs, coll

    # --- result ---------------------------------------------------------------------------------
    def build(self, schema: str, table: str, table_id: int | None, version: int | None) -> TableInfo:
        if not self.cols:
            raise self.fail("a table needs at least one column (use DROP TABLE to remove it)")
        seen: set[str] = set()
        for c in self.cols:
            if c.name.lower() in seen:
                raise self.fail(f"duplicate column name {c.name!r}")
            seen.add(c.name.lower())
        pk = next((i for i in self.idxs if i.primary), None)
        pk_ids = {id(c) for c in pk.cols} if pk else set()
        uk_ids = {id(i.cols[0]) for i in self.idxs if i.unique and not i.primary and len(i.cols) == 1}
        columns = [
            Column(
                name=c.name,
                mysql_type=c.mysql_type,
                charset=c.charset,
                collate=c.collate,
                nullable=False if id(c) in pk_ids else c.nullable,
                default=c.default,
                primary_key=id(c) in pk_ids,
                unique_key=id(c) in uk_ids,
                auto_increment=c.auto_increment,
            )
            for c in self.cols
        ]
        for col in columns:  # the literal as TiDB stores it for the column's type (`defaults`)
            col.default = stored_default(col.type, col.default)
        ordered = ([pk] if pk else []) + [i for i in self.idxs if not i.primary]
        indexes = [Index(i.name, [c.name for c in i.cols], i.primary, i.unique or i.primary) for i in ordered]
        return TableInfo(schema, table, columns, indexes, table_id=table_id, version=version, charset=self.charset)


def _strip_charset(type_text: str) -> str:
    """A column type without its CHARACTER SET / COLLATE clauses."""
    p = _P(_tokenize(type_text), type_text)
    keep: list[_Tok] = []
    while not p.at_end():
        if _accept_charset_kw(p) or p.accept("COLLATE"):
            p.accept_op("=")
            p.next()
        else:
            keep.append(p.next())
    return _render(keep)
