"""A column's DEFAULT as TiDB stores it, from the literal a CREATE or ALTER TABLE wrote.

TiDB converts the literal to the column's type when the table is made (ddl getDefaultValue): a hexadecimal or
bit-value literal is a number in a numeric column and bytes in a string one, a YEAR's two digits become four, a
DECIMAL gets its scale, a DATETIME its fraction, an ENUM or SET member its declared spelling, a BINARY(N) its zero
padding. Protocols then write that stored value (an Avro schema's `default`, the simple protocol's `default`), so
the literal's text must not reach them: `0x10` on an INT column made an Avro default of the wrong type.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from ..mysqltypes import ColumnType, Family


class BitsLiteral(str):
    """A hexadecimal or bit-value literal's text (`0x10`, `X'0102'`, `b'101'`, `0b101`): a number or bytes, as
    the column's type says."""

    def to_bytes(self) -> bytes:
        text = self.lower()
        if text.startswith(("x'", "b'")):
            digits, base = text[2:-1], 16 if text[0] == "x" else 2
        else:
            digits, base = text[2:], 16 if text[1] == "x" else 2
        if not digits:
            return b""
        n = int(digits, base)
        size = (len(digits) + 1) // 2 if base == 16 else (len(digits) + 7) // 8
        return n.to_bytes(size, "big")


_DATETIME = re.compile(r"^(\d{4}-\d{1,2}-\d{1,2}[ T]\d{1,2}:\d{1,2}:\d{1,2}|\d{1,3}:\d{1,2}:\d{1,2})(?:\.(\d*))?$")


def stored_default(t: ColumnType, value: Any) -> Any:
    """The default `value` (the parser's literal; None: no default or NULL) as TiDB keeps it for type `t`. A
    value this cannot read (an expression, CURRENT_TIMESTAMP) is left as it is."""
    if value is None or not isinstance(value, str):
        return value
    fam = t.family
    bits = value.to_bytes() if isinstance(value, BitsLiteral) else None
    if fam is Family.BIT:
        return int.from_bytes(bits, "big") if bits is not None else int(value) if value.isdigit() else value
    if bits is not None:
        if fam is Family.BYTES:  # the bytes themselves (a string literal's are its text's, kept as text)
            return bits + b"\0" * (t.flen - len(bits)) if t.name == "binary" and t.flen > len(bits) else bits
        if fam in (Family.INT, Family.YEAR, Family.DECIMAL, Family.FLOAT):
            value = str(int.from_bytes(bits, "big"))
        else:
            value = bits.decode("utf-8", "replace")  # a binary string in a text column
    if fam is Family.YEAR:
        return _year(value)
    if fam is Family.DECIMAL:
        return _decimal(value, t.scale)
    if fam in (Family.DATETIME, Family.TIMESTAMP, Family.TIME):
        return _fraction(value, t.fsp)
    if fam is Family.ENUM:
        return next((m for m in t.elements if m.lower() == value.lower()), value)
    if fam is Family.SET:
        return _set(value, t.elements)
    if fam is Family.BYTES and t.name == "binary" and t.flen > 0:
        return value + "\0" * (t.flen - len(value.encode("utf-8")))
    return value


def _year(value: str) -> Any:
    """Two digits are 2000-2069 for 1-69 and 1970-1999 for 70-99 (MySQL's YEAR)."""
    try:
        n = int(Decimal(value).to_integral_value(ROUND_HALF_UP))
    except (InvalidOperation, ValueError):
        return value
    if 0 < n < 70:
        n += 2000
    elif 70 <= n < 100:
        n += 1900
    return str(n)


def _decimal(value: str, scale: int) -> str:
    try:
        d = Decimal(value.strip())
    except InvalidOperation:
        return value
    if not d.is_finite():
        return value
    return str(d.quantize(Decimal(1).scaleb(-max(scale, 0)), ROUND_HALF_UP))


def _fraction(value: str, fsp: int) -> str:
    """A date-time or time literal with the column's fractional digits (rounded, or padded with zeros)."""
    m = _DATETIME.match(value.strip())
    if m is None:
        return value
    head, frac = m.group(1), m.group(2) or ""
    fsp = max(fsp, 0)
    if len(frac) > fsp and int(frac[fsp]) >= 5:
        return value  # rounding up can carry into the seconds: left as written
    frac = (frac + "0" * fsp)[:fsp]
    return f"{head}.{frac}" if fsp else head


def _set(value: str, members: tuple[str, ...]) -> str:
    """A SET's members by their declared spelling, in declared order (as MySQL stores the bitmask)."""
    if not value:
        return value
    lowered = [m.lower() for m in members]
    picked = set()
    for part in value.split(","):
        if part.lower() not in lowered:
            return value
        picked.add(lowered.index(part.lower()))
    return ",".join(members[i] for i in sorted(picked))
