"""TiDB's FieldType numbers (flen, decimal, flags) and the enum/set member helpers.

What protocols that describe columns (simple, debezium, avro) write or read besides the value.
"""

from __future__ import annotations

from .types import _FSP_FAMILIES, UNSPECIFIED, ColumnType, Family


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


def escape_enum_option(e: str) -> str:
    """An ENUM member in a Connect/Avro `allowed` list, as TiCDC's EscapeEnumAndSetOptions writes it: `,` escaped
    by a backslash, `\\'` and `''` as `'`; a backslash itself is left as it is."""
    return e.replace(",", "\\,").replace("\\'", "'").replace("''", "'")


def split_escaped_list(s: str) -> list[str]:
    """An `allowed` list back to its members: split at each comma not escaped by a backslash (`escape_enum_option`;
    real Debezium escapes nothing, and its members hold no commas then)."""
    out: list[str] = []
    cur: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and s.startswith(",", i + 1):
            cur.append(",")
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
