"""Binlog row values (as mysql-replication decodes them) to the event model's datums (REFERENCE-NOTES §0).

No I/O here: a converter per column, built once per table definition, so the hot loop is one call per value.
The column's own `normalize` is applied last, so what leaves here passes the same checks as any other source.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import orjson

from ..model import Column, Row, TableInfo
from ..mysqltypes import Family, tidb_json_text

Convert = Callable[[Any, str | None], Any]  # (value, why it is None) -> datum


class ConvertError(ValueError):
    """A binlog value that does not fit its column."""


def _fraction(us: int, fsp: int) -> str:
    return "." + f"{us:06d}"[:fsp] if fsp > 0 else ""


def _datetime_text(v: Any, fsp: int) -> str:
    if isinstance(v, _dt.datetime):
        return f"{v.year:04d}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}:{v.second:02d}" + \
            _fraction(v.microsecond, fsp)
    if isinstance(v, _dt.date):
        return f"{v.year:04d}-{v.month:02d}-{v.day:02d} 00:00:00" + _fraction(0, fsp)
    return str(v)


def _time_text(v: Any, fsp: int) -> str:
    if isinstance(v, _dt.timedelta):
        us = v.days * 86_400_000_000 + v.seconds * 1_000_000 + v.microseconds
        sign = "-" if us < 0 else ""
        us = abs(us)
        secs, frac = divmod(us, 1_000_000)
        h, rest = divmod(secs, 3600)
        m, s = divmod(rest, 60)
        return f"{sign}{h:02d}:{m:02d}:{s:02d}" + _fraction(frac, fsp)
    if isinstance(v, _dt.time):
        return f"{v.hour:02d}:{v.minute:02d}:{v.second:02d}" + _fraction(v.microsecond, fsp)
    return str(v)


def _plain_json(v: Any) -> Any:
    """MySQL's binary JSON as mysql-replication gives it (bytes keys and strings) as plain Python values."""
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, dict):
        return {_plain_json(k): _plain_json(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain_json(x) for x in v]
    return v


def converter(col: Column) -> Convert:
    """The function from a binlog value of `col` to its datum."""
    t = col.type
    fam = t.family
    norm = col.normalize
    fsp = t.fsp
    if fam in (Family.INT, Family.FLOAT, Family.YEAR):
        return lambda v, why: norm(v)
    if fam is Family.DECIMAL:

        def dec(v: Any, why: str | None) -> Any:
            if v is None:
                return None
            return norm(format(v, "f") if isinstance(v, Decimal) else str(v))

        return dec
    if fam is Family.DATE:

        def date(v: Any, why: str | None) -> Any:
            if v is None:
                return "0000-00-00" if why and "range" in why else None
            return norm(v.isoformat() if isinstance(v, _dt.date) else str(v))

        return date
    if fam in (Family.DATETIME, Family.TIMESTAMP):
        zero = "0000-00-00 00:00:00" + _fraction(0, fsp)

        def dtm(v: Any, why: str | None) -> Any:
            if v is None:
                return zero if why and "range" in why else None
            return norm(_datetime_text(v, fsp))

        return dtm
    if fam is Family.TIME:
        return lambda v, why: None if v is None else norm(_time_text(v, fsp))
    if fam is Family.JSON:

        def js(v: Any, why: str | None) -> Any:
            if v is None:
                return None
            if isinstance(v, str | bytes):  # MariaDB's JSON is text: TiDB's canonical form of it
                try:
                    return tidb_json_text(orjson.loads(v))
                except orjson.JSONDecodeError:
                    raise ConvertError(f"column {col.name}: {v[:60]!r} is not JSON") from None
            return tidb_json_text(_plain_json(v))

        return js
    if fam is Family.STRING:

        def text(v: Any, why: str | None) -> Any:
            if isinstance(v, bytes):
                try:
                    return v.decode("utf-8")
                except UnicodeDecodeError:
                    return v.decode("latin-1")  # a charset Python does not know: the bytes kept one to one
            return v

        return text
    if fam is Family.BYTES:

        def raw(v: Any, why: str | None) -> Any:
            if isinstance(v, str):  # no charset in the binlog (MINIMAL metadata): the reader decoded it
                v = v.encode("utf-8", "surrogateescape")
            return norm(v)

        return raw
    if fam is Family.ENUM:
        return lambda v, why: norm(v)
    if fam is Family.SET:
        bits = {e.casefold(): 1 << i for i, e in enumerate(t.elements)}

        def set_(v: Any, why: str | None) -> Any:
            if v is None:
                return 0 if why == "empty set" else None
            if isinstance(v, set | frozenset | list | tuple):
                mask = 0
                for e in v:
                    b = bits.get(str(e).casefold())
                    if b is None:
                        raise ConvertError(f"column {col.name}: {e!r} is not one of {list(t.elements)}")
                    mask |= b
                return mask
            return norm(v)

        return set_
    if fam is Family.BIT:

        def bit(v: Any, why: str | None) -> Any:
            if v is None:
                return None
            if isinstance(v, str):
                return norm(int(v, 2) if v else 0)
            if isinstance(v, bytes):
                return norm(int.from_bytes(v, "big"))
            return norm(v)

        return bit
    return lambda v, why: norm(v)


class RowConverter:
    """Rows of one table definition: values in the binlog's column order -> {name: datum}."""

    def __init__(self, table: TableInfo) -> None:
        self.table = table
        self.names = [c.name for c in table.columns]
        self.convs = [converter(c) for c in table.columns]

    def row(self, values: dict[Any, Any], none_sources: dict[Any, str] | None) -> Row:
        vals = list(values.values())
        if len(vals) != len(self.names):
            raise ConvertError(f"{self.table.qualified}: the binlog row has {len(vals)} columns, the table "
                               f"definition {len(self.names)} ({', '.join(self.names)})")
        keys = list(values)
        out: Row = {}
        ns = none_sources or {}
        for name, key, conv, v in zip(self.names, keys, self.convs, vals, strict=True):
            try:
                out[name] = conv(v, ns.get(key) if v is None else None)
            except ValueError as e:
                raise ConvertError(f"{self.table.qualified}.{name}: {e}") from None
        return out
