"""Column values as Debezium writes them: a MySQL datum to its Connect payload value.

Real Debezium's MySQL mapping (io.debezium.time.Date/Timestamp/MicroTime, Bits, Enum, ...) with TiCDC's
differences (binary as base64, decimal as double, bigint unsigned wrapping); a NULL becomes the column's
default, as TiCDC does. `field_value` is `DebeziumEncoder.field_value`; the date/time helpers also serve
the encoder's schema defaults and its fast JSON path.
"""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

from ..model import Column
from ..mysqltypes import Family
from .jsonnum import go_json_float
from .jsonnum import raw_number as _num

_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DATE = dt.date(1970, 1, 1)


_EPOCH_ORD = _EPOCH_DATE.toordinal()


def _date_days(v: str) -> int | None:
    try:
        d = dt.date.fromisoformat(v)
    except ValueError:
        return None
    if d.year >= 100:
        return d.toordinal() - _EPOCH_ORD
    if d.year < 70:
        d = d.replace(year=d.year + 2000)
    elif d.year < 100:
        d = d.replace(year=d.year + 1900)
    return (d - _EPOCH_DATE).days


def _parse_datetime(v: str) -> dt.datetime | None:
    try:
        date_part, _, time_part = v.partition(" ")
        if not time_part:
            time_part = "00:00:00"
        hms, _, frac = time_part.partition(".")
        h, m, s = (int(x) for x in hms.split(":"))
        y, mo, d = (int(x) for x in date_part.split("-"))
        us = int((frac + "000000")[:6]) if frac else 0
        return dt.datetime(y, mo, d, h, m, s, us)
    except ValueError:
        return None


def _datetime_value(v: str, fsp: int) -> int | None:
    try:
        t = dt.datetime.fromisoformat(v)  # C speed for the usual "YYYY-MM-DD HH:MM:SS[.ffffff]"
    except ValueError:
        t = _parse_datetime(v)
    if t is None:
        return None
    if t.year < 70:
        t = t.replace(year=t.year + 2000)
    elif t.year < 100:
        t = t.replace(year=t.year + 1900)
    delta = t - _EPOCH
    micros = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    return micros // 1000 if fsp <= 3 else micros


def _timestamp_value(v: str, fsp: int) -> str | None:
    if len(v) >= 19 and v[10] == " " and v >= "1970-01-01 00:00:01" and v[:4] != "0000":
        # already the UTC wall time in TiDB's text form: ISO-8601 by slicing
        frac = v[20:26] if len(v) > 20 else ""
        return v[:10] + "T" + v[11:19] + (("." + (frac + "000000")[:fsp]) if fsp > 0 else "") + "Z"
    t = _parse_datetime(v)
    if t is None or t < dt.datetime(1970, 1, 1, 0, 0, 1):
        return None
    s = t.strftime("%Y-%m-%dT%H:%M:%S")
    if fsp > 0:
        s += f".{t.microsecond:06d}"[: 1 + fsp]
    return s + "Z"


def _time_micros(v: str) -> int | None:
    neg = v.startswith("-")
    body = v[1:] if neg else v
    try:
        hms, _, frac = body.partition(".")
        h, m, s = (int(x) for x in hms.split(":"))
    except ValueError:
        return None
    us = int((frac + "000000")[:6]) if frac else 0
    total = ((h * 60 + m) * 60 + s) * 1_000_000 + us
    return -total if neg else total


def _bits_le(n: int, v: int) -> str:
    return base64.b64encode((v & ((1 << 64) - 1)).to_bytes(8, "little")[: (n + 7) // 8]).decode("ascii")


def _default_text(col: Column) -> str | None:
    d = col.default
    if d is None:
        return None
    if isinstance(d, bool):
        return "1" if d else "0"
    return d if isinstance(d, str) else str(d)


def _bit_default(d: str | int, n: int) -> int:
    """TiDB keeps a BIT default as its raw bytes; a digit string here means the number itself."""
    if isinstance(d, int):
        return d
    if d.isdigit():
        return int(d)
    return int.from_bytes(d.encode("latin-1", "replace"), "big")


def field_value(col: Column, v: Any) -> Any:
    """The payload value of one column (TiCDC writeDebeziumFieldValue)."""
    is_default = v is None
    if v is None:
        d = _default_text(col)
        if d is None:
            return None
        v = d
    t = col.type
    fam = t.family
    not_null = col.nullable is False
    if fam is Family.BIT:
        n = t.display_length
        iv = v if isinstance(v, int) else _bit_default(v, n)
        return iv != 0 if n == 1 else _bits_le(n, iv)
    if fam is Family.BYTES:
        raw = v if isinstance(v, bytes) else str(v).encode("utf-8")
        return base64.b64encode(raw).decode("ascii")
    if fam is Family.STRING:
        return v if isinstance(v, str) else v.decode("utf-8", "replace")
    if fam is Family.ENUM:
        if isinstance(v, str):
            return v
        return t.elements[v - 1] if 0 < v <= len(t.elements) else ""
    if fam is Family.SET:
        if isinstance(v, str):
            return v
        if v >> len(t.elements):
            return ""
        return ",".join(e for i, e in enumerate(t.elements) if v >> i & 1)
    if t.name == "decimal":
        return _num(go_json_float(float(v)))
    if fam is Family.DATE:
        days = _date_days(v)
        return (0 if not_null else None) if days is None else days
    if fam is Family.DATETIME:
        if v == "CURRENT_TIMESTAMP":
            return 0
        val = _datetime_value(v, t.fsp)
        return (0 if not_null else None) if val is None else val
    if fam is Family.TIMESTAMP:
        if v == "CURRENT_TIMESTAMP":
            return "1970-01-01T00:00:00Z" if not_null else None
        s = _timestamp_value(v, t.fsp)
        if s is None:
            return None if is_default else "1970-01-01T00:00:00Z"
        return s
    if fam is Family.TIME:
        return _time_micros(v)
    if fam is Family.INT:
        iv = int(v)
        lo, hi = t.int_range()
        if t.unsigned:
            if (t.name == "bigint" and iv == hi) or iv > hi:
                return -1
            return iv - (1 << 64) if iv >= 1 << 63 else iv
        return -1 if iv < lo or iv > hi else iv
    if fam is Family.FLOAT:
        if isinstance(v, str):
            return _num(go_json_float(float(v)))
        return _num(go_json_float(v, 32 if t.name == "float" else 64))
    if fam is Family.YEAR:
        return int(v)
    return v
