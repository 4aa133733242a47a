"""MySQL/TiDB column types: TiDB's type codes, `Family`, `ColumnType` and the parser of type text.

A column's type as TiDB's FieldType holds it (type code, flags, display length and decimal, charset,
enum/set elements). `ColumnType.parse` turns the type text of a CREATE TABLE (or the short type names
canal-json writes) into that view. The parser lives here, beside the class it builds, because
`ColumnType.parse` calls it; its lexical pieces are in `typetext`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache

from ..errors import TypeParseError
from .typetext import _ALIASES, _NAME_RE, _TO_BINARY, _WORD_RE, _int_arg, _split_args, _unquote

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
        if name == "vector" and flen != UNSPECIFIED:
            return f"vector({flen})"
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
        # bare `enum`/`set` (canal-json's short mysqlType) leaves the elements unknown; a member's trailing
        # spaces are not kept (MySQL and TiDB's parser strip them when the table is made)
        elements = tuple(_unquote(a, text).rstrip(" ") for a in args if a != "")
    elif name == "vector":  # VECTOR(D): TiDB keeps the dimension as the flen (CompactStr writes it back)
        if len(args) > 1:
            raise TypeParseError(f"too many parameters in column type {text!r}")
        if args:
            flen = _int_arg(text, args[0])
            if flen < 1:
                raise TypeParseError(f"a vector's dimension must be positive in {text!r}")
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
