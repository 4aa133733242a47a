"""The MySQL/TiDB column type system.

Every protocol renders values differently, but all of them start from TiDB's view of a column:
its type code, flags (unsigned, zerofill, binary), display length and decimal, charset and
enum/set elements. `ColumnType.parse` turns the type text of a CREATE TABLE (or the short
type names canal-json writes) into that view; the value helpers turn event-line values into
the datum forms TiCDC's encoders receive (REFERENCE-NOTES §0) and back.
"""

from __future__ import annotations

import base64
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Context, Decimal, InvalidOperation
from enum import StrEnum
from functools import lru_cache
from typing import Any

import orjson

from ..errors import TypeParseError, ValueError_

# TiDB's mysql.TypeXxx codes (parser/mysql/type.go); other protocols and the binlog reader use them.
TYPE_TINY = 1
TYPE_SHORT = 2
TYPE_LONG = 3
TYPE_FLOAT = 4
TYPE_DOUBLE = 5
TYPE_NULL = 6
TYPE_TIMESTAMP = 7
TYPE_LONGLONG = 8
TYPE_INT24 = 9
TYPE_DATE = 10
TYPE_DURATION = 11
TYPE_DATETIME = 12
TYPE_YEAR = 13
TYPE_VARCHAR = 15
TYPE_BIT = 16
TYPE_VECTOR = 0xE1
TYPE_JSON = 0xF5
TYPE_NEWDECIMAL = 0xF6
TYPE_ENUM = 0xF7
TYPE_SET = 0xF8
TYPE_TINY_BLOB = 0xF9
TYPE_MEDIUM_BLOB = 0xFA
TYPE_LONG_BLOB = 0xFB
TYPE_BLOB = 0xFC
TYPE_VAR_STRING = 0xFD
TYPE_STRING = 0xFE
TYPE_GEOMETRY = 0xFF

UNSPECIFIED = -1


class Family(StrEnum):
    """How a column's values are held: the datum kinds of REFERENCE-NOTES §0."""

    INT = "int"
    FLOAT = "float"
    DECIMAL = "decimal"
    DATE = "date"
    DATETIME = "datetime"
    TIMESTAMP = "timestamp"
    TIME = "time"
    YEAR = "year"
    STRING = "string"
    BYTES = "bytes"
    ENUM = "enum"
    SET = "set"
    BIT = "bit"
    JSON = "json"
    VECTOR = "vector"


@dataclass(frozen=True, slots=True)
class _Base:
    tp: int
    family: Family
    default_flen: int
    default_decimal: int = 0


# Canonical (TiDB TypeToStr) names. Binary-charset variants of the string types are separate names,
# as TiDB prints them: char->binary, varchar->varbinary, text->blob.
_BASES: dict[str, _Base] = {
    "tinyint": _Base(TYPE_TINY, Family.INT, 4),
    "smallint": _Base(TYPE_SHORT, Family.INT, 6),
    "mediumint": _Base(TYPE_INT24, Family.INT, 9),
    "int": _Base(TYPE_LONG, Family.INT, 11),
    "bigint": _Base(TYPE_LONGLONG, Family.INT, 20),
    "float": _Base(TYPE_FLOAT, Family.FLOAT, 12, UNSPECIFIED),
    "double": _Base(TYPE_DOUBLE, Family.FLOAT, 22, UNSPECIFIED),
    "decimal": _Base(TYPE_NEWDECIMAL, Family.DECIMAL, 10, 0),
    "date": _Base(TYPE_DATE, Family.DATE, 10),
    "datetime": _Base(TYPE_DATETIME, Family.DATETIME, 19),
    "timestamp": _Base(TYPE_TIMESTAMP, Family.TIMESTAMP, 19),
    "time": _Base(TYPE_DURATION, Family.TIME, 10),
    "year": _Base(TYPE_YEAR, Family.YEAR, 4),
    "char": _Base(TYPE_STRING, Family.STRING, 1),
    "varchar": _Base(TYPE_VARCHAR, Family.STRING, 5),
    "tinytext": _Base(TYPE_TINY_BLOB, Family.STRING, 255),
    "text": _Base(TYPE_BLOB, Family.STRING, 65535),
    "mediumtext": _Base(TYPE_MEDIUM_BLOB, Family.STRING, 16777215),
    "longtext": _Base(TYPE_LONG_BLOB, Family.STRING, 4294967295),
    "binary": _Base(TYPE_STRING, Family.BYTES, 1),
    "varbinary": _Base(TYPE_VARCHAR, Family.BYTES, 5),
    "tinyblob": _Base(TYPE_TINY_BLOB, Family.BYTES, 255),
    "blob": _Base(TYPE_BLOB, Family.BYTES, 65535),
    "mediumblob": _Base(TYPE_MEDIUM_BLOB, Family.BYTES, 16777215),
    "longblob": _Base(TYPE_LONG_BLOB, Family.BYTES, 4294967295),
    "enum": _Base(TYPE_ENUM, Family.ENUM, UNSPECIFIED),
    "set": _Base(TYPE_SET, Family.SET, UNSPECIFIED),
    "bit": _Base(TYPE_BIT, Family.BIT, 1),
    "json": _Base(TYPE_JSON, Family.JSON, 4294967295),
    "vector": _Base(TYPE_VECTOR, Family.VECTOR, UNSPECIFIED),
    "geometry": _Base(TYPE_GEOMETRY, Family.BYTES, UNSPECIFIED),
}

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

INT_RANGES: dict[tuple[str, bool], tuple[int, int]] = {
    ("tinyint", False): (-(1 << 7), (1 << 7) - 1),
    ("tinyint", True): (0, (1 << 8) - 1),
    ("smallint", False): (-(1 << 15), (1 << 15) - 1),
    ("smallint", True): (0, (1 << 16) - 1),
    ("mediumint", False): (-(1 << 23), (1 << 23) - 1),
    ("mediumint", True): (0, (1 << 24) - 1),
    ("int", False): (-(1 << 31), (1 << 31) - 1),
    ("int", True): (0, (1 << 32) - 1),
    ("bigint", False): (-(1 << 63), (1 << 63) - 1),
    ("bigint", True): (0, (1 << 64) - 1),
}


@dataclass(frozen=True, slots=True)
class ColumnType:
    """One column's type as TiDB's FieldType holds it."""

    name: str  # canonical TiDB TypeToStr name: int, varbinary, blob, enum, ...
    flen: int = UNSPECIFIED  # display length as declared (UNSPECIFIED when not)
    decimal: int = UNSPECIFIED  # scale for decimal/float, fsp for time types
    unsigned: bool = False
    zerofill: bool = False
    elements: tuple[str, ...] = ()
    charset: str | None = None
    collate: str | None = None
    is_bool: bool = False
    _base: _Base = field(default=None, repr=False, compare=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_base", _BASES[self.name])

    # --- derived facts -------------------------------------------------------------------------
    @property
    def tp(self) -> int:
        return self._base.tp

    @property
    def family(self) -> Family:
        return self._base.family

    @property
    def is_binary(self) -> bool:
        """MySQL's binary flag for string-like columns (charset `binary`)."""
        return self._base.family is Family.BYTES

    @property
    def display_length(self) -> int:
        """Declared length, or TiDB's default (unsigned integers one shorter, as TiDB sets them)."""
        if self.flen != UNSPECIFIED:
            return self.flen
        flen = self._base.default_flen
        if flen != UNSPECIFIED and self.unsigned and self.family is Family.INT and self.name != "bigint":
            flen -= 1
        return flen

    @property
    def scale(self) -> int:
        """Declared decimal/fsp, or TiDB's default."""
        return self.decimal if self.decimal != UNSPECIFIED else self._base.default_decimal

    @property
    def fsp(self) -> int:
        return max(self.scale, 0) if self.family in _FSP_FAMILIES else 0

    @property
    def effective_charset(self) -> str:
        if self.family is Family.STRING or self.family in (Family.ENUM, Family.SET):
            return self.charset or "utf8mb4"
        if self.family is Family.JSON:
            return "binary"
        return "binary"

    @property
    def effective_collate(self) -> str:
        if self.family is Family.STRING or self.family in (Family.ENUM, Family.SET):
            if self.collate:
                return self.collate
            cs = self.effective_charset
            return _DEFAULT_COLLATION.get(cs, f"{cs}_bin")
        return "binary"

    def int_range(self) -> tuple[int, int]:
        return INT_RANGES[(self.name, self.unsigned)]

    # --- text forms ----------------------------------------------------------------------------
    def short_str(self) -> str:
        """TiDB's TypeToStr plus unsigned/zerofill: canal-json's default `mysqlType`."""
        s = self.name
        if self.unsigned and self.name not in ("bit", "year"):
            s += " unsigned"
        if self.zerofill and self.name != "year":
            s += " zerofill"
        return s

    def compact_str(self) -> str:
        """TiDB's FieldType.CompactStr: the type with its parameters, defaults filled in."""
        name = self.name
        flen = self.display_length
        dec = self.decimal
        if name in ("enum", "set"):
            return name + "(" + ",".join("'" + _quote_element(e) + "'" for e in self.elements) + ")"
        if name in ("timestamp", "datetime", "time"):
            return f"{name}({dec})" if dec not in (UNSPECIFIED, 0) else name
        if name in ("float", "double"):
            return f"{name}({flen},{dec})" if dec not in (UNSPECIFIED, 0) else name
        if name == "decimal":
            return f"decimal({flen},{self.scale})"
        if name in ("bit", "tinyint", "smallint", "mediumint", "int", "bigint", "char", "varchar", "binary",
                    "varbinary"):
            return f"{name}({flen})"
        if name == "year":
            return f"year({flen})"
        return name

    def full_str(self) -> str:
        """TiDB's ColumnInfo.GetTypeDesc: canal-json's `mysqlType` under content-compatible."""
        s = self.compact_str()
        if self.unsigned and self.name not in ("bit", "year"):
            s += " unsigned"
        if self.zerofill and self.name != "year":
            s += " zerofill"
        return s

    # --- parsing -------------------------------------------------------------------------------
    @staticmethod
    def parse(text: str, charset: str | None = None, collate: str | None = None) -> ColumnType:
        return _parse_cached(text, charset, collate)


_FSP_FAMILIES = (Family.DATETIME, Family.TIMESTAMP, Family.TIME)
_DEFAULT_COLLATION = {
    "utf8mb4": "utf8mb4_bin",
    "utf8": "utf8_bin",
    "latin1": "latin1_bin",
    "ascii": "ascii_bin",
    "binary": "binary",
    "gbk": "gbk_bin",
}


# TiDB's format.OutputFormat, which CompactStr applies to enum/set elements: a backslash is NOT doubled
_ELEMENT_ESCAPES = str.maketrans({"\0": "\\0", "'": "''", "\n": "\\n", "\r": "\\r"})


def _quote_element(e: str) -> str:
    return e.translate(_ELEMENT_ESCAPES)


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


@lru_cache(maxsize=4096)
def _parse_cached(text: str, charset: str | None, collate: str | None) -> ColumnType:
    m = _NAME_RE.match(text)
    if not m:
        raise TypeParseError(f"cannot parse column type {text!r}")
    raw_name = re.sub(r"\s+", " ", m.group(1).lower())
    pos = m.end()
    while pos < len(text) and text[pos].isspace():
        pos += 1
    args: list[str] = []
    if pos < len(text) and text[pos] == "(":
        args, pos = _split_args(text, pos)
    name = _ALIASES.get(raw_name, raw_name)
    is_bool = False
    flen = UNSPECIFIED
    dec = UNSPECIFIED
    elements: tuple[str, ...] = ()
    if name in ("bool", "boolean"):
        name, flen, is_bool = "tinyint", 1, True
    elif name == "serial":
        name = "bigint"
    if name not in _BASES:
        raise TypeParseError(f"unknown column type {raw_name!r} in {text!r}")
    if name in ("enum", "set"):
        # bare `enum`/`set` (canal-json's short mysqlType) leaves the elements unknown
        elements = tuple(_unquote(a, text) for a in args if a != "")
    elif name == "vector":
        pass
    elif args:
        if len(args) > 2:
            raise TypeParseError(f"too many parameters in column type {text!r}")
        if name in _FSP_NAMES:
            dec = _int_arg(text, args[0])
            if not 0 <= dec <= 6 or len(args) > 1:
                raise TypeParseError(f"fractional seconds precision must be 0..6 in {text!r}")
        else:
            flen = _int_arg(text, args[0])
            if len(args) == 2:
                dec = _int_arg(text, args[1])
    if name == "float" and flen != UNSPECIFIED and dec == UNSPECIFIED:
        # float(p): p > 24 means double, and p is a precision, not a display length
        if flen > 53:
            raise TypeParseError(f"float precision {flen} out of range in {text!r}")
        name = "double" if flen > 24 else "float"
        flen = UNSPECIFIED
    if name == "decimal":
        if flen != UNSPECIFIED and not 1 <= flen <= 65:
            raise TypeParseError(f"decimal precision {flen} out of range 1..65 in {text!r}")
        if dec != UNSPECIFIED and (dec > 30 or (flen != UNSPECIFIED and dec > flen)):
            raise TypeParseError(f"decimal scale {dec} out of range in {text!r}")
    if name == "bit" and flen != UNSPECIFIED and not 1 <= flen <= 64:
        raise TypeParseError(f"bit length {flen} out of range 1..64 in {text!r}")

    unsigned = zerofill = binary_attr = False
    cs, coll = charset, collate
    rest = text[pos:]
    words = [(q or w).lower() for q, w in _WORD_RE.findall(rest)]
    leftover = _WORD_RE.sub("", rest).strip()
    if leftover:
        raise TypeParseError(f"unexpected {leftover!r} in column type {text!r}")
    i = 0
    while i < len(words):
        w = words[i]
        if w == "unsigned":
            unsigned = True
        elif w == "signed":
            pass
        elif w == "zerofill":
            zerofill = unsigned = True
        elif w == "binary":
            binary_attr = True
        elif w == "ascii":
            cs = cs or "latin1"
        elif w == "unicode":
            cs = cs or "ucs2"
        elif w in ("character", "char", "charset"):
            if w != "charset":
                i += 1
                if i >= len(words) or words[i] != "set":
                    raise TypeParseError(f"expected SET after {w.upper()} in {text!r}")
            i += 1
            if i < len(words) and words[i] == "=":
                i += 1
            if i >= len(words):
                raise TypeParseError(f"missing charset name in {text!r}")
            cs = charset or words[i]
        elif w == "collate":
            i += 1
            if i < len(words) and words[i] == "=":
                i += 1
            if i >= len(words):
                raise TypeParseError(f"missing collation name in {text!r}")
            coll = collate or words[i]
        else:
            raise TypeParseError(f"unexpected attribute {w!r} in column type {text!r}")
        i += 1
    if raw_name == "serial":
        unsigned = True
    base = _BASES[name]
    if unsigned and base.family not in (Family.INT, Family.FLOAT, Family.DECIMAL):
        if name not in ("bit", "year"):
            raise TypeParseError(f"UNSIGNED does not apply to {name} in {text!r}")
        unsigned = False
        zerofill = False if name == "bit" else zerofill
    if base.family is Family.STRING:
        if cs and cs.lower() == "binary":
            name = _TO_BINARY[name]
        elif binary_attr and not coll:
            coll = f"{(cs or 'utf8mb4').lower()}_bin"
    elif base.family is Family.BYTES:
        cs, coll = "binary", "binary"
    elif base.family in (Family.ENUM, Family.SET):
        if binary_attr and not coll:
            coll = f"{(cs or 'utf8mb4').lower()}_bin"
    else:
        cs, coll = None, None
    if name in ("text", "blob") and flen != UNSPECIFIED:
        # TEXT(M) / BLOB(M): TiDB picks the smallest type that holds M characters (ddl adjustBlobTypesFlen)
        maxlen = _CHARSET_MAXLEN.get("binary" if name == "blob" else (cs or "utf8mb4").lower())
        if maxlen is not None:
            size = flen * maxlen
            name = ("tiny" if size <= 255 else "" if size <= 65535 else "medium" if size <= 16777215 else "long") + name
            flen = UNSPECIFIED
    if name in ("year",) and flen == UNSPECIFIED:
        flen = 4
    return ColumnType(
        name=name,
        flen=flen,
        decimal=dec,
        unsigned=unsigned,
        zerofill=zerofill,
        elements=elements,
        charset=cs.lower() if cs else (coll.split("_", 1)[0].lower() if coll and coll != "binary" else None),
        collate=coll.lower() if coll else None,
        is_bool=is_bool,
    )


_FSP_NAMES = ("datetime", "timestamp", "time")
_CHARSET_MAXLEN = {"binary": 1, "latin1": 1, "ascii": 1, "gbk": 2, "utf8": 3, "utf8mb3": 3, "utf8mb4": 4, "gb18030": 4}


# =============================================================================================
# Values
# =============================================================================================


def go_format_float64(v: float) -> str:
    """Go's strconv.FormatFloat(v, 'f', -1, 64): shortest round-trip digits, never an exponent."""
    r = repr(v)
    if "e" in r:
        return format(Decimal(r), "f")
    if r[-2:] == ".0":
        return r[:-2]
    if r in ("nan", "inf", "-inf"):
        return "0"
    return r


_F32 = struct.Struct("<f")


def to_float32(v: float) -> float:
    """The float32 nearest to v, as a Python float."""
    try:
        return _F32.unpack(_F32.pack(v))[0]
    except OverflowError:
        raise ValueError_(f"{v!r} is out of range for FLOAT") from None


def shortest_float32(v: float) -> str:
    """Shortest decimal text that reads back as the same float32 (Go's FormatFloat(.., 32))."""
    if v == 0:  # not through the cache: 0.0 and -0.0 are the same lru_cache key
        return "-0" if str(v).startswith("-") else "0"
    return _shortest_float32(v)


_F32_BITS = struct.Struct("<I")
_EXACT = Context(prec=200)  # more digits than any float32 or midpoint has: Decimal arithmetic is exact


@lru_cache(maxsize=65536)
def _shortest_float32(v: float) -> str:
    f = to_float32(v)
    if f != f or f in (float("inf"), float("-inf")):
        return "0"
    if f == 0:
        return "-0" if str(f).startswith("-") else "0"
    # The decimals that read back as f lie between the midpoints to f's neighbours (ends included when
    # f's mantissa is even); checked exactly, as reading a decimal through float64 first rounds twice
    # (7.038531e-26). Go prints the shortest of them, and of two the one nearer f.
    bits = _F32_BITS.unpack(_F32.pack(abs(f)))[0]
    d = Decimal(abs(f))
    below = Decimal(_F32.unpack(_F32_BITS.pack(bits - 1))[0])
    if bits + 1 < 0x7F800000:
        above = Decimal(_F32.unpack(_F32_BITS.pack(bits + 1))[0])
    else:  # FLT_MAX: rounding treats the next step up as if the exponent went on
        above = _EXACT.subtract(_EXACT.multiply(d, 2), below)
    lo = _EXACT.divide(_EXACT.add(d, below), 2)
    hi = _EXACT.divide(_EXACT.add(d, above), 2)
    closed = bits & 1 == 0
    for p in range(1, 10):
        step = Decimal(1).scaleb(d.adjusted() - p + 1)
        near = d.quantize(step, rounding=ROUND_HALF_EVEN, context=_EXACT)
        other = _EXACT.add(near, step) if near < d else _EXACT.subtract(near, step)
        for c in (near, other):
            if lo < c < hi or closed and (c == lo or c == hi):
                text = format(_EXACT.normalize(c), "f")
                return "-" + text if f < 0 else text
    raise AssertionError(f"no 9-digit decimal reads back as float32 {f!r}")


def go_format_float32(v: float) -> str:
    return shortest_float32(v)


def canonical_float32(v: float) -> float:
    """A float32 column's value kept as the float64 of its shortest text (3.14, not 3.140000104904175)."""
    return float(shortest_float32(v))


# ranges are in the patterns, so a match needs no further checks (this is on the decode hot path)
_YMD = r"\d{4}-(?:0\d|1[0-2])-(?:[0-2]\d|3[01])"
_DATE_RE = re.compile(_YMD + r"\Z")
_DATETIME_RE = re.compile(_YMD + r"[ T](?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,6})?\Z")
_TIME_RE = re.compile(r"-?(?:[0-7]?\d?\d|8[0-2]\d|83[0-8]):[0-5]\d:[0-5]\d(?:\.\d{1,6})?\Z")
_DECIMAL_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)$")


def _bad(ctype: ColumnType, value: Any, why: str) -> ValueError_:
    return ValueError_(f"{value!r} is not a valid {ctype.full_str()} value: {why}")


def _as_int(ctype: ColumnType, v: Any) -> int:
    if type(v) is int:
        return v
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, dict) and "$int" in v:
        v = v["$int"]
    if isinstance(v, str):
        try:
            return int(v.strip())
        except ValueError:
            raise _bad(ctype, v, "not an integer") from None
    if isinstance(v, float) and v.is_integer():
        return int(v)
    raise _bad(ctype, v, "not an integer")


def _b64(v: Any) -> bytes | None:
    if isinstance(v, dict) and "$b64" in v:
        try:
            return base64.b64decode(v["$b64"], validate=True)
        except (ValueError, TypeError):
            raise ValueError_(f"invalid base64 in {v!r}") from None
    return None


def make_normalizer(ctype: ColumnType) -> Callable[[Any], Any]:
    """A function from an event-line JSON value to the column's datum (ints, floats, str, bytes).

    None passes through. Raises ValueError_ with a readable reason.
    """
    fam = ctype.family
    if fam is Family.INT:
        lo, hi = ctype.int_range()

        def norm_int(v: Any) -> Any:
            if v is None:
                return None
            i = v if type(v) is int else _as_int(ctype, v)
            if i < lo or i > hi:
                raise _bad(ctype, v, f"out of range {lo}..{hi}")
            return i

        return norm_int
    if fam is Family.FLOAT:
        single = ctype.name == "float"

        def norm_float(v: Any) -> Any:
            if v is None:
                return None
            if isinstance(v, bool) or not isinstance(v, int | float | str):
                raise _bad(ctype, v, "not a number")
            try:
                f = float(v)
            except ValueError:
                raise _bad(ctype, v, "not a number") from None
            except OverflowError:  # an int beyond any double
                raise _bad(ctype, v, "out of range") from None
            if f != f or f in (float("inf"), float("-inf")):
                f = 0.0  # TiCDC's mounter replaces NaN/Inf by 0
            return canonical_float32(f) if single else f

        return norm_float
    if fam is Family.DECIMAL:

        def norm_decimal(v: Any) -> Any:
            if v is None:
                return None
            if type(v) is int:
                return str(v)
            if isinstance(v, float):
                return go_format_float64(v)
            if isinstance(v, str) and _DECIMAL_RE.match(v):
                return v
            raise _bad(ctype, v, "decimal values are strings of digits")

        return norm_decimal
    if fam is Family.DATE:

        def norm_date(v: Any) -> Any:
            if v is None:
                return None
            if type(v) is not str or not _DATE_RE.match(v):
                raise _bad(ctype, v, "expected YYYY-MM-DD")
            return v

        return norm_date
    if fam in (Family.DATETIME, Family.TIMESTAMP):

        def norm_datetime(v: Any) -> Any:
            if v is None:
                return None
            if type(v) is not str or not _DATETIME_RE.match(v):
                raise _bad(ctype, v, "expected YYYY-MM-DD HH:MM:SS[.ffffff]")
            return v if v[10] == " " else v[:10] + " " + v[11:]

        return norm_datetime
    if fam is Family.TIME:

        def norm_time(v: Any) -> Any:
            if v is None:
                return None
            if type(v) is not str or not _TIME_RE.match(v):
                raise _bad(ctype, v, "expected [-]HH:MM:SS[.ffffff] within ±838:59:59")
            return v

        return norm_time
    if fam is Family.YEAR:

        def norm_year(v: Any) -> Any:
            if v is None:
                return None
            y = _as_int(ctype, v)
            if y != 0 and not 1901 <= y <= 2155:
                raise _bad(ctype, v, "YEAR is 0 or 1901..2155")
            return y

        return norm_year
    if fam is Family.STRING or fam is Family.JSON or fam is Family.VECTOR:

        def norm_str(v: Any) -> Any:
            if v is None or type(v) is str:
                return v
            raw = _b64(v)
            if raw is not None:
                try:
                    return raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise _bad(ctype, v, "not UTF-8 text") from None
            if fam is Family.JSON and isinstance(v, dict | list | int | float | bool):
                return tidb_json_text(v)
            raise _bad(ctype, v, "expected a string")

        return norm_str
    if fam is Family.BYTES:
        # binary(N) is stored right-padded with 0x00; a declared length is also a limit. A bare `binary`
        # (canal-json's short mysqlType) says nothing about the length.
        declared = ctype.flen if ctype.name in ("binary", "varbinary") else UNSPECIFIED
        pad = declared if ctype.name == "binary" and declared != UNSPECIFIED else 0

        def norm_bytes(v: Any) -> Any:
            if v is None:
                return None
            raw = _b64(v)
            if raw is None:
                if isinstance(v, str):
                    raw = v.encode("utf-8")
                elif isinstance(v, bytes | bytearray):
                    raw = bytes(v)
                else:
                    raise _bad(ctype, v, 'binary values are {"$b64": ...}')
            if declared != UNSPECIFIED and len(raw) > declared:
                raise _bad(ctype, v, f"{len(raw)} bytes, longer than {declared}")
            if pad and len(raw) < pad:
                raw = raw + b"\0" * (pad - len(raw))
            return raw

        return norm_bytes
    if fam is Family.ENUM:
        index = {e: i + 1 for i, e in enumerate(ctype.elements)}
        folded = {e.casefold(): i + 1 for i, e in enumerate(ctype.elements)}
        n = len(ctype.elements)

        def norm_enum(v: Any) -> Any:
            if v is None:
                return None
            if isinstance(v, str):
                if v == "":
                    return 0
                i = index.get(v) or folded.get(v.casefold())
                if i is None:
                    if not n and v.isdigit():
                        return int(v)
                    raise _bad(ctype, v, f"not one of {list(ctype.elements)}")
                return i
            i = _as_int(ctype, v)
            if i < 0 or (n and i > n):
                raise _bad(ctype, v, "enum index out of range")
            return i

        return norm_enum
    if fam is Family.SET:
        bits = {e: 1 << i for i, e in enumerate(ctype.elements)}
        folded_bits = {e.casefold(): 1 << i for i, e in enumerate(ctype.elements)}
        limit = (1 << len(ctype.elements)) - 1 if ctype.elements else (1 << 64) - 1

        def norm_set(v: Any) -> Any:
            if v is None:
                return None
            if isinstance(v, str):
                if v == "":
                    return 0
                mask = 0
                for part in v.split(","):
                    b = bits.get(part) or folded_bits.get(part.casefold())
                    if b is None:
                        if not ctype.elements and v.isdigit():
                            return int(v)
                        raise _bad(ctype, v, f"{part!r} is not one of {list(ctype.elements)}")
                    mask |= b
                return mask
            i = _as_int(ctype, v)
            if i < 0 or i > limit:
                raise _bad(ctype, v, "set bitmask out of range")
            return i

        return norm_set
    if fam is Family.BIT:
        top = (1 << ctype.display_length) - 1

        def norm_bit(v: Any) -> Any:
            if v is None:
                return None
            raw = _b64(v)
            i = int.from_bytes(raw, "big") if raw is not None else _as_int(ctype, v)
            if i < 0 or i > top:
                raise _bad(ctype, v, f"out of range for {ctype.compact_str()}")
            return i

        return norm_bit
    raise AssertionError(fam)


def make_json_out(ctype: ColumnType) -> Callable[[Any], Any]:
    """A function from the column's datum to its event-line JSON value."""
    fam = ctype.family
    if fam is Family.BYTES:
        return lambda v: None if v is None else {"$b64": base64.b64encode(v).decode("ascii")}
    if fam is Family.ENUM and ctype.elements:
        names = ("",) + ctype.elements

        def enum_out(v: Any) -> Any:
            if v is None:
                return None
            return names[v] if 0 <= v < len(names) else v

        return enum_out
    if fam is Family.SET and ctype.elements:
        elems = ctype.elements

        def set_out(v: Any) -> Any:
            if v is None:
                return None
            return ",".join(e for i, e in enumerate(elems) if v >> i & 1)

        return set_out
    return _identity


def _identity(v: Any) -> Any:
    return v


def tidb_json_text(v: Any) -> str:
    """TiDB's canonical JSON text (BinaryJSON.String): `{"k": "v"}`, `[1, 2]` (a space after ':' and ',').

    Object keys come out sorted (TiDB stores them sorted by their bytes); numbers and strings as
    TiDB's marshalFloat64To / jsonMarshalStringTo write them.
    """
    if isinstance(v, dict):
        return "{" + ", ".join(_tidb_json_str(k) + ": " + tidb_json_text(v[k]) for k in sorted(v)) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(tidb_json_text(x) for x in v) + "]"
    if isinstance(v, str):
        return _tidb_json_str(v)
    if v is None or isinstance(v, bool):
        return "null" if v is None else "true" if v else "false"
    if isinstance(v, int) and -(1 << 63) <= v < 1 << 64:
        return str(v)
    try:
        f = float(v)  # TiDB reads a number that fits no 64-bit integer as a double
    except OverflowError:
        raise ValueError_(f"{v!r} is out of range for a JSON number") from None
    if f != f or f in (float("inf"), float("-inf")):
        raise ValueError_(f"{v!r} is not a JSON number")
    if f == 0 or 1e-6 <= abs(f) < 1e21:
        return go_format_float64(f)
    r = repr(f)  # ES6 style, as Go's encoding/json: 1e+21, 1.5e-7
    return r.replace("e-0", "e-")


_JSON_SHORT_ESC = re.compile(r"(?<!\\)((?:\\\\)*)\\([bf])")


def _tidb_json_str(s: str) -> str:
    # orjson escapes as Go does except \b, \f (Go: \u0008, \u000c) and U+2028/U+2029 (Go escapes them)
    out = orjson.dumps(s).decode()
    if "\\b" in out or "\\f" in out:
        out = _JSON_SHORT_ESC.sub(lambda m: m.group(1) + ("\\u0008" if m.group(2) == "b" else "\\u000c"), out)
    if "\u2028" in out or "\u2029" in out:
        out = out.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return out


def parse_decimal(text: str) -> Decimal:
    try:
        return Decimal(text)
    except InvalidOperation:
        raise ValueError_(f"{text!r} is not a decimal") from None


def make_text_formatter(ctype: ColumnType, binary: str = "latin1") -> Callable[[Any], str]:
    """Datum to the text TiCDC's JSON encoders write for it (non-null values only).

    binary="latin1": each byte as one ISO-8859-1 character (canal-json);
    binary="base64": standard base64 (the simple protocol).
    """
    fam = ctype.family
    if fam in (Family.INT, Family.YEAR, Family.ENUM, Family.SET, Family.BIT):
        return str
    if fam is Family.FLOAT:
        return go_format_float32 if ctype.name == "float" else go_format_float64
    if fam is Family.BYTES:
        if binary == "base64":
            return lambda v: base64.b64encode(v).decode("ascii")
        return lambda v: v.decode("latin-1")
    return _as_text


def _as_text(v: Any) -> str:
    if type(v) is str:
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def make_text_parser(ctype: ColumnType, binary: str = "latin1") -> Callable[[str], Any]:
    """The inverse of make_text_formatter: JSON text back to the datum. Raises ValueError_."""
    fam = ctype.family
    if fam is Family.BYTES:
        if binary == "base64":

            def parse_b64(s: str) -> bytes:
                try:
                    return base64.b64decode(s, validate=True)
                except ValueError:
                    raise ValueError_(f"{s[:40]!r} is not base64") from None

            return parse_b64

        def parse_latin1(s: str) -> bytes:
            try:
                return s.encode("latin-1")
            except UnicodeEncodeError as e:
                raise ValueError_(
                    f"binary value has character {s[e.start]!r} at {e.start}, outside ISO-8859-1"
                ) from None

        return parse_latin1
    if fam is Family.ENUM or fam is Family.SET:
        by_name = make_normalizer(ctype)

        def parse_enum(s: str) -> int:
            if s.isdigit():
                return int(s)
            return by_name(s)

        return parse_enum
    if fam is Family.INT or fam is Family.YEAR:
        check = make_normalizer(ctype)
        lo, hi = ctype.int_range() if fam is Family.INT else (0, 2155)

        def parse_int(s: str) -> int:
            try:
                i = int(s)
            except ValueError:
                raise ValueError_(f"{s[:40]!r} is not a valid {ctype.short_str()} value") from None
            if lo <= i <= hi and fam is Family.INT:
                return i
            return check(i)

        return parse_int
    if fam is Family.BIT:
        # the width may be unknown (canal-json writes plain `bit`): accept any 64-bit value

        def parse_bit(s: str) -> int:
            try:
                v = int(s)
            except ValueError:
                raise ValueError_(f"{s[:40]!r} is not a BIT value (an unsigned integer)") from None
            if not 0 <= v < 1 << 64:
                raise ValueError_(f"{s!r} is out of range for BIT")
            return v

        return parse_bit
    if fam in (Family.FLOAT, Family.DECIMAL, Family.DATE,
               Family.DATETIME, Family.TIMESTAMP, Family.TIME):
        return make_normalizer(ctype)
    return _as_text


# =============================================================================================
# TiDB's FieldType numbers, as protocols that describe columns write them (simple, debezium)
# =============================================================================================


def tidb_flen(ctype: ColumnType) -> int:
    """FieldType.GetFlen() of a column TiDB created from this type."""
    name = ctype.name
    fam = ctype.family
    if fam in (Family.DATETIME, Family.TIMESTAMP):
        fsp = ctype.fsp
        return 19 + (fsp + 1 if fsp else 0)
    if fam is Family.TIME:
        fsp = ctype.fsp
        return 10 + (fsp + 1 if fsp else 0)
    if name == "enum":
        return max((len(e.encode("utf-8")) for e in ctype.elements), default=UNSPECIFIED)
    if name == "set":
        if not ctype.elements:
            return UNSPECIFIED
        return sum(len(e.encode("utf-8")) for e in ctype.elements) + len(ctype.elements) - 1
    return ctype.display_length


def tidb_decimal(ctype: ColumnType) -> int:
    """FieldType.GetDecimal(): the scale of decimals, the fsp of time types, 0 elsewhere (-1 for floats)."""
    fam = ctype.family
    if fam is Family.DECIMAL:
        return ctype.scale
    if fam in _FSP_FAMILIES:
        return ctype.fsp
    if fam is Family.FLOAT:
        return ctype.decimal
    return 0


def tidb_flags(ctype: ColumnType) -> tuple[bool, bool]:
    """(unsigned, zerofill) as TiDB flags them: YEAR always carries both, BIT is unsigned."""
    if ctype.name == "year":
        return True, True
    if ctype.name == "bit":
        return True, False  # TiDB flags BIT unsigned too
    return ctype.unsigned, ctype.zerofill


def name_to_enum_index(ctype: ColumnType, name: str) -> int:
    """A member name to its 1-based index; 0 (MySQL's error value) for a name that is not a member."""
    return ctype.elements.index(name) + 1 if name in ctype.elements else 0


def names_to_set_mask(ctype: ColumnType, names: str) -> int:
    """Comma-joined member names to the set's bitmask; names that are not members are left out."""
    mask = 0
    for part in names.split(",") if names else []:
        if part in ctype.elements:
            mask |= 1 << ctype.elements.index(part)
    return mask


def split_escaped_list(s: str) -> list[str]:
    """A comma-joined list whose members escape `,` and `\\` with a backslash (Avro/Connect `allowed`)."""
    out: list[str] = []
    cur: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            cur.append(s[i + 1])
            i += 2
            continue
        if c == ",":
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    if s:
        out.append("".join(cur))
    return out
