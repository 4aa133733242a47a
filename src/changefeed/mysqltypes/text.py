"""Datums as the text TiCDC's JSON encoders write (canal-json, simple) and that text read back.

`make_text_formatter` and its inverse `make_text_parser`, one function per column type.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from ..errors import ValueError_
from .gotext import go_format_float32, go_format_float64
from .types import ColumnType, Family
from .values import make_normalizer


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
