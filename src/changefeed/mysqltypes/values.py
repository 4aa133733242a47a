"""Event-line values to datums and back: `make_normalizer` and `make_json_out`.

A datum is the form TiCDC's encoders receive for a column (REFERENCE-NOTES §0): ints, floats, str,
bytes. `make_normalizer` checks and converts an event-line JSON value to it, per `Family`;
`make_json_out` is the way back.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from ..errors import ValueError_
from .gotext import canonical_float32, go_format_float64, tidb_json_text
from .types import UNSPECIFIED, ColumnType, Family

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


def parse_decimal(text: str) -> Decimal:
    try:
        return Decimal(text)
    except InvalidOperation:
        raise ValueError_(f"{text!r} is not a decimal") from None
