"""The debezium protocol (JSON), as TiCDC writes it (tiflow debezium/codec.go).

Key: `{"payload": {<handle-key columns>}, "schema": {... "<cluster>.<db>.<table>.Key" ...}}`.
Value: `{"payload": {"source", "ts_ms", "transaction", "op", "before"/"after"}, "schema": Envelope}` with
real Debezium's MySQL type mapping (int16/int32/int64, io.debezium.time.*, Bits, Enum, Json ...) and
TiCDC's differences (binary as base64 strings, decimal as double, bigint unsigned wrapping).
A NULL value is replaced by the column's default, as TiCDC does.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Callable
from typing import Any

import orjson

from .. import gojson
from ..config import CodecConfig
from ..errors import EncodeError
from ..eventline import Message
from ..model import Column, Event, Kind, Row, TableInfo
from ..mysqltypes import Family
from . import ddl as dbz_ddl
from .jsonnum import RawNumber as _Raw
from .jsonnum import go_json_float
from .jsonnum import raw_number as _num
from .values import (
    _bit_default,
    _bits_le,
    _date_days,
    _datetime_value,
    _default_text,
    _time_micros,
    _timestamp_value,
    field_value,
)

_TOPIC_CHARS = re.compile(r"[^A-Za-z0-9._-]")
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_]")


def _sanitize(name: str) -> str:
    if not name:
        return name
    out = _NAME_CHARS.sub("_", name)
    return "_" + out if out[0].isdigit() else out


def topic_name(cluster: str, schema: str, table: str) -> str:
    """TiCDC's getSchemaTopicName: `<cluster>.<db>.<table>`, sanitised."""
    return f"{_sanitize(cluster)}.{_sanitize(schema)}.{_TOPIC_CHARS.sub('_', table)}"


class _ObjMessage(Message):
    """A message whose key and value are still objects (JSON or Avro comes later)."""

    __slots__ = ("_key_obj", "_value_obj")

    def __init__(self, key_obj: dict[str, Any], value_obj: dict[str, Any], **kw: Any) -> None:
        super().__init__(key=None, value=None, **kw)
        self._key_obj = key_obj
        self._value_obj = value_obj


class DebeziumEncoder:
    def __init__(self, config: CodecConfig, *, clock_ms: Callable[[], int] | None = None) -> None:
        self.config = config
        self.cluster = config.cluster_id
        self._clock = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._plans: dict[int, _Plan] = {}

    # --- values ----------------------------------------------------------------------------------
    field_value = staticmethod(field_value)  # the payload value of one column (TiCDC writeDebeziumFieldValue)

    # --- schema ----------------------------------------------------------------------------------
    def field_schema(self, col: Column) -> dict[str, Any]:
        t = col.type
        fam = t.family
        out: dict[str, Any] = {}
        if self.config.enable_tidb_extension:
            out["tidb_type"] = _tidb_type(col)
        optional = col.nullable is not False
        d = _default_text(col)
        name = col.name
        if fam is Family.BIT:
            n = t.display_length
            bits = _bit_default(d, n) if d is not None else 0
            if n == 1:
                out.update(type="boolean", optional=optional, field=name)
                if d is not None:
                    out["default"] = bits != 0
            else:
                out.update(type="bytes", optional=optional, name="io.debezium.data.Bits", version=1,
                           parameters={"length": str(n)}, field=name)
                if d is not None:
                    out["default"] = _bits_le(n, bits)
            return out
        if fam in (Family.STRING, Family.BYTES):
            out.update(type="string", optional=optional, field=name)
            if d is not None:
                out["default"] = d
            return out
        if fam is Family.ENUM:
            out.update(type="string", optional=optional, name="io.debezium.data.Enum", version=1,
                       parameters={"allowed": ",".join(e.replace("\\", "\\\\").replace(",", "\\,")
                                                       for e in t.elements)}, field=name)
            if d is not None:
                out["default"] = d
            return out
        if fam is Family.SET:
            out.update(type="string", optional=optional, name="io.debezium.data.EnumSet", version=1,
                       parameters={"allowed": ",".join(t.elements)}, field=name)
            if d is not None:
                out["default"] = d
            return out
        if fam is Family.DATE:
            out.update(type="int32", optional=optional, name="io.debezium.time.Date", version=1, field=name)
            if d is not None:
                days = _date_days(d)
                if days is not None:
                    out["default"] = days
                elif not optional:
                    out["default"] = 0
            return out
        if fam is Family.DATETIME:
            out.update(type="int64", optional=optional,
                       name="io.debezium.time.Timestamp" if t.fsp <= 3 else "io.debezium.time.MicroTimestamp",
                       version=1, field=name)
            if d is not None:
                val = 0 if d == "CURRENT_TIMESTAMP" else _datetime_value(d, t.fsp)
                if val is not None or not optional:
                    out["default"] = val or 0
            return out
        if fam is Family.TIMESTAMP:
            out.update(type="string", optional=optional, name="io.debezium.time.ZonedTimestamp", version=1, field=name)
            if d is not None:
                s = None if d == "CURRENT_TIMESTAMP" else _timestamp_value(d, t.fsp)
                if s is not None:
                    out["default"] = s
                elif not optional:
                    out["default"] = "1970-01-01T00:00:00Z"
            return out
        if fam is Family.TIME:
            out.update(type="int64", optional=optional, name="io.debezium.time.MicroTime", version=1, field=name)
            micros = None if d is None else _time_micros(d)
            if micros is not None:
                out["default"] = micros
            return out
        if fam is Family.JSON:
            out.update(type="string", optional=optional, name="io.debezium.data.Json", version=1, field=name)
            if d is not None:
                out["default"] = d
            return out
        if fam is Family.YEAR:
            out.update(type="int32", optional=optional, name="io.debezium.time.Year", version=1, field=name)
            if d is not None:
                y = float(d)
                y = y + 2000 if y < 70 else y + 1900 if y < 100 else y
                out["default"] = _num(go_json_float(y))
            return out
        if fam is Family.INT:
            tname = t.name
            if tname == "tinyint":
                typ = "int16"
            elif tname == "smallint":
                typ = "int32" if t.unsigned else "int16"
            elif tname == "mediumint":
                typ = "int32"
            elif tname == "int":
                typ = "int64" if t.unsigned else "int32"
            else:
                typ = "int64"
            out.update(type=typ, optional=optional, field=name)
        elif t.name == "float":
            out.update(type="double" if t.decimal not in (-1,) and t.decimal > 0 else "float", optional=optional,
                       field=name)
        elif fam is Family.FLOAT or fam is Family.DECIMAL:
            out.update(type="double", optional=optional, field=name)
        else:
            out.update(type="string", optional=optional, field=name)
            if d is not None:
                out["default"] = d
            return out
        if d is not None:
            try:
                out["default"] = _num(go_json_float(float(d)))
            except ValueError:
                pass
        return out

    # --- messages ----------------------------------------------------------------------------------
    def _source(self, t: TableInfo | None, ts: int) -> dict[str, Any]:
        return {"version": "2.4.0.Final", "connector": "TiCDC", "name": self.cluster, "ts_ms": ts >> 18,
                "snapshot": "false", "db": t.schema if t else "", "table": t.table if t else "", "server_id": 0,
                "gtid": None, "file": "", "pos": 0, "row": 0, "thread": 0, "query": None, "commit_ts": ts,
                "cluster_id": self.cluster}

    def _values(self, t: TableInfo, row: Row | None) -> dict[str, Any] | None:
        if row is None:
            return None
        return {c.name: self.field_value(c, row.get(c.name)) for c in t.columns if c.name in row}

    def objects(self, ev: Event) -> list[tuple[dict[str, Any], dict[str, Any], Message]]:
        """The key and value objects (before JSON) of each message, with the message's metadata."""
        return [(m._key_obj, m._value_obj, m) for m in self._messages(ev)]  # type: ignore[attr-defined]

    def encode(self, ev: Event) -> list[Message]:
        if ev.is_row:
            fast = self._row_fast(ev)
            if fast is not None:
                return [fast]
        out = []
        for m in self._messages(ev):
            m.key = _dumps(m._key_obj)  # type: ignore[attr-defined]
            m.value = _dumps(m._value_obj)  # type: ignore[attr-defined]
            out.append(m)
        return out

    def _messages(self, ev: Event) -> list[Message]:
        if ev.is_row:
            return [self._row(ev)]
        if not self.config.debezium_output_ddl_and_watermark:
            return []  # the spec's version: "DDL and WATERMARK events are ignored"
        if ev.kind is Kind.WATERMARK:
            return self._watermark(ev.commit_ts)
        if ev.kind is Kind.DDL:
            return [self._ddl(ev)]
        return []  # BOOTSTRAP belongs to the simple protocol

    def _ddl(self, ev: Event) -> Message:
        changes = dbz_ddl.table_change(ev)
        t = ev.table if ev.table is not None else ev.pre_table
        db = t.schema if t else ""
        key: dict[str, Any] = {"payload": {"databaseName": db}}
        payload = {"source": self._source(t, ev.commit_ts), "ts_ms": self._clock(), "databaseName": db,
                   "schemaName": None, "ddl": ev.query or "", "tableChanges": changes}
        value: dict[str, Any] = {"payload": payload}
        if not self.config.debezium_disable_schema:
            key["schema"] = dbz_ddl.KEY_SCHEMA
            value["schema"] = dbz_ddl.value_schema(SOURCE_SCHEMA)
        r = ev.route_table  # the message's topic: the table's before the DDL (TiCDC's GetTopicForDDL)
        return _ObjMessage(key, value, kind=Kind.DDL, commit_ts=ev.commit_ts,
                           schema=r.schema if r else db, table=r.table if r else None)

    def _plan(self, t: TableInfo) -> _Plan:
        plan = self._plans.get(id(t))
        if plan is None or plan.table is not t:
            plan = _Plan(self, t)
            if len(self._plans) > 4096:
                self._plans.clear()
            self._plans[id(t)] = plan
        return plan

    def _row_fast(self, ev: Event) -> Message | None:
        """Row messages as bytes spliced around per-table templates (the same bytes as the object path)."""
        t = ev.table
        if t is None:
            return None
        image = ev.before if ev.kind is Kind.DELETE else ev.after
        if image is None or (ev.kind is Kind.UPDATE and ev.before is None):
            return None
        plan = self._plan(t)
        if len(image) != plan.ncols:
            return None
        try:
            key = plan.key_head + plan.fill(image, plan.key_cols) + plan.key_tail
            ts = ev.commit_ts
            src = b"%s%d%s%d%s" % (plan.src_a, ts >> 18, plan.src_b, ts, plan.src_c)
            kind = ev.kind
            if kind is Kind.INSERT:
                body = b'"op":"c","before":null,"after":' + plan.fill(ev.after, plan.cols)  # type: ignore[arg-type]
            elif kind is Kind.DELETE:
                body = b'"op":"d","after":null,"before":' + plan.fill(ev.before, plan.cols)  # type: ignore[arg-type]
            else:
                if len(ev.after) != plan.ncols:  # type: ignore[arg-type]
                    return None
                body = b'"op":"u",'
                if self.config.debezium_output_old_value:
                    body += b'"before":' + plan.fill(ev.before, plan.cols) + b","  # type: ignore[arg-type]
                body += b'"after":' + plan.fill(ev.after, plan.cols)  # type: ignore[arg-type]
        except KeyError:
            return None
        value = b'{"payload":{"source":%s,"ts_ms":%d,"transaction":null,%s}%s}' % (
            src, self._clock(), body, plan.value_schema)
        return Message(key=key, value=value, kind=kind, commit_ts=ts, schema=t.schema, table=t.table, rows=1)

    def _row(self, ev: Event) -> Message:
        t = ev.table
        if t is None:
            raise EncodeError(f"{ev.kind} event without a table")
        image = ev.before if ev.kind is Kind.DELETE else ev.after
        if image is None:
            raise EncodeError(f"{ev.kind} event for {t.qualified} has no row image")
        keys = set(t.handle_key)
        key_cols = [c for c in t.columns if c.name in keys]
        key: dict[str, Any] = {"payload": {c.name: self.field_value(c, image.get(c.name)) for c in key_cols}}
        payload: dict[str, Any] = {"source": self._source(t, ev.commit_ts), "ts_ms": self._clock(), "transaction": None}
        if ev.kind is Kind.INSERT:
            payload.update(op="c", before=None, after=self._values(t, ev.after))
        elif ev.kind is Kind.DELETE:
            payload.update(op="d", after=None, before=self._values(t, ev.before))
        else:
            payload["op"] = "u"
            if self.config.debezium_output_old_value:
                payload["before"] = self._values(t, ev.before)
            payload["after"] = self._values(t, ev.after)
        value: dict[str, Any] = {"payload": payload}
        if not self.config.debezium_disable_schema:
            base = topic_name(self.cluster, t.schema, t.table)
            key["schema"] = {"type": "struct", "name": f"{base}.Key", "optional": False,
                             "fields": [self.field_schema(c) for c in key_cols]}
            fields = [self.field_schema(c) for c in t.columns if c.name in image]
            value["schema"] = _envelope(base, fields)
        return _ObjMessage(key, value, kind=ev.kind, commit_ts=ev.commit_ts,
                       schema=t.schema, table=t.table, rows=1)

    def _watermark(self, ts: int) -> list[Message]:
        if not self.config.enable_tidb_extension:
            return []  # TiCDC sends debezium watermarks only with the TiDB extension
        base = f"{_sanitize(self.cluster)}.watermark"
        key: dict[str, Any] = {"payload": {}}
        payload = {"source": self._source(None, ts), "ts_ms": self._clock(), "transaction": None, "op": "m"}
        value: dict[str, Any] = {"payload": payload}
        if not self.config.debezium_disable_schema:
            key["schema"] = {"type": "struct", "name": f"{base}.Key", "optional": False, "fields": []}
            env = _envelope(base, [])
            env["fields"] = env["fields"][2:3] + [env["fields"][3], env["fields"][4], env["fields"][5]]
            value["schema"] = env
        return [_ObjMessage(key, value, kind=Kind.WATERMARK, commit_ts=ts)]


def _json_text(v: Any) -> bytes:
    """One payload value as jsoniter writes it."""
    if v is None:
        return b"null"
    if v is True:
        return b"true"
    if v is False:
        return b"false"
    if isinstance(v, _Raw):
        return v.encode()
    if isinstance(v, int):
        return b"%d" % v
    if isinstance(v, str) and ("\x08" in v or "\x0c" in v):
        return gojson.dumps_jsoniter(v)
    return orjson.dumps(v)


def _value_formatter(enc: DebeziumEncoder, col: Column) -> Callable[[Any], bytes]:
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

    def __init__(self, enc: DebeziumEncoder, t: TableInfo) -> None:
        self.table = t
        self.enc = enc
        self._fills: dict[int, Callable[[Row], bytes]] = {}
        keys = set(t.handle_key)
        self.cols = [(c, orjson.dumps(c.name) + b":", _json_text(enc.field_value(c, None)), _value_formatter(enc, c))
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
            base = topic_name(enc.cluster, t.schema, t.table)
            key_cols = [x[0] for x in self.key_cols]
            self.key_tail = b',"schema":' + _dumps({"type": "struct", "name": f"{base}.Key", "optional": False,
                                                     "fields": [enc.field_schema(c) for c in key_cols]}) + b"}"
            self.value_schema = b',"schema":' + _dumps(_envelope(base, [enc.field_schema(c) for c in t.columns]))

    def fill(self, row: Row, cols: list) -> bytes:
        f = self._fills.get(id(cols))
        if f is None:
            f = self._fills[id(cols)] = _compile_fill(cols)
        return f(row)


_CONTROL_BF = re.compile("[\x08\x0c]")  # orjson writes these short; jsoniter as \\u0008 / \\u000c


def _compile_fill(cols: list) -> Callable[[Row], bytes]:
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


def _tidb_type(col: Column) -> str:
    t = col.type
    if t.name in ("year", "bit", "varchar", "char", "binary", "varbinary", "decimal") or not t.unsigned:
        return t.name
    return t.name + " unsigned"


def _envelope(base: str, fields: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "struct", "optional": False, "name": f"{base}.Envelope", "version": 1,
        "fields": [
            {"type": "struct", "optional": True, "name": f"{base}.Value", "field": "before", "fields": fields},
            {"type": "struct", "optional": True, "name": f"{base}.Value", "field": "after", "fields": fields},
            SOURCE_SCHEMA,
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
            {"type": "struct", "fields": [
                {"type": "string", "optional": False, "field": "id"},
                {"type": "int64", "optional": False, "field": "total_order"},
                {"type": "int64", "optional": False, "field": "data_collection_order"}],
             "optional": True, "name": "event.block", "version": 1, "field": "transaction"},
        ],
    }


def _f(t: str, opt: bool, field: str) -> dict[str, Any]:
    return {"type": t, "optional": opt, "field": field}


SOURCE_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "fields": [
        _f("string", False, "version"), _f("string", False, "connector"), _f("string", False, "name"),
        _f("int64", False, "ts_ms"),
        {"type": "string", "optional": True, "name": "io.debezium.data.Enum", "version": 1,
         "parameters": {"allowed": "true,last,false,incremental"}, "default": "false", "field": "snapshot"},
        _f("string", False, "db"), _f("string", True, "sequence"), _f("string", True, "table"),
        _f("int64", False, "server_id"), _f("string", True, "gtid"), _f("string", False, "file"),
        _f("int64", False, "pos"), _f("int32", False, "row"), _f("int64", True, "thread"),
        _f("string", True, "query"),
    ],
    "optional": False, "name": "io.debezium.connector.mysql.Source", "field": "source",
}


def _dumps(obj: Any) -> bytes:
    """Go-style JSON with numbers that must keep Go's float text spliced in raw."""
    raws: list[str] = []

    def mark(o: Any) -> Any:
        if isinstance(o, _Raw):
            raws.append(str(o))
            return f"\x00RAW{len(raws) - 1}\x00"
        if isinstance(o, dict):
            return {k: mark(v) for k, v in o.items()}
        if isinstance(o, list):
            return [mark(v) for v in o]
        return o

    out = gojson.dumps_jsoniter(mark(obj))
    if raws:
        for i, r in enumerate(raws):
            out = out.replace(f'"\\u0000RAW{i}\\u0000"'.encode(), r.encode(), 1)
    return out
