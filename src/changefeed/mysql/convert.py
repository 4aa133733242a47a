"""Binlog row values (as mysql-replication decodes them) to the event model's datums (REFERENCE-NOTES §0).

No I/O here: a converter per column, built once per table definition, so the hot loop is one call per value.
The column's own `store_defined` is applied last, so what leaves here passes the same checks as any other source
and is held as TiDB would hold it (rounding.py; the definitions come from the server's CREATE TABLE).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import orjson

from ..errors import ConvertError
from ..model import Column, Row, TableInfo
from ..mysqltypes import Family, tidb_json_text

Convert = Callable[[Any], Any]  # a value that is not None -> its datum
OnNone = Callable[[str | None], Any]  # why mysql-replication gave None -> the datum (None: a NULL)


def _fraction(us: int, fsp: int) -> str:
    return "." + f"{us:06d}"[:fsp] if fsp > 0 else ""


def _datetime_text(v: Any, fsp: int) -> str:
    if isinstance(v, _dt.datetime):
        return f"{v.year:04d}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}:{v.second:02d}" + \
            _fraction(v.microsecond, fsp)
    if isinstance(v, _dt.date):
        return f"{v.year:04d}-{v.month:02d}-{v.day:02d} 00:00:00" + _fraction(0, fsp)
    return str(v)


def _time_text(v: Any, fsp: int, *, column: bool = False) -> str:
    """A TIME's text; `column`: a TIME2 column's value as mysql-replication reads it, whose negative value with a
    fraction comes with the fraction counted from the other end of the second (TIME2 keeps the value as one
    signed number, the reader takes its fraction apart as if positive: -00:00:01.25 arrives as -00:00:01.75)."""
    if isinstance(v, _dt.timedelta):
        us = v.days * 86_400_000_000 + v.seconds * 1_000_000 + v.microseconds
        sign = "-" if us < 0 else ""
        us = abs(us)
        secs, frac = divmod(us, 1_000_000)
        if column and sign and frac:
            frac = 1_000_000 - frac
        h, rest = divmod(secs, 3600)
        m, s = divmod(rest, 60)
        return f"{sign}{h:02d}:{m:02d}:{s:02d}" + _fraction(frac, fsp)
    if isinstance(v, _dt.time):
        return f"{v.hour:02d}:{v.minute:02d}:{v.second:02d}" + _fraction(v.microsecond, fsp)
    return str(v)


_EPOCH = _dt.datetime(1970, 1, 1)


def _plain_json(v: Any) -> Any:
    """MySQL's binary JSON as mysql-replication gives it (bytes keys and strings; a date, time or datetime of
    JSON_OBJECT('at', NOW()) as Python's) as plain Python values: the temporal ones as the text MySQL prints."""
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, _dt.datetime):
        return _datetime_text(v, 6)
    if isinstance(v, _dt.date):
        return v.isoformat()
    if isinstance(v, _dt.time | _dt.timedelta):
        return _time_text(v, 6)
    if isinstance(v, dict):
        return {_plain_json(k): _plain_json(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain_json(x) for x in v]
    return v


def _null(why: str | None) -> Any:
    return None


def converter(col: Column, *, binlog: bool = False) -> tuple[Convert, OnNone]:
    """The functions from a value of `col` (not None) to its datum, and from a None to its datum (the reader
    gives None for a NULL, and also for a zero date or an empty SET, telling why). `binlog`: as mysql-replication
    reads a row event (not as a SELECT gives it), with its readings of YEAR 0, the zero TIMESTAMP and negative
    TIME2 values put right."""
    t = col.type
    fam = t.family
    norm = col.store_defined
    fsp = t.fsp
    if fam is Family.YEAR and binlog:  # the reader adds 1900 to the stored byte: YEAR 0 arrives as 1900
        return (lambda v: norm(0 if v == 1900 else v)), _null
    if fam in (Family.INT, Family.FLOAT, Family.YEAR, Family.ENUM):
        return norm, _null
    if fam is Family.DECIMAL:
        return (lambda v: norm(format(v, "f") if isinstance(v, Decimal) else str(v))), _null
    if fam is Family.DATE:
        return (lambda v: norm(v.isoformat() if isinstance(v, _dt.date) else str(v))), \
            (lambda why: "0000-00-00" if why and "range" in why else None)
    if fam in (Family.DATETIME, Family.TIMESTAMP):
        zero = "0000-00-00 00:00:00" + _fraction(0, fsp)
        if fam is Family.TIMESTAMP and binlog:
            # the reader takes a TIMESTAMP's seconds since the epoch as they are: the zero TIMESTAMP (0, which no
            # other TIMESTAMP is: their range starts a second later) arrives as 1970-01-01 00:00:00
            return (lambda v: zero if v == _EPOCH else norm(_datetime_text(v, fsp))), \
                (lambda why: zero if why and "range" in why else None)
        return (lambda v: norm(_datetime_text(v, fsp))), (lambda why: zero if why and "range" in why else None)
    if fam is Family.TIME:
        return (lambda v: norm(_time_text(v, fsp, column=binlog))), _null
    if fam is Family.JSON:

        def js(v: Any) -> Any:
            if isinstance(v, str | bytes):  # MariaDB's JSON is text: TiDB's canonical form of it
                try:
                    return tidb_json_text(orjson.loads(v))
                except orjson.JSONDecodeError:
                    raise ConvertError(f"column {col.name}: {v[:60]!r} is not JSON") from None
            return tidb_json_text(_plain_json(v))

        return js, _null
    if fam is Family.STRING:

        def text(v: Any) -> Any:
            if type(v) is str:
                return v
            if isinstance(v, bytes):
                try:
                    return v.decode("utf-8")
                except UnicodeDecodeError:
                    return v.decode("latin-1")  # a charset Python does not know: the bytes kept one to one
            return norm(v)

        return text, _null
    if fam is Family.BYTES:

        def raw(v: Any) -> Any:
            if isinstance(v, str):  # no charset in the binlog (MINIMAL metadata): the reader decoded it
                v = v.encode("utf-8", "surrogateescape")
            return norm(v)

        return raw, _null
    if fam is Family.SET:
        bits = {e.casefold(): 1 << i for i, e in enumerate(t.elements)}

        def set_(v: Any) -> Any:
            if isinstance(v, set | frozenset | list | tuple):
                mask = 0
                for e in v:
                    b = bits.get(str(e).casefold())
                    if b is None:  # not a member: the empty set, with a warning, as TiDB stores it
                        return norm(",".join(str(x) for x in v))
                    mask |= b
                return mask
            return norm(v)

        return set_, (lambda why: 0 if why == "empty set" else None)
    if fam is Family.BIT:

        def bit(v: Any) -> Any:
            if isinstance(v, str):
                return norm(int(v, 2) if v else 0)
            if isinstance(v, bytes):
                return norm(int.from_bytes(v, "big"))
            return norm(v)

        return bit, _null
    return norm, _null


class RowConverter:
    """Rows of one table definition: values in the binlog's column order -> {name: datum}."""

    def __init__(self, table: TableInfo, *, binlog: bool = False) -> None:
        self.table = table
        self.names = [c.name for c in table.columns]
        pairs = [converter(c, binlog=binlog) for c in table.columns]
        self.convs = [p[0] for p in pairs]
        self.nones = [p[1] for p in pairs]
        self.cols = list(zip(self.names, self.convs, self.nones, strict=True))

    def row(self, values: dict[Any, Any], none_sources: dict[Any, str] | None) -> Row:
        if len(values) != len(self.names):
            raise ConvertError(f"{self.table.qualified}: the binlog row has {len(values)} columns, the table "
                               f"definition {len(self.names)} ({', '.join(self.names)})")
        out: Row = {}
        ns = none_sources or {}
        try:
            for (name, conv, none), (key, v) in zip(self.cols, values.items(), strict=True):
                out[name] = conv(v) if v is not None else none(ns.get(key))
        except ValueError as e:
            raise ConvertError(f"{self.table.qualified}.{name}: {e}") from None
        return out
