"""Column, key and table-option definitions as a statement writes them (`_ColSpec`, `_IdxSpec`).

Shared by CREATE TABLE and ALTER TABLE: each reader takes what it needs from the tokens and skips the
options that say nothing a `TableInfo` keeps (comments, storage, foreign keys, checks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..mysqltypes import Family
from .defaults import BitsLiteral
from .tokens import _P, _render, _split, _Tok


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
    if tok.kind in ("hex", "bit"):
        return BitsLiteral(tok.text)
    if tok.kind == "num":
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
            return BitsLiteral(p.next().text)
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
