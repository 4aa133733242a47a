"""The words of MySQL type text: type-name aliases, argument lists and quoted SQL string literals.

Lexical help for `types._parse_cached`; `unquote_sql_string` is shared with `sqlschema`.
"""

from __future__ import annotations

import re

from ..errors import TypeParseError

_TO_BINARY = {
    "char": "binary",
    "varchar": "varbinary",
    "tinytext": "tinyblob",
    "text": "blob",
    "mediumtext": "mediumblob",
    "longtext": "longblob",
}

_ALIASES = {
    "integer": "int",
    "int1": "tinyint",
    "int2": "smallint",
    "int3": "mediumint",
    "middleint": "mediumint",
    "int4": "int",
    "int8": "bigint",
    "real": "double",
    "double precision": "double",
    "float4": "float",
    "float8": "double",
    "numeric": "decimal",
    "dec": "decimal",
    "fixed": "decimal",
    "character": "char",
    "nchar": "char",
    "national char": "char",
    "national character": "char",
    "nvarchar": "varchar",
    "varcharacter": "varchar",
    "character varying": "varchar",
    "char varying": "varchar",
    "national varchar": "varchar",
    "national character varying": "varchar",
    "long varbinary": "mediumblob",
    "long varchar": "mediumtext",
    "long": "mediumtext",
    # MySQL's spatial types: TiDB has none; kept as geometry (bytes) so MySQL sources can be read
    "point": "geometry",
    "linestring": "geometry",
    "polygon": "geometry",
    "multipoint": "geometry",
    "multilinestring": "geometry",
    "multipolygon": "geometry",
    "geometrycollection": "geometry",
    "geomcollection": "geometry",
    "var_string": "varchar",
}


_NAME_RE = re.compile(
    r"\s*((?:national\s+character\s+varying|national\s+character|national\s+char|national\s+varchar|"
    r"character\s+varying|char\s+varying|double\s+precision|long\s+varbinary|long\s+varchar|[a-z_][a-z0-9_]*))",
    re.IGNORECASE,
)
_WORD_RE = re.compile(r"\s*(?:[`'\"]([A-Za-z0-9_]+)[`'\"]|([A-Za-z0-9_]+|=))")


def _split_args(text: str, pos: int) -> tuple[list[str], int]:
    """Arguments inside `( ... )` starting at text[pos] == '('; quoted strings kept with their quotes."""
    args: list[str] = []
    cur: list[str] = []
    i = pos + 1
    n = len(text)
    while i < n:
        c = text[i]
        if c in "'\"":
            q = c
            j = i + 1
            while j < n:
                if text[j] == "\\":
                    j += 2
                    continue
                if text[j] == q:
                    if j + 1 < n and text[j + 1] == q:
                        j += 2
                        continue
                    break
                j += 1
            if j >= n:
                raise TypeParseError(f"unterminated quoted string in {text!r} at offset {i}")
            cur.append(text[i : j + 1])
            i = j + 1
            continue
        if c == ",":
            args.append("".join(cur).strip())
            cur = []
        elif c == ")":
            args.append("".join(cur).strip())
            return args, i + 1
        else:
            cur.append(c)
        i += 1
    raise TypeParseError(f"missing ')' in column type {text!r}")


# MySQL's backslash escapes in string literals; \% and \_ keep their backslash (LIKE patterns)
_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "%": "\\%", "_": "\\_"}


def unquote_sql_string(lit: str) -> str:
    """A quoted MySQL string literal's value: backslash escapes as MySQL reads them, doubled quotes."""
    q = lit[0]
    body = lit[1:-1]
    if "\\" not in body and q + q not in body:
        return body
    out: list[str] = []
    i = 0
    n = len(body)
    while i < n:
        c = body[i]
        if c == "\\" and i + 1 < n:
            nxt = body[i + 1]
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
        elif c == q and i + 1 < n and body[i + 1] == q:
            out.append(q)
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _unquote(lit: str, text: str) -> str:
    if len(lit) < 2 or lit[0] not in "'\"" or lit[-1] != lit[0]:
        raise TypeParseError(f"expected a quoted string, got {lit!r} in column type {text!r}")
    return unquote_sql_string(lit)


def _int_arg(text: str, arg: str) -> int:
    try:
        return int(arg)
    except ValueError:
        raise TypeParseError(f"bad length {arg!r} in column type {text!r}") from None
