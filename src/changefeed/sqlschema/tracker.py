"""`SchemaTracker`: table definitions by (schema, table), kept current by applying DDL statements.

It reads the statement head (CREATE/DROP/ALTER/RENAME/TRUNCATE, of tables, indexes and databases) and
hands the rest to `create`, `alter` and `work`; it owns the store and the version rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import SchemaError, UnsupportedSyntax
from ..model import TableInfo
from .alter import _alter_spec
from .create import Key, _copy, _create_table, _Created, _key
from .definitions import _charset_of_collation, _IdxSpec, _key_parts, _table_options
from .tokens import _P, _render, _short, _split, _statements
from .work import _Work


@dataclass(slots=True)
class _Entry:
    table: TableInfo
    charset: str | None = None  # the table's default charset/collation (None: not known)
    collate: str | None = None


def _definition(t: TableInfo) -> tuple:
    sig = t.signature()
    return sig[:3] + sig[4:] + (tuple((c.default, c.auto_increment) for c in t.columns),)


Result = tuple[TableInfo | None, TableInfo | None]
_NONE: Result = (None, None)
# plain CREATE TABLE statements (one statement, no LIKE) parsed in this process, by their text, default schema and
# the databases' default charsets (all a definition depends on): a DDL arrives once per partition, and a database's
# first micro-batch decodes a CREATE TABLE per table in each (bench/RESULTS.md, issue 38 item 4)
_CREATED: dict[tuple[str, str, tuple[tuple[str, tuple[str | None, str | None]], ...]], _Created] = {}
CREATED_KEPT = 4096


class SchemaTracker:
    """Table definitions by (schema, table), kept current by `apply`-ing DDL statements.

    Names are kept as written and looked up case-insensitively (as TiDB does). TableInfo objects are
    never changed once stored or returned: each change stores a new one, with `version` one higher
    (a statement that leaves the definition as it was, such as TRUNCATE or a table comment, keeps it).
    """

    def __init__(self) -> None:
        self._tables: dict[Key, _Entry] = {}
        self._dbs: dict[str, tuple[str | None, str | None]] = {}
        self._plain_create: _Created | None = None  # the statement being applied, a plain CREATE TABLE parsed

    # --- state ----------------------------------------------------------------------------------
    def get(self, schema: str, table: str) -> TableInfo | None:
        e = self._tables.get(_key(schema, table))
        return e.table if e else None

    def put(self, table: TableInfo) -> None:
        """Store a definition learned elsewhere (a bootstrap, a protocol that carries it)."""
        old = self._tables.get(_key(table.schema, table.table))
        # the table's default charset, for the columns a later ALTER adds: the definition's own where it says it
        # (a CREATE TABLE read back), else what was known
        keep = (table.charset, None) if table.charset else (old.charset, old.collate) if old else (None, None)
        self._tables[_key(table.schema, table.table)] = _Entry(table, *keep)

    def tables(self) -> list[TableInfo]:
        return [e.table for e in self._tables.values()]

    def forget(self, schema: str, table: str) -> None:
        """Drop a definition that can no longer be trusted (a DDL that did not fit it)."""
        self._tables.pop(_key(schema, table), None)

    def _db_defaults(self, schema: str) -> tuple[str | None, str | None]:
        return self._dbs.get(schema.lower(), (None, None))

    # --- statements -----------------------------------------------------------------------------
    def apply(self, sql: str, default_schema: str = "") -> Result:
        """Apply DDL; (before, after) of the table it touches (None where the table does not exist).

        Statements it does not understand, or about tables it does not know, give (None, None) and change
        nothing. Several statements separated by `;` are applied in turn; the result is that of the
        first one that touched a table. Raises SchemaError when a statement about a known table cannot
        hold (a column or key column it names does not exist, a duplicate column).
        """
        key = (sql, default_schema, tuple(self._dbs.items()))
        made = _CREATED.get(key)
        if made is not None:  # the same CREATE TABLE parsed before: its definition (never changed once made)
            return self._created(made)
        result = _NONE
        stmts = _statements(sql)
        for toks in stmts:
            stmt = _short(_render(toks))
            self._plain_create = None
            try:
                r = self._one(_P(toks, stmt), default_schema)
            except SchemaError as e:
                if isinstance(e, UnsupportedSyntax):
                    r = _NONE
                else:
                    raise
            if result == _NONE:
                result = r
        if len(stmts) == 1 and self._plain_create is not None:
            if len(_CREATED) >= CREATED_KEPT:
                _CREATED.pop(next(iter(_CREATED)))  # the oldest
            _CREATED[key] = self._plain_create
        return result

    def _one(self, p: _P, ds: str) -> Result:
        head = p.accept("CREATE", "DROP", "ALTER", "RENAME", "TRUNCATE")
        if head == "CREATE":
            if p.accept("DATABASE", "SCHEMA"):
                return self._create_database(p)
            start = p.i
            p.accept_seq("OR", "REPLACE")
            p.accept("GLOBAL", "LOCAL")
            p.accept("TEMPORARY")
            if p.is_kw("TABLE"):
                p.i = start
                return self._create(p, ds)
            p.i = start
            p.accept_seq("OR", "REPLACE")
            p.accept("ONLINE", "OFFLINE")
            if p.is_kw("INDEX") or (
                p.is_kw("UNIQUE", "FULLTEXT", "SPATIAL", "VECTOR", "COLUMNAR") and p.is_kw("INDEX", "KEY", k=1)
            ):
                return self._create_index(p, ds)
            return _NONE
        if head == "DROP":
            if p.accept("DATABASE", "SCHEMA"):
                p.accept_seq("IF", "EXISTS")
                name = p.ident().lower()
                self._dbs.pop(name, None)
                for k in [k for k in self._tables if k[0] == name]:
                    del self._tables[k]
                return _NONE
            p.accept("TEMPORARY")
            if p.accept("TABLE", "TABLES"):
                return self._drop(p, ds)
            p.accept("ONLINE", "OFFLINE")
            if p.accept("INDEX"):
                return self._drop_index(p, ds)
            return _NONE
        if head == "ALTER":
            if p.accept("DATABASE", "SCHEMA"):
                return self._alter_database(p)
            p.accept("ONLINE", "OFFLINE")
            p.accept("IGNORE")
            if p.accept("TABLE"):
                return self._alter(p, ds)
            return _NONE
        if head == "RENAME" and p.accept("TABLE", "TABLES"):
            return self._rename(p, ds)
        if head == "TRUNCATE":
            p.accept("TABLE")
            e = self._tables.get(_key(*p.qname(ds)))
            if e is None:
                return _NONE
            after = _copy(e.table)
            self._tables[_key(after.schema, after.table)] = _Entry(after, e.charset, e.collate)
            return e.table, after
        return _NONE

    # --- databases ------------------------------------------------------------------------------
    def _db_options(self, p: _P) -> tuple[str | None, str | None]:
        cs, coll = _table_options(p)
        if cs is None and coll is not None:
            cs = _charset_of_collation(coll)
        return cs, coll

    def _create_database(self, p: _P) -> Result:
        p.accept_seq("IF", "NOT", "EXISTS")
        name = p.ident()
        self._dbs[name.lower()] = self._db_options(p)
        return _NONE

    def _alter_database(self, p: _P) -> Result:
        name = None
        if not p.is_kw("DEFAULT", "CHARACTER", "CHARSET", "CHAR", "COLLATE", "READ", "ENCRYPTION", "SET"):
            name = p.ident()
        if name is None:
            return _NONE
        cs, coll = self._db_options(p)
        if cs is not None:
            self._dbs[name.lower()] = (cs, coll)
        return _NONE

    # --- tables ---------------------------------------------------------------------------------
    def _create(self, p: _P, ds: str) -> Result:
        def like(schema: str, table: str) -> TableInfo | None:
            return self.get(schema, table)

        made = _create_table(p, ds, like, self._db_defaults)
        if made.like is not None:
            src = self._tables.get(made.like)
            if src is not None:
                made.charset, made.collate = src.charset, src.collate
        else:
            self._plain_create = made
        return self._created(made)

    def _created(self, made: _Created) -> Result:
        """A parsed CREATE TABLE taken into the store."""
        t = made.table
        k = _key(t.schema, t.table)
        old = self._tables.get(k)
        if old is not None and made.if_not_exists:
            return old.table, _copy(old.table)
        self._tables[k] = _Entry(t, made.charset, made.collate)
        return (old.table if old else None), t

    def _drop(self, p: _P, ds: str) -> Result:
        p.accept_seq("IF", "EXISTS")
        result = _NONE
        for k, part in enumerate(_split(p.rest())):
            sub = _P(part, p.stmt)
            e = self._tables.pop(_key(*sub.qname(ds)), None)
            if k == 0 and e is not None:
                result = (e.table, None)
        return result

    def _rename(self, p: _P, ds: str) -> Result:
        result = _NONE
        for k, part in enumerate(_split(p.rest())):
            sub = _P(part, p.stmt)
            old = sub.qname(ds)
            sub.expect("TO")
            new = sub.qname(ds or old[0])
            e = self._tables.pop(_key(*old), None)
            if e is None:
                continue
            after = _copy(e.table, new[0], new[1], version=(e.table.version or 0) + 1)
            self._tables[_key(*new)] = _Entry(after, e.charset, e.collate)
            if k == 0:
                result = (e.table, after)
        return result

    def _change(self, schema: str, table: str, stmt: str, fn: Callable[[_Work], Key | None]) -> Result:
        """Apply `fn` to a working copy of the table; store and return the result."""
        e = self._tables.get(_key(schema, table))
        if e is None:
            return _NONE
        before = e.table
        work = _Work.of(before, stmt, e.charset, e.collate)
        renamed = fn(work)
        new_schema, new_table = renamed if renamed else (before.schema, before.table)
        after = work.build(new_schema, new_table, before.table_id, before.version)
        if _definition(after) != _definition(before):
            after.version = (before.version or 0) + 1
        del self._tables[_key(before.schema, before.table)]
        self._tables[_key(new_schema, new_table)] = _Entry(after, work.charset, work.collate)
        return before, after

    def _create_index(self, p: _P, ds: str) -> Result:
        unique = p.accept("UNIQUE") is not None
        p.accept("FULLTEXT", "SPATIAL", "VECTOR", "COLUMNAR")
        p.expect("INDEX")
        if_not_exists = p.accept_seq("IF", "NOT", "EXISTS")
        name = p.ident()
        if p.accept("USING", "TYPE"):
            p.next()
        p.expect("ON")
        schema, table = p.qname(ds)
        cols, had_expr, first_expr = _key_parts(p)
        spec = _IdxSpec(name, cols, False, unique, had_expr, first_expr, if_not_exists)
        return self._change(schema, table, p.stmt, lambda w: w.add_index(spec))

    def _drop_index(self, p: _P, ds: str) -> Result:
        p.accept_seq("IF", "EXISTS")
        name = p.ident()
        p.expect("ON")
        schema, table = p.qname(ds)
        return self._change(schema, table, p.stmt, lambda w: w.drop_index(name))

    def _alter(self, p: _P, ds: str) -> Result:
        p.accept_seq("IF", "EXISTS")
        schema, table = p.qname(ds)
        specs = _split(p.rest())
        stmt = p.stmt

        def run(w: _Work) -> Key | None:
            renamed: Key | None = None
            for part in specs:
                r = _alter_spec(w, _P(part, stmt), ds or schema)
                if r is not None:
                    renamed = r
            return renamed

        return self._change(schema, table, stmt, run)
