"""CREATE TABLE (also `... LIKE`): `parse_create_table`, and `_create_table` which the tracker uses.

Also the table key `Key` (schema and table, lower-cased: TiDB compares names case-insensitively).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..errors import SchemaError, UnsupportedSyntax
from ..model import Index, TableInfo
from .definitions import (
    _charset_of_collation,
    _ColSpec,
    _column_def,
    _IdxSpec,
    _index_def,
    _is_index_item,
    _table_options,
)
from .tokens import _P, _short, _split, _statements
from .work import _Work

Key = tuple[str, str]


def _key(schema: str, table: str) -> Key:
    return schema.lower(), table.lower()


_LikeResolver = Callable[[str, str], "TableInfo | None"]


@dataclass(slots=True)
class _Created:
    table: TableInfo
    charset: str | None
    collate: str | None
    if_not_exists: bool
    like: Key | None = None  # the source of CREATE TABLE ... LIKE


def _copy(t: TableInfo, schema: str | None = None, table: str | None = None, **kw: Any) -> TableInfo:
    """A new TableInfo with new Column and Index objects (callers may cache the old one by identity)."""
    return TableInfo(
        schema=t.schema if schema is None else schema,
        table=t.table if table is None else table,
        columns=[replace(c) for c in t.columns],
        indexes=[Index(i.name, list(i.columns), i.primary, i.unique) for i in t.indexes],
        table_id=kw.get("table_id", t.table_id),
        version=kw.get("version", t.version),
    )


def _create_table(
    p: _P,
    default_schema: str,
    like: _LikeResolver,
    db_defaults: tuple[str | None, str | None] | Callable[[str], tuple[str | None, str | None]],
) -> _Created:
    """CREATE TABLE, from after CREATE."""
    p.accept_seq("OR", "REPLACE")
    p.accept("GLOBAL", "LOCAL")
    p.accept("TEMPORARY")
    p.expect("TABLE")
    if_not_exists = p.accept_seq("IF", "NOT", "EXISTS")
    schema, table = p.qname(default_schema)
    like_form = p.is_kw("LIKE") or (p.is_op("(") and p.is_kw("LIKE", k=1))
    if like_form:
        inner = _P(p.group(), p.stmt) if p.is_op("(") else p
        inner.expect("LIKE")
        src_schema, src_table = inner.qname(schema)
        src = like(src_schema, src_table)
        if src is None:
            raise UnsupportedSyntax(
                f"CREATE TABLE ... LIKE needs the definition of {src_schema}.{src_table} (pass like_source), "
                f"in {p.stmt!r}"
            )
        copied = _copy(src, schema, table, table_id=None, version=1)
        return _Created(copied, None, None, if_not_exists, _key(src_schema, src_table))
    if not p.is_op("("):
        raise p.err("CREATE TABLE without a column list (CREATE TABLE ... SELECT) is not supported")
    items: list[_ColSpec | _IdxSpec] = []
    for part in _split(p.group()):
        ip = _P(part, p.stmt)
        if _is_index_item(ip):
            spec = _index_def(ip)
            if spec is not None:
                items.append(spec)
        else:
            col = _column_def(ip, ip.ident())
            if not ip.at_end():
                raise ip.err(f"unexpected {ip.peek().text!r} in the definition of column {col.name!r}")
            items.append(col)
    cs, coll = _table_options(p)
    if cs is None and coll is not None:
        cs = _charset_of_collation(coll)
    if cs is None:
        cs, coll = db_defaults(schema) if callable(db_defaults) else db_defaults
    work = _Work(p.stmt, cs, coll)
    for item in items:
        if isinstance(item, _ColSpec):
            work.add_column(item)
        else:
            work.add_index(item)
    return _Created(work.build(schema, table, None, 1), cs, coll, if_not_exists)


def parse_create_table(sql: str, default_schema: str = "", like_source: TableInfo | None = None) -> TableInfo:
    """The table a CREATE TABLE statement defines (version 1, no table id).

    `CREATE TABLE t LIKE s` copies `like_source` under the new name; without it, it raises SchemaError.
    """
    stmts = _statements(sql)
    stmt = _short(sql)
    if len(stmts) != 1:
        raise SchemaError(f"expected one CREATE TABLE statement, got {len(stmts)}: {stmt!r}")
    p = _P(stmts[0], stmt)
    if not p.accept("CREATE") or not (
        p.is_kw("TABLE", "TEMPORARY")
        or (p.is_kw("GLOBAL", "LOCAL") and p.is_kw("TEMPORARY", k=1))
        or (p.is_kw("OR") and p.is_kw("REPLACE", k=1))
    ):
        raise SchemaError(f"not a CREATE TABLE statement: {stmt!r}")
    return _create_table(p, default_schema, lambda s, t: like_source, (None, None)).table
