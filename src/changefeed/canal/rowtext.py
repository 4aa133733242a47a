"""A row's JSON text rewritten as text, by one regular expression per table: the fastest tier of canal/lines.py.

For the column types whose values a pattern can check completely (integers in range, strings, datetimes and
decimals already at the column's fsp or scale, enum names, base64 blobs), a row object written in table order
is matched as a whole and the output object is joined from the matched pieces, without parsing it into Python
values and writing them out again. A pattern only lets through text that the full path would take unchanged
and that orjson writes exactly so (its escapes, no others); a table with another column type has no pattern,
and a row the pattern does not match takes the next tier. Pure functions, no I/O.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Callable
from typing import Any

import orjson

from .. import gojson
from ..model import Column, TableInfo
from ..mysqltypes import Family
from ..mysqltypes.text import _as_text
from ..rounding import decimal_held, rounds

# a JSON string's content exactly as orjson writes it: raw characters but `"`, `\` and controls, and its escapes
_ORJSON_CHARS = rb'[^"\\\x00-\x1f]*+(?:\\(?:["\\bfnrt]|u00(?:0[0-7bef]|1[0-9a-f]))[^"\\\x00-\x1f]*+)*+'
# any JSON string's content (escapes checked when read back by orjson)
_ANY_CHARS = r'[^"\\\x00-\x1f]*+(?:\\.[^"\\\x00-\x1f]*+)*+'
_YMD = "[0-9]{4}-(?:0[0-9]|1[0-2])-(?:[0-2][0-9]|3[01])"
_HMS = "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"


def escaped(b: bytes) -> bytes:
    """JSON text (as orjson writes it: no raw control characters) as it stands inside a JSON string, without
    the quotes: what orjson.dumps(text) writes, which escapes only `"`, `\\` and control characters."""
    return b.replace(b"\\", b"\\\\").replace(b'"', b'\\"')


class Mismatch(Exception):
    """A matched value the pattern could not check (an integer out of range): take the next tier."""


def _fail() -> None:
    raise Mismatch


def _int_digits(lo: int, hi: int) -> tuple[str, int]:
    """The pattern of an integer's JSON text (no leading zeros, no -0) and the length up to which any such
    text is in range (longer ones are compared)."""
    return ("(0|-?[1-9][0-9]{0,19})" if lo < 0 else "(0|[1-9][0-9]{0,19})"), len(str(hi)) - 1


# ------------------------------------------------------------------------------------------------
# Encode: an event line's row object -> canal-json's `data` object
# ------------------------------------------------------------------------------------------------


def _encode_column(i: int, c: Column, fmt: Callable[[Any], str], promoted: bool, env: dict[str, Any]
                   ) -> tuple[str, list[str]] | None:
    """The pattern of one column's value (one group) and the source lines setting x{i} (its text in `data`,
    JSON) and, for a promoted column, t{i} (its datum); None for a type without a pattern."""
    ctype, fam = c.type, c.type.family
    g = f"g{i}"
    quoted = [f"        x{i} = QT + {g} + QT"]
    text = quoted
    if fam is Family.INT and fmt is str:
        lo, hi = ctype.int_range()
        pattern, safe = _int_digits(lo, hi)
        src = [f"        if len({g}) > {safe} and not {lo} <= int({g}) <= {hi}:", "            FAIL()", *quoted]
        if promoted:
            src.append(f"        t{i} = int({g})")
        return pattern, src
    if promoted:
        return None
    if fam in (Family.STRING, Family.JSON, Family.VECTOR) and fmt is _as_text:
        return f'"({_ORJSON_CHARS.decode()})"', text
    if fam in (Family.DATETIME, Family.TIMESTAMP) and fmt is _as_text:
        fsp = ctype.fsp
        frac = (f"\\.[0-9]{{{fsp}}}" if fsp else "") if rounds(ctype, False) else "(?:\\.[0-9]{1,6})?"
        return f'"({_YMD} {_HMS}{frac})"', quoted
    if fam is Family.DECIMAL and fmt is _as_text:
        if not rounds(ctype, False):  # a bare `decimal`: the text as given, if it is a decimal number
            return '"(-?[0-9]+(?:\\.[0-9]+)?)"', quoted
        held = decimal_held(ctype).pattern  # the storer's own pattern, its positive values, in ASCII digits
        held = held.removeprefix("-?").removesuffix(r"\Z").replace(r"\d", "[0-9]")
        return f'"({held})"', quoted
    if fam is Family.ENUM and ctype.elements and fmt is str:
        names = {orjson.dumps(e)[1:-1]: b'"%d"' % n for n, e in enumerate(ctype.elements, 1) if e != ""}
        if not names:
            return None
        env[f"E{i}"] = names
        alts = "|".join(re.escape(n.decode()) for n in sorted(names, key=len, reverse=True))
        return f'"({alts})"', [f"        x{i} = E{i}[{g}]"]
    if fam is Family.BYTES and ctype.name not in ("binary", "varbinary") and fmt(b"\xff") == "\xff":
        env["A2B"], env["DUMPS"] = binascii.a2b_base64, orjson.dumps
        return (r'\{"\$b64":"([A-Za-z0-9+/]*={0,2})"\}',
                [f"        {g} = DUMPS(A2B({g}, strict_mode=True).decode('latin-1'))[1:-1]", *text])
    return None


def encode_row_pattern(table: TableInfo, fmts: list[Callable[[Any], str]], promoted: list[Callable | None]
                       ) -> tuple[re.Pattern[bytes], Callable[[re.Match[bytes]], tuple[bytes, tuple]]] | None:
    """For a table: the pattern of a full row object in table order, and a function from its match to the
    `data` object's JSON (as orjson writes it, before Go's escaping) and the key of its sqlType (the codes of
    the promoted columns, `promoted` giving each column's promoter or None). None: a column type without a
    pattern. The function raises Mismatch for a value the pattern could not check."""
    env: dict[str, Any] = {"FAIL": _fail, "QT": b'"'}
    gs = ", ".join(f"g{i}" for i in range(len(fmts)))
    parts, src, out, keys = [], ["def build(m):", f"    {gs}, = m.groups()"], [], []
    for i, (c, fmt, promote) in enumerate(zip(table.columns, fmts, promoted, strict=True)):
        got = _encode_column(i, c, fmt, promote is not None, env)
        if got is None:
            return None
        pattern, lines = got
        name = orjson.dumps(c.name).decode()
        parts.append(re.escape(name) + ":(?:null|" + pattern + ")")
        src += [f"    if g{i} is None:", f"        x{i} = b'null'"]
        if promote is not None:
            src[-1] += f"; t{i} = None"
            env[f"P{i}"] = promote
            keys.append(f"P{i}(t{i}),")
        src += ["    else:", *lines]
        out.append(f"{(',' if i else '{') + name}:".encode())
        env[f"K{i}"] = out[-1]
    joined = ", ".join(f"K{i}, x{i}" for i in range(len(fmts)))
    src.append(f"    return b''.join(({joined}, b'}}')), ({' '.join(keys)})")
    exec(compile("\n".join(src), f"<canal-json row text {table.qualified}>", "exec"), env)
    return re.compile(("\\{" + ",".join(parts) + "\\}").encode()), env["build"]


# ------------------------------------------------------------------------------------------------
# Decode: a canal-json message's `data` object -> an event line's row object
# ------------------------------------------------------------------------------------------------


def _decode_column(i: int, c: Column, parse: Callable[[str], Any], env: dict[str, Any]
                   ) -> tuple[str, list[str]] | None:
    """The pattern of one canal-json value (one group; text as Go writes it) and the source lines setting
    x{i}, its JSON in an event line (as orjson writes it); None for a type without a pattern."""
    ctype, fam = c.type, c.type.family
    g = f"g{i}"
    quoted = [f"        x{i} = '\"' + {g} + '\"'"]
    env["LOADS"], env["DUMPS"] = orjson.loads, orjson.dumps
    text = [f"        s = {g} if '\\\\' not in {g} else LOADS('\"' + {g} + '\"')"]
    if fam is Family.INT:
        lo, hi = ctype.int_range()
        pattern, safe = _int_digits(lo, hi)
        return f'"{pattern}"', [f"        if len({g}) > {safe} and not {lo} <= int({g}) <= {hi}:", "            FAIL()",
                                f"        x{i} = {g}"]
    if fam is Family.ENUM:
        names = ("",) + ctype.elements
        env[f"N{i}"] = {str(n): orjson.dumps(e).decode() for n, e in enumerate(names)} if ctype.elements else {}
        return '"(0|[1-9][0-9]{0,18})"', [f"        x{i} = N{i}.get({g}, {g})"]
    if fam in (Family.STRING, Family.JSON, Family.VECTOR) and parse is _as_text:
        return f'"({_ANY_CHARS})"', [f"        x{i} = '\"' + {g} + '\"' if '\\\\' not in {g} else "
                                     f"DUMPS(LOADS('\"' + {g} + '\"')).decode()"]
    if fam is Family.BYTES:
        env["B2A"] = binascii.b2a_base64
        return f'"({_ANY_CHARS})"', [*text, f"        x{i} = '{{\"$b64\":\"' + "
                                     f"B2A(s.encode('latin-1'), newline=False).decode() + '\"}}'"]
    if fam is Family.DECIMAL:
        return '"(-?[0-9]+(?:\\.[0-9]+)?)"', quoted
    if fam in (Family.DATETIME, Family.TIMESTAMP):
        return f'"({_YMD} {_HMS}(?:\\.[0-9]{{1,6}})?)"', quoted
    return None


def decode_row_pattern(table: TableInfo, names: list[str], parsers: dict[str, Callable[[str], Any]], first: int
                       ) -> tuple[str, Callable[[tuple], str]] | None:
    """For a table shape: the pattern of a canal-json row object with its columns in `names` order (as the
    messages have them, a group each), and a function from all the groups of a match (the row's from index
    `first`) to the event line's row object as orjson writes it; None: a column type without a pattern. The
    function raises Mismatch (or a ValueError) for a value the pattern could not check."""
    env: dict[str, Any] = {"FAIL": _fail}
    gs = ", ".join(f"g{i}" for i in range(len(names)))
    parts, src = [], ["def build(groups):", f"    {gs}, = groups[{first}:{first + len(names)}]"]
    for i, name in enumerate(names):
        c = table.by_name[name]
        got = _decode_column(i, c, parsers[name], env)
        if got is None:
            return None
        pattern, lines = got
        parts.append(re.escape(gojson.dumps(name).decode()) + ":(?:null|" + pattern + ")")
        src += [f"    if g{i} is None:", f"        x{i} = 'null'", "    else:", *lines]
        env[f"K{i}"] = ("," if i else "{") + orjson.dumps(name).decode() + ":"
    joined = ", ".join(f"K{i}, x{i}" for i in range(len(names)))
    src.append(f"    return ''.join(({joined}, '}}'))")
    exec(compile("\n".join(src), f"<canal-json event row {table.qualified}>", "exec"), env)
    return "\\{" + ",".join(parts) + "\\}", env["build"]
