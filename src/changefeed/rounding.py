"""Values as TiDB stores them: rounded to the column's scale or fsp, clamped to its range.

TiDB never holds `153.123` in a decimal(10,2) column nor `12:34:56.123456` in a datetime(0): it rounds on
the way in, half away from zero (types/mydecimal.go Round with ModeHalfUp, types/time.go ParseFrac and
RoundFrac), carrying into seconds, minutes, hours, days, months and years. A value that no longer fits
after rounding is clamped to the column's largest value (decimal, time) or made the zero datetime, as
TiDB does in non-strict SQL mode; an ENUM or SET value that is not a member becomes the empty member
(index 0) or the empty set. Events built here (event lines, the workload, the binlog source) go through
`make_storer`, so the protocols encode what TiCDC would; decoders do not, as canal-json's short
mysqlType (`datetime`, `decimal`) says nothing of the fsp or scale.

Everything here is pure: no logging, no I/O. What TiDB would warn about comes back as a note.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import Any, NamedTuple

from .mysqltypes import UNSPECIFIED, ColumnType, Family, ValueError_

_CTX = Context(prec=200)  # more digits than any decimal column (65) plus its scale (30): exact


class Rounded(NamedTuple):
    """A value as stored, and why TiDB would warn (None when it only rounded)."""

    value: str
    note: str | None = None


# --------------------------------------------------------------------------------------------------
# DECIMAL
# --------------------------------------------------------------------------------------------------


def decimal_max(precision: int, scale: int) -> Decimal:
    """The largest value of decimal(precision, scale): 999.99 for (5,2)."""
    return _CTX.subtract(Decimal(1).scaleb(precision - scale), Decimal(1).scaleb(-scale))


def round_decimal(text: str, precision: int, scale: int, unsigned: bool = False) -> Rounded:
    """`text` rounded half away from zero to `scale` digits, written with exactly `scale` of them.

    As TiDB's ProduceDecWithSpecifiedTp: round first, then check the integer digits (99.9999 rounds to
    100.000, too wide for decimal(5,3)); too wide is clamped to the largest value of that sign; a negative
    value in an unsigned column is 0. Raises ValueError_ for text that is not a decimal number.
    """
    try:
        d = Decimal(text)
    except InvalidOperation:
        raise ValueError_(f"{text!r} is not a decimal") from None
    if not d.is_finite():
        raise ValueError_(f"{text!r} is not a decimal")
    note = None
    top = decimal_max(precision, scale)
    if not d.is_zero() and d.adjusted() >= precision - scale:  # wider than the column even before rounding
        d = top.copy_sign(d)
        note = "out of range"
    else:
        d = d.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP, context=_CTX)
        if d.copy_abs() > top:
            d = top.copy_sign(d)
            note = "out of range"
    if unsigned and d < 0:
        d = Decimal(0).quantize(Decimal(1).scaleb(-scale))
        note = "negative in an unsigned column"
    if d.is_zero():
        d = d.copy_abs()  # TiDB has no -0.00
    return Rounded(format(d, "f"), note)


# --------------------------------------------------------------------------------------------------
# Fractional seconds
# --------------------------------------------------------------------------------------------------


def round_frac(digits: str, fsp: int) -> tuple[int, bool]:
    """Fraction digits to microseconds kept to `fsp` digits, and whether they rounded up to a second.

    TiDB's ParseFrac: half up on the first dropped digit ("999", 2 -> overflow; "1234567", 5 -> 123460).
    """
    if not digits:
        return 0, False
    if fsp >= len(digits):
        return int(digits) * 10 ** (6 - len(digits)), False
    kept = (int(digits[: fsp + 1]) + 5) // 10
    if kept >= 10**fsp:
        return 0, True
    return kept * 10 ** (6 - fsp), False


def _frac_text(us: int, fsp: int) -> str:
    return "." + f"{us:06d}"[:fsp] if fsp > 0 else ""


_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{0,6}))?\Z")


def zero_datetime(fsp: int) -> str:
    """'0000-00-00 00:00:00' with the fsp's digits: what non-strict TiDB stores for a datetime it cannot hold."""
    return "0000-00-00 00:00:00" + _frac_text(0, fsp)


def round_datetime(text: str, fsp: int) -> Rounded:
    """A DATETIME/TIMESTAMP value rounded to `fsp` digits, a carry going on into the date.

    A date TiDB allows but the calendar does not (month or day 0) keeps its date and only the clock is
    rounded (Time.RoundFrac); if that carries into the next day, or past 9999-12-31, the value cannot be
    stored and becomes the zero datetime.
    """
    m = _DATETIME.match(text)
    if not m:
        raise ValueError_(f"{text!r} is not a datetime (YYYY-MM-DD HH:MM:SS[.ffffff])")
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    us, carry = round_frac(m.group(7) or "", fsp)
    if carry:
        try:
            t = _dt.datetime(y, mo, d, h, mi, s) + _dt.timedelta(seconds=1)
            y, mo, d, h, mi, s = t.year, t.month, t.day, t.hour, t.minute, t.second
        except (ValueError, OverflowError):  # no calendar date (month or day 0) or past year 9999
            secs = h * 3600 + mi * 60 + s + 1
            if secs >= 86400:
                return Rounded(zero_datetime(fsp), "out of range after rounding")
            h, mi, s = secs // 3600, secs // 60 % 60, secs % 60
    return Rounded(f"{y:04d}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}" + _frac_text(us, fsp))


_TIME = re.compile(r"(-)?(\d+):(\d{2}):(\d{2})(?:\.(\d{0,6}))?\Z")
TIME_MAX_SECONDS = 838 * 3600 + 59 * 60 + 59  # TiDB's MaxTime, 838:59:59 (no fraction)


def round_time(text: str, fsp: int) -> Rounded:
    """A TIME value rounded to `fsp` digits: the magnitude half up (-00:00:00.5 -> -00:00:01), carrying into
    minutes and hours (hours may pass 24). Beyond ±838:59:59 it is clamped there, as TiDB does."""
    m = _TIME.match(text)
    if not m:
        raise ValueError_(f"{text!r} is not a time ([-]HH:MM:SS[.ffffff])")
    neg = m.group(1) is not None
    secs = int(m.group(2)) * 3600 + int(m.group(3)) * 60 + int(m.group(4))
    us, carry = round_frac(m.group(5) or "", fsp)
    secs += carry
    note = None
    if secs > TIME_MAX_SECONDS or (secs == TIME_MAX_SECONDS and us):
        secs, us = TIME_MAX_SECONDS, 0
        note = "out of range"
    sign = "-" if neg and (secs or us) else ""
    return Rounded(f"{sign}{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}" + _frac_text(us, fsp), note)


# --------------------------------------------------------------------------------------------------
# Per column
# --------------------------------------------------------------------------------------------------


def rounds(ctype: ColumnType, full_definition: bool) -> bool:
    """Whether values of this column are rounded: the type text gives the scale or fsp (`decimal(10,2)`,
    `datetime(3)`), or it is a full column definition, where a bare `datetime` means fsp 0 and a bare
    `decimal` decimal(10,0). A bare type from a protocol that drops them (canal-json) says neither."""
    fam = ctype.family
    if fam is Family.DECIMAL:
        return full_definition or ctype.flen != UNSPECIFIED
    if fam in (Family.DATETIME, Family.TIMESTAMP, Family.TIME):
        return full_definition or ctype.decimal != UNSPECIFIED
    return False


def decimal_held(ctype: ColumnType) -> re.Pattern[str]:
    """Decimal text already as the column holds it (`-?` digits that fit, exactly `scale` after the point): what
    the storer lets through unchanged, unless it is a negative zero."""
    precision, scale = ctype.display_length, max(ctype.scale, 0)
    whole = "0" if precision == scale else f"(?:0|[1-9]\\d{{0,{precision - scale - 1}}})"
    return re.compile(("" if ctype.unsigned else "-?") + whole + (f"\\.\\d{{{scale}}}" if scale else "") + r"\Z")


def datetime_length(ctype: ColumnType) -> int:
    """The length of a DATETIME/TIMESTAMP text as the column holds it: 19, plus the point and `fsp` digits."""
    fsp = ctype.fsp
    return 19 + (fsp + 1 if fsp else 0)


def make_storer(ctype: ColumnType, normalize: Callable[[Any], Any], *, full_definition: bool,
                warn: Callable[[str], None]) -> Callable[[Any], Any]:
    """A function from an event value to the datum TiDB would store: `normalize`, then rounding or
    clamping as above. ENUM/SET values outside the definition become 0 (the empty member, the empty set).
    `warn` receives a one-line reason when TiDB would warn; `normalize` itself when nothing is to do."""
    fam = ctype.family
    if fam in (Family.ENUM, Family.SET) and ctype.elements:
        what = "member" if fam is Family.ENUM else "set value"

        def store_member(v: Any) -> Any:
            try:
                return normalize(v)
            except ValueError_:
                if isinstance(v, bool) or not isinstance(v, str | int):
                    raise
            warn(f"{v!r} is not a {what} of {ctype.full_str()}: stored as ''")
            return 0

        return store_member
    if not rounds(ctype, full_definition):
        return normalize
    # values already as TiDB holds them (most of them) are let through after a cheap check
    if fam is Family.DECIMAL:
        precision, scale, unsigned = ctype.display_length, max(ctype.scale, 0), ctype.unsigned
        held = decimal_held(ctype)

        def fit(v: str) -> Rounded:
            if held.match(v) and not (v[0] == "-" and not v.strip("-0.")):  # no -0.00
                return Rounded(v)
            return round_decimal(v, precision, scale, unsigned)
    elif fam is Family.TIME:
        fsp = ctype.fsp

        def fit(v: str) -> Rounded:
            dot = v.find(".")
            if ((dot < 0 and fsp == 0) or (dot >= 0 and len(v) - dot - 1 == fsp)) \
                    and not v.startswith(("-00:00:00", "838:59:59.", "-838:59:59.")):
                return Rounded(v)
            return round_time(v, fsp)
    else:
        fsp = ctype.fsp
        length = datetime_length(ctype)

        def fit(v: str) -> Rounded:
            return Rounded(v) if len(v) == length else round_datetime(v, fsp)

    def store(v: Any) -> Any:
        v = normalize(v)
        if v is None:
            return None
        r = fit(v)
        if r.note is not None:
            warn(f"{v} is {r.note} for {ctype.full_str()}: stored as {r.value}")
        return r.value

    return store
