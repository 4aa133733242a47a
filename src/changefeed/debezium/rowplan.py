"""The debezium encoder's fast row path: row messages as bytes spliced around per-table templates.

Split from the encoder because it is its own concern (speed): per table, a `_Plan` holds each column's
JSON key, NULL value and a formatter straight to JSON bytes, the constant `source` and schema bytes, and
fill functions compiled per column list. Everything here writes the same bytes as the encoder's object
path (field_value, then jsoniter's JSON), which stays the reference.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from .. import gojson
from ..model import Column, Row, TableInfo
from ..mysqltypes import Family
from .jsonnum import RawNumber, dumps, go_json_float
from .values import _date_days, _datetime_value, _timestamp_value

if TYPE_CHECKING:
    from ..config import CodecConfig


class PlanEncoder(Protocol):
    """What a plan reads of its encoder (`encoder.DebeziumEncoder`, which sits above this module)."""

    config: CodecConfig
    cluster: str

    def field_value(self, col: Column, value: Any) -> Any: ...
    def row_schemas(self, t: TableInfo, key_cols: Iterable[Column],
                    cols: Iterable[Column]) -> tuple[dict[str, Any], dict[str, Any]]: ...


# per column: the column, its `"name":` bytes, its NULL value's JSON, its non-null value's formatter
ColumnPlan = tuple[Column, bytes, bytes, Callable[[Any], bytes]]


def _json_text(v: Any) -> bytes:
    """One payload value as jsoniter writes it."""
    if v is None:
        return b"null"
    if v is True:
        return b"true"
    if v is False:
        return b"false"
    if isinstance(v, RawNumber):
        return v.encode()
    if isinstance(v, int):
        return b"%d" % v
    if isinstance(v, str) and ("\x08" in v or "\x0c" in v):
        return gojson.dumps_jsoniter(v)
    return orjson.dumps(v)


def _value_formatter(enc: PlanEncoder, col: Column) -> Callable[[Any], bytes]:
    """A column's non-null payload value straight to JSON bytes (equal to _json_text(field_value(...)))."""
    t = col.type
    fam = t.family
    if fam is Family.INT and not (t.unsigned and t.name == "bigint"):
        lo, hi = t.int_range()
        return lambda v: b"%d" % v if lo <= v <= hi else b"-1"
    if fam is Family.INT:  # bigint unsigned: the maximum becomes -1, the rest wraps through int64
        top = (1 << 64) - 1
        return lambda v: b"-1" if v >= top else b"%d" % (v - (1 << 64) if v >= 1 << 63 else v)
    if fam is Family.STRING or fam is Family.JSON:
        return lambda v: _json_text(v) if v.__class__ is str else _json_text(enc.field_value(col, v))
    if fam is Family.BYTES:
        return lambda v: b'"' + base64.b64encode(v) + b'"' if v.__class__ is bytes else _json_text(
            enc.field_value(col, v))
    if t.name == "decimal":

        def dec_fmt(v: Any) -> bytes:
            r = repr(float(v))
            if "e" in r or "n" in r:
                return go_json_float(float(v)).encode()
            return (r[:-2] if r[-2:] == ".0" else r).encode()

        return dec_fmt
    if fam is Family.DATETIME:
        fsp = t.fsp
        days_of: dict[str, int | None] = {}

        def dt_fmt(v: Any) -> bytes:
            # the usual "YYYY-MM-DD HH:MM:SS[.f]": the day from a cache, the time of day by slicing
            if len(v) >= 19 and v[10] == " " and v[13] == ":" and v[16] == ":":
                d = v[:10]
                days = days_of.get(d, -1)
                if days == -1:
                    days = _date_days(d) if d[:2] not in ("00",) else None
                    if len(days_of) < 4096:
                        days_of[d] = days
                if days is not None and v[11:19].replace(":", "").isdigit():
                    frac = v[20:26]
                    micros = ((days * 86400 + int(v[11:13]) * 3600 + int(v[14:16]) * 60 + int(v[17:19])) * 1_000_000
                              + (int((frac + "00000")[:6]) if frac else 0))
                    return b"%d" % (micros // 1000 if fsp <= 3 else micros)
            r = _datetime_value(v, fsp) if v != "CURRENT_TIMESTAMP" else 0
            return b"%d" % r if r is not None else _json_text(enc.field_value(col, v))

        return dt_fmt
    if fam is Family.TIMESTAMP:
        fsp = t.fsp

        def ts_fmt(v: Any) -> bytes:
            r = _timestamp_value(v, fsp) if v != "CURRENT_TIMESTAMP" else None
            return b'"' + r.encode() + b'"' if r is not None else _json_text(enc.field_value(col, v))

        return ts_fmt
    if fam is Family.ENUM:
        names = [orjson.dumps(e) for e in ("",) + t.elements]
        return lambda v: names[v] if v.__class__ is int and 0 < v < len(names) else _json_text(
            enc.field_value(col, v))
    return lambda v: _json_text(enc.field_value(col, v))


class _Plan:
    """Per table: key and column JSON fragments, value formatting, the constant schema bytes."""

    __slots__ = ("table", "cols", "key_cols", "ncols", "key_head", "key_tail", "src_a", "src_b", "src_c",
                 "value_schema", "enc", "_fills")

    def __init__(self, enc: PlanEncoder, t: TableInfo) -> None:
        self.table = t
        self.enc = enc
        self._fills: dict[int, Callable[[Row], bytes]] = {}
        keys = set(t.handle_key)
        self.cols: list[ColumnPlan] = [
            (c, orjson.dumps(c.name) + b":", _json_text(enc.field_value(c, None)), _value_formatter(enc, c))
            for c in t.columns]
        self.key_cols = [x for x in self.cols if x[0].name in keys]
        self.ncols = len(t.columns)
        cluster = orjson.dumps(enc.cluster)
        self.src_a = (b'{"version":"2.4.0.Final","connector":"TiCDC","name":' + cluster + b',"ts_ms":')
        self.src_b = (b',"snapshot":"false","db":' + orjson.dumps(t.schema) + b',"table":' + orjson.dumps(t.table)
                      + b',"server_id":0,"gtid":null,"file":"","pos":0,"row":0,"thread":0,"query":null,"commit_ts":')
        self.src_c = b',"cluster_id":' + cluster + b"}"
        self.key_head = b'{"payload":'
        if enc.config.debezium_disable_schema:
            self.key_tail = b"}"
            self.value_schema = b""
        else:
            key_schema, value_schema = enc.row_schemas(t, [x[0] for x in self.key_cols], t.columns)
            self.key_tail = b',"schema":' + dumps(key_schema) + b"}"
            self.value_schema = b',"schema":' + dumps(value_schema)

    def fill(self, row: Row, cols: list[ColumnPlan]) -> bytes:
        f = self._fills.get(id(cols))
        if f is None:
            f = self._fills[id(cols)] = _compile_fill(cols)
        return f(row)


_CONTROL_BF = re.compile("[\x08\x0c]")  # orjson writes these short; jsoniter as \\u0008 / \\u000c


def _compile_fill(cols: list[ColumnPlan]) -> Callable[[Row], bytes]:
    """An object of column values unrolled per column (the hot path); KeyError on a missing column."""
    env: dict[str, Any] = {"dumps": orjson.dumps, "ctl": _CONTROL_BF}
    parts = []
    for i, (c, key, dflt, fmt) in enumerate(cols):
        env[f"k{i}"], env[f"d{i}"], env[f"f{i}"] = (b"," if i else b"{") + key, dflt, fmt
        t = c.type
        v = f"v{i}"
        # the commonest types inline (no call): in-range signed ints, plain str text
        if t.family is Family.INT and not t.unsigned:
            lo, hi = t.int_range()
            expr = f'(b"%d" % {v} if {lo} <= {v} <= {hi} else f{i}({v}))'
        elif t.family in (Family.STRING, Family.JSON):
            expr = f"(dumps({v}) if {v}.__class__ is str and not ctl.search({v}) else f{i}({v}))"
        else:
            expr = f"f{i}({v})"
        parts.append(f"k{i}, d{i} if ({v} := row[{c.name!r}]) is None else {expr}")
    src = "def fill(row):\n    return b''.join((" + ", ".join(parts) + (", " if parts else "") + "b'}'))\n"
    if not parts:
        src = "def fill(row):\n    return b'{}'\n"
    exec(compile(src, "<debezium fill>", "exec"), env)
    return env["fill"]
