"""A small MySQL/TiDB DDL interpreter: table definitions from DDL text, kept current statement by statement.

Protocols such as canal-json carry DDL only as SQL text. `parse_create_table` turns a CREATE TABLE
(including `SHOW CREATE TABLE` output of MySQL, MariaDB and TiDB) into a `TableInfo`;
`SchemaTracker.apply` follows CREATE/DROP/TRUNCATE/RENAME/ALTER TABLE, CREATE/DROP INDEX and
CREATE/DROP DATABASE so that the full definition of every table it has seen is known.

It is not a full SQL parser: it tokenizes the statement (quotes, comments, TiDB's `/*T![feature] ... */`
and MySQL's `/*!40101 ... */` versioned comments, whose content is read as SQL) and reads what it
needs, skipping what it does not (column and index options, foreign keys, checks, partitions).
Statements it does not understand are ignored by the tracker; an ALTER of a known table that names a
column the table does not have raises `SchemaError`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import SchemaError, UnsupportedSyntax
from ..model import Column, Index, TableInfo
from ..mysqltypes import ColumnType, Family, TypeParseError
from ..mysqltypes import unquote_sql_string as _unquote

__all__ = ["SchemaError", "SchemaTracker", "parse_create_table"]


Key = tuple[str, str]


def _key(schema: str, table: str) -> Key:
    return schema.lower(), table.lower()


def _short(sql: str, limit: int = 160) -> str:
    s = " ".join(sql.split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


# ------------------------------------------------------------------------------------------------
# Tokens
# ------------------------------------------------------------------------------------------------

_TOKEN_RE = re.compile(
    r"""
      (?P<ws>\s+)
    | (?P<vopen>/\*(?:!\d*|[MT]!(?:\[[^\]]*\])?))
    | (?P<comment>/\*.*?\*/|--(?=\s|$)[^\n]*|\#[^\n]*)
    | (?P<vclose>\*/)
    | (?P<qid>`(?:[^`]|``)*`)
    | (?P<str>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
    | (?P<hex>0x[0-9a-fA-F]+(?![\w$])|[xX]'[0-9a-fA-F]*')
    | (?P<bit>0b[01]+(?![\w$])|[bB]'[01]*')
    | (?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?![\w$]))
    | (?P<id>[\w$]+)
    | (?P<op><=>|<=|>=|<>|!=|:=|\|\||&&|<<|>>|->>|->|.)
    """,
    re.S | re.X,
)

class _Tok:
    __slots__ = ("kind", "text", "start", "end", "up")

    def __init__(self, kind: str, text: str, start: int, end: int) -> None:
        self.kind = kind
        self.text = text
        self.start = start
        self.end = end
        self.up = text.upper() if kind == "id" else ""

    def is_op(self, ch: str) -> bool:
        return self.kind == "op" and self.text == ch

    @property
    def value(self) -> str:
        """An identifier's or string's value: quotes removed."""
        if self.kind == "qid":
            return self.text[1:-1].replace("``", "`")
        if self.kind == "str":
            return _unquote(self.text)
        return self.text

    def __repr__(self) -> str:
        return f"<{self.kind} {self.text!r}>"


_EOF = _Tok("eof", "", -1, -1)


def _tokenize(sql: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    n = len(sql)
    versioned = 0
    match = _TOKEN_RE.match
    while pos < n:
        m = match(sql, pos)
        assert m is not None  # the last alternative matches any character
        kind = m.lastgroup
        end = m.end()
        if kind == "vopen":
            versioned += 1
        elif kind == "vclose":
            if versioned:
                versioned -= 1
            else:
                toks.append(_Tok("op", "*", pos, pos + 1))
                toks.append(_Tok("op", "/", pos + 1, end))
        elif kind not in ("ws", "comment"):
            toks.append(_Tok(kind, m.group(), pos, end))  # type: ignore[arg-type]
        pos = end
    return toks


def _render(toks: list[_Tok], texts: list[str] | None = None) -> str:
    """Tokens back to text: as written, with any run of spaces or comments between two tokens as one space."""
    out: list[str] = []
    prev: _Tok | None = None
    for k, t in enumerate(toks):
        if prev is not None and t.start > prev.end:
            out.append(" ")
        out.append(texts[k] if texts is not None else t.text)
        prev = t
    return "".join(out)


def _split(toks: list[_Tok], sep: str = ",") -> list[list[_Tok]]:
    """Split on `sep` outside parentheses (empty parts dropped)."""
    parts: list[list[_Tok]] = []
    cur: list[_Tok] = []
    depth = 0
    for t in toks:
        if t.kind == "op":
            if t.text == "(":
                depth += 1
            elif t.text == ")":
                depth -= 1
            elif t.text == sep and depth == 0:
                if cur:
                    parts.append(cur)
                cur = []
                continue
        cur.append(t)
    if cur:
        parts.append(cur)
    return parts


class _P:
    """A cursor over a statement's tokens (or part of them)."""

    __slots__ = ("t", "i", "stmt")

    def __init__(self, toks: list[_Tok], stmt: str) -> None:
        self.t = toks
        self.i = 0
        self.stmt = stmt

    def err(self, msg: str) -> UnsupportedSyntax:
        return UnsupportedSyntax(f"{msg} in {self.stmt!r}")

    def peek(self, k: int = 0) -> _Tok:
        j = self.i + k
        return self.t[j] if j < len(self.t) else _EOF

    def at_end(self) -> bool:
        return self.i >= len(self.t)

    def next(self) -> _Tok:
        if self.i >= len(self.t):
            raise self.err("unexpected end of statement")
        tok = self.t[self.i]
        self.i += 1
        return tok

    def is_kw(self, *words: str, k: int = 0) -> bool:
        return self.peek(k).up in words

    def accept(self, *words: str) -> str | None:
        up = self.peek().up
        if up and up in words:
            self.i += 1
            return up
        return None

    def accept_seq(self, *words: str) -> bool:
        if all(self.peek(k).up == w for k, w in enumerate(words)):
            self.i += len(words)
            return True
        return False

    def expect(self, word: str) -> None:
        if not self.accept(word):
            raise self.err(f"expected {word}, found {self.peek().text or 'the end'!r}")

    def is_op(self, ch: str, k: int = 0) -> bool:
        return self.peek(k).is_op(ch)

    def accept_op(self, ch: str) -> bool:
        if self.peek().is_op(ch):
            self.i += 1
            return True
        return False

    def ident(self) -> str:
        tok = self.next()
        if tok.kind in ("id", "qid", "str"):
            return tok.value
        if tok.kind == "num":  # an unquoted name such as 123abc is an id; a bare number is not, but accept it
            return tok.text
        raise self.err(f"expected a name, found {tok.text!r}")

    def qname(self, default_schema: str) -> tuple[str, str]:
        first = self.ident()
        if self.accept_op("."):
            return first, self.ident()
        return default_schema, first

    def group(self) -> list[_Tok]:
        """Consume `( ... )` and return the tokens inside."""
        if not self.is_op("("):
            raise self.err(f"expected '(', found {self.peek().text or 'the end'!r}")
        start = self.i
        depth = 0
        while self.i < len(self.t):
            tok = self.t[self.i]
            self.i += 1
            if tok.kind == "op":
                if tok.text == "(":
                    depth += 1
                elif tok.text == ")":
                    depth -= 1
                    if depth == 0:
                        return self.t[start + 1 : self.i - 1]
        raise self.err("unbalanced parentheses")

    def rest(self) -> list[_Tok]:
        toks = self.t[self.i :]
        self.i = len(self.t)
        return toks


# ------------------------------------------------------------------------------------------------
# Definitions as written
# ------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _ColSpec:
    name: str
    type_text: str
    charset: str | None = None
    collate: str | None = None
    binary_attr: bool = False
    nullable: bool | None = None  # None: not said (nullable)
    default: Any = None
    auto_increment: bool = False
    primary: bool = False
    unique: bool = False
    serial: bool = False  # SERIAL type or SERIAL DEFAULT VALUE: NOT NULL AUTO_INCREMENT UNIQUE


@dataclass(slots=True)
class _IdxSpec:
    name: str | None
    columns: list[str]
    primary: bool = False
    unique: bool = False
    had_expr: bool = False
    first_expr: bool = False
    if_not_exists: bool = False


_MULTIWORD_TYPES = (
    ("NATIONAL", "CHARACTER", "VARYING"),
    ("NATIONAL", "CHAR", "VARYING"),
    ("NATIONAL", "CHARACTER"),
    ("NATIONAL", "CHAR"),
    ("NATIONAL", "VARCHAR"),
    ("CHARACTER", "VARYING"),
    ("CHAR", "VARYING"),
    ("DOUBLE", "PRECISION"),
    ("LONG", "VARBINARY"),
    ("LONG", "VARCHAR"),
)
_TYPE_FLAGS = ("UNSIGNED", "SIGNED", "ZEROFILL", "BINARY", "ASCII", "UNICODE")
_STRING_FAMILIES = (Family.STRING, Family.ENUM, Family.SET)


def _charset_of_collation(coll: str) -> str:
    return "binary" if coll == "binary" else coll.split("_", 1)[0]


def _accept_charset_kw(p: _P) -> bool:
    """CHARSET | CHARACTER SET | CHAR SET."""
    if p.accept("CHARSET"):
        return True
    if p.is_kw("CHARACTER", "CHAR") and p.is_kw("SET", k=1):
        p.i += 2
        return True
    return False


def _column_def(p: _P, name: str) -> _ColSpec:
    """The column definition after its name: the type, then column attributes (up to FIRST/AFTER or the end)."""
    type_toks: list[_Tok] = []
    texts: list[str] = []

    def take(tok: _Tok, text: str | None = None) -> None:
        type_toks.append(tok)
        texts.append(tok.text if text is None else text)

    head = p.next()
    if head.kind != "id":
        raise p.err(f"expected the type of column {name!r}, found {head.text!r}")
    take(head)
    for combo in _MULTIWORD_TYPES:
        if combo[0] == head.up and all(p.peek(k - 1).up == w for k, w in enumerate(combo) if k):
            for _ in combo[1:]:
                take(p.next())
            break
    if p.is_op("("):
        start = p.i
        p.group()
        for tok in p.t[start : p.i]:
            take(tok)
    spec = _ColSpec(name=name, type_text="")
    while True:
        if p.is_kw(*_TYPE_FLAGS):
            tok = p.next()
            spec.binary_attr |= tok.up == "BINARY"
            take(tok)
        elif p.is_kw("CHARSET") or (p.is_kw("CHARACTER", "CHAR") and p.is_kw("SET", k=1)):
            take(p.next())
            if type_toks[-1].up != "CHARSET":
                take(p.next())
            tok = p.next()
            spec.charset = tok.value.lower()
            take(tok, tok.value)
        elif p.is_kw("COLLATE"):
            take(p.next())
            tok = p.next()
            spec.collate = tok.value.lower()
            take(tok, tok.value)
        else:
            break
    spec.type_text = _render(type_toks, texts)
    if head.up == "SERIAL" and len(type_toks) == 1:
        spec.serial = True
    _column_attrs(p, spec)
    return spec


def _skip_references(p: _P) -> None:
    p.qname("")
    if p.is_op("("):
        p.group()
    while True:
        if p.accept("MATCH"):
            p.next()
        elif p.is_kw("ON") and p.is_kw("DELETE", "UPDATE", k=1):
            p.i += 2
            if p.accept("SET"):
                p.next()
            elif p.accept("NO"):
                p.accept("ACTION")
            else:
                p.next()
        else:
            return


def _column_attrs(p: _P, spec: _ColSpec) -> None:
    while not p.at_end() and not p.is_kw("FIRST", "AFTER"):
        tok = p.next()
        up = tok.up
        if up == "NOT":
            if p.accept("NULL"):
                spec.nullable = False
            else:
                p.accept("ENFORCED", "SECONDARY")
        elif up == "NULL":
            spec.nullable = True
        elif up == "DEFAULT":
            spec.default = _default_value(p)
        elif up == "AUTO_INCREMENT":
            spec.auto_increment = True
        elif up == "UNIQUE":
            p.accept("KEY", "INDEX")
            spec.unique = True
        elif up == "PRIMARY":
            p.accept("KEY")
            spec.primary = True
        elif up == "KEY":  # in a column definition, KEY alone means PRIMARY KEY
            spec.primary = True
        elif up == "COMMENT":
            p.accept_op("=")
            p.next()
        elif up == "COLLATE":
            p.accept_op("=")
            spec.collate = p.ident().lower()
        elif up == "CHARSET" or (up in ("CHARACTER", "CHAR") and p.accept("SET")):
            p.accept_op("=")
            spec.charset = p.ident().lower()
        elif up == "ON":
            if p.accept("UPDATE"):
                p.next()
                if p.is_op("("):
                    p.group()
        elif up == "GENERATED":
            p.accept("ALWAYS")
            p.expect("AS")
            p.group()
        elif up == "AS":
            p.group()
        elif up == "REFERENCES":
            _skip_references(p)
        elif up == "CONSTRAINT":
            if not p.is_kw("CHECK"):
                p.ident()
        elif up == "CHECK":
            p.group()
        elif up == "SERIAL":
            p.accept_seq("DEFAULT", "VALUE")
            spec.serial = True
        elif up in ("COLUMN_FORMAT", "STORAGE", "SRID"):
            p.next()
        elif up in ("WITH", "WITHOUT"):
            p.accept_seq("SYSTEM", "VERSIONING")
        elif p.accept_op("="):  # an option we do not know (COMPRESSED=zlib, ENGINE_ATTRIBUTE='...')
            p.next()
        elif p.is_op("("):  # AUTO_RANDOM(5), AUTO_RANDOM(5, 54), ...
            p.group()
        # anything else (VIRTUAL, STORED, VISIBLE, INVISIBLE, CLUSTERED, a string after ENGINE_ATTRIBUTE): skip


def _default_value(p: _P) -> Any:
    """The DEFAULT value: a string's value, a number's text, None for NULL, an expression's text."""
    tok = p.peek()
    if tok.is_op("("):
        return _render(p.group())
    if tok.kind == "op" and tok.text in "+-" and p.peek(1).kind == "num":
        p.i += 2
        return ("-" if tok.text == "-" else "") + p.t[p.i - 1].text
    tok = p.next()
    if tok.kind == "str":
        return _strings(p, tok)
    if tok.kind in ("num", "hex", "bit"):
        return tok.text
    if tok.kind == "id":
        up = tok.up
        if up == "NULL":
            return None
        if up in ("TRUE", "FALSE"):
            return "1" if up == "TRUE" else "0"
        nxt = p.peek()
        if (up.startswith("_") or up in ("N", "DATE", "TIME", "TIMESTAMP")) and nxt.kind == "str":
            return _strings(p, p.next())  # _utf8mb4'x', N'x', DATE '2020-01-01'
        if up.startswith("_") and nxt.kind in ("hex", "bit"):
            return p.next().text
        if nxt.is_op("("):  # NOW(), CURRENT_TIMESTAMP(3), current_timestamp()
            start = p.i - 1
            p.group()
            return _render(p.t[start : p.i])
        return tok.text  # CURRENT_TIMESTAMP, LOCALTIME, ...
    return tok.value


def _strings(p: _P, first: _Tok) -> str:
    """A string literal and any literals right after it ('a' 'b' is 'ab')."""
    parts = [first.value]
    while p.peek().kind == "str":
        parts.append(p.next().value)
    return "".join(parts)


def _key_parts(p: _P) -> tuple[list[str], bool, bool]:
    """(column names, whether expression parts were skipped, whether the first part is one)."""
    cols: list[str] = []
    had_expr = first_expr = False
    for k, part in enumerate(_split(p.group())):
        tok = part[0]
        simple = tok.kind in ("id", "qid", "str") and (
            len(part) == 1
            or (len(part) == 2 and part[1].up in ("ASC", "DESC"))
            or (
                len(part) in (4, 5)
                and part[1].is_op("(")
                and part[2].kind == "num"
                and part[3].is_op(")")
                and (len(part) == 4 or part[4].up in ("ASC", "DESC"))
            )
        )
        if simple:
            cols.append(tok.value)
        else:
            had_expr = True
            first_expr = first_expr or k == 0
    return cols, had_expr, first_expr


_INDEX_WORDS = ("CONSTRAINT", "PRIMARY", "UNIQUE", "INDEX", "KEY", "FULLTEXT", "SPATIAL", "FOREIGN", "CHECK")


def _is_index_item(p: _P) -> bool:
    tok = p.peek()
    if tok.kind != "id":
        return False
    if tok.up in _INDEX_WORDS:
        return True
    if tok.up in ("VECTOR", "COLUMNAR") and p.is_kw("INDEX", "KEY", k=1):
        return True
    return tok.up == "PERIOD" and p.is_kw("FOR", k=1)


def _index_def(p: _P) -> _IdxSpec | None:
    """A table-level key definition; None for those that are no index (FOREIGN KEY, CHECK, PERIOD FOR)."""
    cname = None
    if p.accept("CONSTRAINT"):
        if not p.is_kw("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
            cname = p.ident()
    if p.is_kw("FOREIGN", "CHECK", "PERIOD"):
        return None
    primary = unique = False
    if p.accept("PRIMARY"):
        p.expect("KEY")
        primary = True
    elif p.accept("UNIQUE"):
        p.accept("INDEX", "KEY")
        unique = True
    elif p.accept("FULLTEXT", "SPATIAL", "VECTOR", "COLUMNAR"):
        p.accept("INDEX", "KEY")
    elif not p.accept("INDEX", "KEY"):
        raise p.err(f"expected a key definition, found {p.peek().text!r}")
    if_not_exists = p.accept_seq("IF", "NOT", "EXISTS")
    name = None
    if not p.is_op("(") and not p.is_kw("USING", "TYPE"):
        name = p.ident()
    if p.accept("USING", "TYPE"):
        p.next()
    cols, had_expr, first_expr = _key_parts(p)
    # index options (USING, COMMENT, VISIBLE, CLUSTERED, KEY_BLOCK_SIZE, ...) say nothing we keep
    return _IdxSpec(
        name=None if primary else (name or cname),
        columns=cols,
        primary=primary,
        unique=unique or primary,
        had_expr=had_expr,
        first_expr=first_expr,
        if_not_exists=if_not_exists,
    )


def _table_options(p: _P) -> tuple[str | None, str | None]:
    """The charset and collation among table options (or ALTER TABLE options); the rest is skipped."""
    cs = coll = None
    depth = 0
    while not p.at_end():
        tok = p.next()
        if tok.kind == "op":
            depth += tok.text == "("
            depth -= tok.text == ")"
            continue
        if tok.up == "SELECT":
            raise p.err("CREATE TABLE ... SELECT is not supported")
        if depth:
            continue
        if tok.up == "PARTITION" and p.is_kw("BY"):
            break
        if tok.up == "CHARSET" or (tok.up in ("CHARACTER", "CHAR") and p.accept("SET")):
            p.accept_op("=")
            v = p.next()
            if v.up != "DEFAULT":
                cs = v.value.lower()
        elif tok.up == "COLLATE":
            p.accept_op("=")
            v = p.next()
            if v.up != "DEFAULT":
                coll = v.value.lower()
    return cs, coll


# ------------------------------------------------------------------------------------------------
# Working model: a table being built or altered
# ------------------------------------------------------------------------------------------------


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
        ordered = ([pk] if pk else []) + [i for i in self.idxs if not i.primary]
        indexes = [Index(i.name, [c.name for c in i.cols], i.primary, i.unique or i.primary) for i in ordered]
        return TableInfo(schema, table, columns, indexes, table_id=table_id, version=version)


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


# ------------------------------------------------------------------------------------------------
# CREATE TABLE
# ------------------------------------------------------------------------------------------------

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


def _statements(sql: str) -> list[list[_Tok]]:
    return _split(_tokenize(sql), ";")


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


# ------------------------------------------------------------------------------------------------
# The tracker
# ------------------------------------------------------------------------------------------------

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


class SchemaTracker:
    """Table definitions by (schema, table), kept current by `apply`-ing DDL statements.

    Names are kept as written and looked up case-insensitively (as TiDB does). TableInfo objects are
    never changed once stored or returned: each change stores a new one, with `version` one higher
    (a statement that leaves the definition as it was, such as TRUNCATE or a table comment, keeps it).
    """

    def __init__(self) -> None:
        self._tables: dict[Key, _Entry] = {}
        self._dbs: dict[str, tuple[str | None, str | None]] = {}

    # --- state ----------------------------------------------------------------------------------
    def get(self, schema: str, table: str) -> TableInfo | None:
        e = self._tables.get(_key(schema, table))
        return e.table if e else None

    def put(self, table: TableInfo) -> None:
        """Store a definition learned elsewhere (a bootstrap, a protocol that carries it)."""
        old = self._tables.get(_key(table.schema, table.table))
        self._tables[_key(table.schema, table.table)] = _Entry(
            table, *((old.charset, old.collate) if old else (None, None))
        )

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
        result = _NONE
        for toks in _statements(sql):
            stmt = _short(_render(toks))
            try:
                r = self._one(_P(toks, stmt), default_schema)
            except SchemaError as e:
                if isinstance(e, UnsupportedSyntax):
                    r = _NONE
                else:
                    raise
            if result == _NONE:
                result = r
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
        t = made.table
        k = _key(t.schema, t.table)
        old = self._tables.get(k)
        if old is not None and made.if_not_exists:
            return old.table, _copy(old.table)
        if made.like is not None:
            src = self._tables.get(made.like)
            if src is not None:
                made.charset, made.collate = src.charset, src.collate
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


def _alter_spec(w: _Work, p: _P, schema: str) -> Key | None:
    """One ALTER TABLE specification; returns the new name for RENAME [TO].

    `schema`: where an unqualified new name goes (MySQL: the current database).
    """
    if p.accept("ADD"):
        if p.accept("PARTITION"):
            return None
        if _is_index_item(p):
            spec = _index_def(p)
            if spec is not None:
                w.add_index(spec)
            return None
        p.accept("COLUMN")
        ine = p.accept_seq("IF", "NOT", "EXISTS")
        if p.is_op("("):
            for part in _split(p.group()):
                ip = _P(part, p.stmt)
                if _is_index_item(ip):
                    ispec = _index_def(ip)
                    if ispec is not None:
                        w.add_index(ispec)
                else:
                    w.add_column(_column_def(ip, ip.ident()), if_not_exists=ine)
            return None
        added = w.add_column(_column_def(p, p.ident()), if_not_exists=ine)
        if added is not None:
            w.place(added, p)
        return None
    if p.accept("DROP"):
        if p.accept_seq("PRIMARY", "KEY"):
            w.drop_index("PRIMARY")
        elif p.accept("INDEX", "KEY"):
            p.accept_seq("IF", "EXISTS")
            w.drop_index(p.ident())
        elif p.accept("CONSTRAINT"):
            p.accept_seq("IF", "EXISTS")
            name = p.ident()
            if name.lower() != "primary":
                w.drop_index(name)
        elif p.is_kw("FOREIGN", "CHECK", "PARTITION"):
            pass
        else:
            p.accept("COLUMN")
            if p.accept_seq("IF", "EXISTS"):
                col = w.find_orig(p.ident())
                if col is not None:
                    w.drop_column(col)
            else:
                w.drop_column(w.need(p.ident()))
        return None
    modify = p.accept("MODIFY")
    if modify or p.accept("CHANGE"):  # CHANGE [COLUMN] old new def; MODIFY [COLUMN] name def
        p.accept("COLUMN")
        if_exists = p.accept_seq("IF", "EXISTS")
        name = p.ident()
        col = w.find_orig(name)
        if col is None and if_exists:
            return None
        col = col or w.need(name)
        spec = _column_def(p, name if modify else p.ident())
        w.redefine(col, spec)
        w.place(col, p)
        return None
    if p.accept("RENAME"):
        if p.accept("COLUMN"):
            col = w.need(p.ident())
            p.expect("TO")
            col.name = p.ident()
        elif p.accept("INDEX", "KEY"):
            old = p.ident()
            p.expect("TO")
            new = p.ident()
            idx = w.find_index(old)
            if idx is not None and not idx.primary:
                if w.find_index(new) is not None and new.lower() != old.lower():
                    raise w.fail(f"duplicate key name {new!r}")
                idx.name = new
        else:
            p.accept("TO", "AS")
            return p.qname(schema)
        return None
    if p.accept("ALTER"):
        if p.is_kw("INDEX", "KEY", "CHECK", "CONSTRAINT"):
            return None
        p.accept("COLUMN")
        col = w.need(p.ident())
        if p.accept_seq("SET", "DEFAULT"):
            col.default = _default_value(p)
        elif p.accept_seq("DROP", "DEFAULT"):
            col.default = None
        return None
    if p.accept("CONVERT"):
        p.expect("TO")
        if not _accept_charset_kw(p):
            raise p.err("expected CHARACTER SET after CONVERT TO")
        tok = p.next()
        cs = w.charset if tok.up == "DEFAULT" else tok.value.lower()
        coll = None
        if p.accept("COLLATE"):
            coll = p.next().value.lower()
        if cs is None and coll is not None:
            cs = _charset_of_collation(coll)
        if cs is not None:
            w.convert(cs, coll)
        return None
    if p.is_kw("PARTITION", "REMOVE", "ORDER", "ALGORITHM", "LOCK", "FORCE"):
        return None
    # table options: only a new default charset/collation matters (for columns added later)
    cs, coll = _table_options(p)
    if cs is not None or coll is not None:
        if cs is None:
            cs = _charset_of_collation(coll)  # type: ignore[arg-type]
        w.charset, w.collate = cs, coll
    return None
