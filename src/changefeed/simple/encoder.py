"""The TiCDC simple protocol encoder, JSON (`encoding-format=json`) and Avro (`encoding-format=avro`).

JSON follows simple/message.go: one message struct, omitempty fields, Go's encoding/json (struct field
order, map keys sorted, HTML escaping). Avro follows simple/avro.go: the union of message.json, raw
Avro binary with no registry header, every column value a union branch.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from collections.abc import Callable
from importlib import resources
from typing import Any

import fastavro

from .. import gojson
from ..checksum import event_checksum
from ..compression import compress
from ..config import CodecConfig
from ..ddl import drops_table, simple_type
from ..errors import EncodeError
from ..eventline import Message
from ..largemsg import fit_row, record_length, too_large
from ..model import Event, Kind, Row, RowChecksum, TableInfo
from ..mysqltypes import Family, ValueError_, make_text_formatter
from .avrowriter import DMLWriter, checksum_bytes
from .schema import table_schema

VERSION = 1
NS = "com.pingcap.simple.avro."


def load_avro_schema() -> Any:
    """TiCDC's published simple-protocol Avro schema (pkg/sink/codec/simple/message.json)."""
    raw = json.loads(resources.files("changefeed.simple").joinpath("message.json").read_text())
    return fastavro.parse_schema(raw)


class _Plan:
    """Per table: the column order for Go's sorted maps and a formatter per column."""

    __slots__ = ("table", "names", "json_fmt", "avro_fmt", "handle", "schema", "avro_writer", "json_fill",
                 "json_head", "json_version")

    def __init__(self, table: TableInfo, tz: str) -> None:
        self.table = table
        cols = sorted(table.columns, key=lambda c: c.name)  # Go marshals map keys sorted
        self.names = [c.name for c in cols]
        self.json_fmt = {c.name: _json_formatter(c.type, tz) for c in cols}
        self.avro_fmt = {c.name: _avro_formatter(c.type, tz) for c in cols}
        self.handle = set(table.handle_key)
        self.schema: dict[str, Any] | None = None
        self.avro_writer: DMLWriter | None = None
        self.json_fill: Callable[[Row], dict[str, Any]] | None = None
        self.json_head = b""
        self.json_version = b""

    def table_schema(self) -> dict[str, Any]:
        if self.schema is None:
            self.schema = table_schema(self.table)
        return self.schema


_TYPES = {Kind.INSERT: b"INSERT", Kind.UPDATE: b"UPDATE", Kind.DELETE: b"DELETE"}


def _compile_json_fill(plan: _Plan) -> Callable[[Row], dict[str, Any]]:
    """The `data`/`old` object of a full row, unrolled per column in sorted-name order (the hot path).

    Raises KeyError when a column is missing; the caller then takes the general path.
    """
    env: dict[str, Any] = {}
    body = []
    for i, name in enumerate(plan.names):
        env[f"f{i}"] = plan.json_fmt[name]
        body.append(f"        {name!r}: None if (v{i} := row[{name!r}]) is None else f{i}(v{i}),")
    src = "def fill(row):\n    return {\n" + "\n".join(body) + "\n    }\n"
    exec(compile(src, "<simple json fill>", "exec"), env)
    return env["fill"]


def _json_formatter(ctype: Any, tz: str) -> Callable[[Any], Any]:
    if ctype.family is Family.TIMESTAMP:
        return lambda v: {"location": tz, "value": v}
    return make_text_formatter(ctype, "base64")


def _avro_formatter(ctype: Any, tz: str) -> Callable[[Any], Any]:
    fam = ctype.family
    if fam is Family.TIMESTAMP:
        return lambda v: (NS + "Timestamp", {"location": tz, "value": v})
    if ctype.name == "bigint" and ctype.unsigned:
        return lambda v: (NS + "UnsignedBigint", {"value": v - (1 << 64) if v >= 1 << 63 else v})
    if fam in (Family.INT, Family.YEAR, Family.ENUM, Family.SET, Family.BIT):
        return lambda v: ("long", v - (1 << 64) if v >= 1 << 63 else v)
    if fam is Family.FLOAT:
        return (lambda v: ("float", v)) if ctype.name == "float" else (lambda v: ("double", v))
    if fam is Family.BYTES:
        return lambda v: ("bytes", v)
    return lambda v: ("string", v if isinstance(v, str) else v.decode("utf-8", "replace"))


class SimpleEncoder:
    def __init__(
        self,
        config: CodecConfig,
        *,
        claim_check: Any = None,
        clock_ms: Callable[[], int] | None = None,
        claim_check_name: Callable[[], str] | None = None,
    ) -> None:
        if config.claim_check and claim_check is None:
            raise EncodeError("large-message-handle-option=claim-check needs a claim-check storage")
        self.config = config
        self.avro = config.encoding_format == "avro"
        self._schema = load_avro_schema() if self.avro else None
        self._claim_check = claim_check
        self._clock = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._claim_name = claim_check_name or (lambda: f"{uuid.uuid4()}.json")
        self._plans: dict[int, _Plan] = {}
        self._tz = config.time_zone

    def _plan(self, table: TableInfo) -> _Plan:
        plan = self._plans.get(id(table))
        if plan is None or plan.table is not table:
            plan = _Plan(table, self._tz)
            if len(self._plans) > 4096:
                self._plans.clear()
            self._plans[id(table)] = plan
        return plan

    # ------------------------------------------------------------------------------------------
    def encode(self, ev: Event) -> list[Message]:
        kind = ev.kind
        if kind in (Kind.INSERT, Kind.UPDATE, Kind.DELETE):
            return [self._row(ev)]
        if kind is Kind.DDL:
            return [self._ddl(ev)]
        if kind is Kind.WATERMARK:
            return [self._watermark(ev.commit_ts)]
        if kind is Kind.BOOTSTRAP:
            return [self._bootstrap(ev)]
        raise EncodeError(f"cannot encode a {kind} event")

    def _finish(self, value: bytes) -> bytes:
        codec = self.config.large_message_handle_compression
        return compress(codec, value) if codec != "none" else value

    def _avro(self, branch: str, payload: dict[str, Any], mtype: str) -> bytes:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, self._schema, (NS + "Message", {"type": mtype, "payload": (NS + branch,
                                                                                                   payload)}))
        return buf.getvalue()

    # ------------------------------------------------------------------------------------------
    def _watermark(self, ts: int) -> Message:
        if self.avro:
            value = self._avro("Watermark", {"version": VERSION, "commitTs": _i64(ts), "buildTs": self._clock()},
                               "WATERMARK")
        else:
            value = gojson.dumps_std({"version": VERSION, "type": "WATERMARK", "commitTs": ts,
                                      "buildTs": self._clock()})
        return Message(key=None, value=self._finish(value), kind=Kind.WATERMARK, commit_ts=ts)

    def _bootstrap(self, ev: Event) -> Message:
        t = ev.table
        if t is None:
            raise EncodeError("a bootstrap event needs a table")
        schema = self._plan(t).table_schema()
        if self.avro:
            value = self._avro("Bootstrap", {"version": VERSION, "buildTs": self._clock(),
                                             "tableSchema": _avro_table_schema(schema)}, "BOOTSTRAP")
        else:
            value = gojson.dumps_std({"version": VERSION, "type": "BOOTSTRAP", "commitTs": 0,
                                      "buildTs": self._clock(), "tableSchema": schema})
        value = self._check_size(self._finish(value), "BOOTSTRAP", t)
        return Message(key=None, value=value, kind=Kind.BOOTSTRAP, schema=t.schema, table=t.table)

    def _ddl(self, ev: Event) -> Message:
        after, before = ev.table, ev.pre_table
        if drops_table(ev.ddl_type):
            # TiCDC's DROP TABLE event carries the dropped table as both its TableInfo and PreTableInfo
            after = before = before if before is not None else after
        schema = self._plan(after).table_schema() if after is not None and after.columns else None
        pre = self._plan(before).table_schema() if before is not None and before.columns else None
        dtype = simple_type(ev.ddl_type or "ActionNone")
        if self.avro:
            value = self._avro("DDL", {
                "version": VERSION, "type": dtype, "sql": ev.query or "", "commitTs": _i64(ev.commit_ts),
                "buildTs": self._clock(),
                "tableSchema": None if schema is None else (NS + "TableSchema", _avro_table_schema(schema)),
                "preTableSchema": None if pre is None else (NS + "TableSchema", _avro_table_schema(pre)),
            }, "DDL")
        else:
            msg: dict[str, Any] = {"version": VERSION, "type": dtype}
            if ev.query:
                msg["sql"] = ev.query
            msg["commitTs"] = ev.commit_ts
            msg["buildTs"] = self._clock()
            if schema is not None:
                msg["tableSchema"] = schema
            if pre is not None:
                msg["preTableSchema"] = pre
            value = gojson.dumps_std(msg)
        subject = ev.subject
        value = self._check_size(self._finish(value), "DDL", subject)
        return Message(key=None, value=value, kind=Kind.DDL, commit_ts=ev.commit_ts,
                       schema=subject.schema if subject else None, table=subject.table if subject else None)

    def _check_size(self, value: bytes, what: str, t: TableInfo | None) -> bytes:
        """DDL and BOOTSTRAP messages have no large-message fallback in TiCDC: too large is an error."""
        length = record_length(None, value)
        if length > self.config.max_message_bytes:
            raise too_large(f"simple {what}", t.qualified if t else "(no table)", length,
                            self.config.max_message_bytes)
        return value

    # ------------------------------------------------------------------------------------------
    def _image(self, plan: _Plan, row: Row | None, only_handle: bool) -> dict[str, Any] | None:
        if row is None:
            return None
        fmts = plan.avro_fmt if self.avro else plan.json_fmt
        out: dict[str, Any] = {}
        for name in plan.names:
            if name not in row or (only_handle and name not in plan.handle):
                continue
            v = row[name]
            if v is None:
                out[name] = ("null", None) if self.avro else None
            else:
                out[name] = fmts[name](v)
        return out

    def _row_value(self, ev: Event, plan: _Plan, only_handle: bool, location: str | None,
                   cs: RowChecksum | None = None) -> bytes:
        kind = ev.kind
        if kind is not Kind.DELETE and ev.after is None or kind is not Kind.INSERT and ev.before is None:
            raise EncodeError(f"{kind} event for {plan.table.qualified} lacks its "
                              f"{'after' if kind is not Kind.DELETE and ev.after is None else 'before'} image")
        if ev.physical_table_id is not None and ev.physical_table_id != plan.table.table_id:
            return self._row_value_reference(ev, plan, only_handle, location, cs)  # the templates hold the table's ID
        if self.avro:
            w = plan.avro_writer
            if w is None:
                w = plan.avro_writer = DMLWriter(plan.table, self._tz)
            only = plan.handle if only_handle else None
            data = w.image(ev.after, only) if kind is not Kind.DELETE else b"\x00"
            old = w.image(ev.before, only) if kind is not Kind.INSERT else b"\x00"
            return w.message(kind.value.upper(), ev.commit_ts, self._clock(), data, old, location, only_handle,
                             checksum_bytes(cs))
        if not only_handle and location is None and plan.table.table and plan.table.schema:
            fast = self._json_fast(ev, plan, cs)
            if fast is not None:
                return fast
        return self._row_value_reference(ev, plan, only_handle, location, cs)

    def _json_fast(self, ev: Event, plan: _Plan, cs: RowChecksum | None = None) -> bytes | None:
        """Full rows: a byte template around the row images (same bytes as the reference path)."""
        fill = plan.json_fill
        if fill is None:
            fill = plan.json_fill = _compile_json_fill(plan)
            t = plan.table
            head = b'{"version":1,"database":' + gojson.dumps_std(t.schema) + b',"table":' + gojson.dumps_std(t.table)
            if t.table_id:
                head += b',"tableID":%d' % t.table_id
            plan.json_head = head + b',"type":"'
            plan.json_version = b',"schemaVersion":%d' % t.version if t.version else b""
        n = len(plan.names)
        kind = ev.kind
        try:
            if kind is Kind.INSERT:
                if len(ev.after) != n:  # type: ignore[arg-type]
                    return None
                images = b',"data":' + gojson.dumps_std(fill(ev.after))
            elif kind is Kind.DELETE:
                if len(ev.before) != n:  # type: ignore[arg-type]
                    return None
                images = b',"old":' + gojson.dumps_std(fill(ev.before))
            else:
                if len(ev.after) != n or len(ev.before) != n:  # type: ignore[arg-type]
                    return None
                images = (b',"data":' + gojson.dumps_std(fill(ev.after)) + b',"old":'
                          + gojson.dumps_std(fill(ev.before)))
        except KeyError:
            return None
        return b"".join((plan.json_head, _TYPES[kind], b'","commitTs":%d,"buildTs":%d' % (ev.commit_ts, self._clock()),
                         plan.json_version, _json_checksum(cs), images, b"}"))

    def _row_value_reference(self, ev: Event, plan: _Plan, only_handle: bool, location: str | None,
                             cs: RowChecksum | None = None) -> bytes:
        """The straightforward encoding (fastavro for Avro); the tests hold the fast path to it."""
        t = plan.table
        kind = ev.kind
        table_id = ev.physical_table_id or t.table_id  # a partition's row: the partition's ID (PhysicalTableID)
        data = self._image(plan, ev.after, only_handle) if kind is not Kind.DELETE else None
        old = self._image(plan, ev.before, only_handle) if kind is not Kind.INSERT else None
        if kind is not Kind.DELETE and data is None or kind is not Kind.INSERT and old is None:
            raise EncodeError(f"{kind} event for {t.qualified} lacks its "
                              f"{'after' if data is None else 'before'} image")
        if self.avro:
            payload: dict[str, Any] = {
                "version": VERSION, "database": t.schema, "table": t.table, "tableID": table_id or 0,
                "type": kind.value.upper(), "commitTs": _i64(ev.commit_ts), "buildTs": self._clock(),
                "schemaVersion": _i64(t.version or 0),
                "claimCheckLocation": location,
                "handleKeyOnly": True if only_handle else None,
                "checksum": None if cs is None else (NS + "Checksum", {
                    "version": cs.version, "corrupted": cs.corrupted, "current": cs.current,
                    "previous": cs.previous}),
                "data": data, "old": old,
            }
            return self._avro("DML", payload, "DML")
        msg: dict[str, Any] = {"version": VERSION}
        if t.schema:
            msg["database"] = t.schema
        if t.table:
            msg["table"] = t.table
        if table_id:
            msg["tableID"] = table_id
        msg["type"] = kind.value.upper()
        msg["commitTs"] = ev.commit_ts
        msg["buildTs"] = self._clock()
        if t.version:
            msg["schemaVersion"] = t.version
        if location:
            msg["claimCheckLocation"] = location
        if only_handle:
            msg["handleKeyOnly"] = True
        if cs is not None:
            msg["checksum"] = {"version": cs.version, "corrupted": cs.corrupted, "current": cs.current,
                               "previous": cs.previous}
        if data:
            msg["data"] = data
        if old:
            msg["old"] = old
        return gojson.dumps_std(msg)

    def _row(self, ev: Event) -> Message:
        t = ev.table
        if t is None:
            raise EncodeError(f"{ev.kind} event without a table")
        plan = self._plan(t)
        cs = self._checksum(ev) if self.config.enable_row_checksum else None
        value = self._finish(self._row_value(ev, plan, False, None, cs))
        if record_length(None, value) > self.config.max_message_bytes:  # rare: build the closures only then
            value = fit_row(
                "simple", f"{t.qualified} at commitTs {ev.commit_ts}", value, self.config,
                lambda location: self._finish(self._row_value(ev, plan, True, location, cs)),
                self._claim_check and (lambda stored: self._claim_check.write(self._claim_name(), stored)),
                "set large-message-handle-option=handle-key-only or claim-check, or raise max-message-bytes")
        return Message(key=None, value=value, kind=ev.kind, commit_ts=ev.commit_ts, schema=t.schema,
                       table=t.table, rows=1)

    def _checksum(self, ev: Event) -> RowChecksum | None:
        """The row's checksums (TiCDC: enable-row-checksum, from [integrity] integrity-check-level)."""
        try:
            return event_checksum(ev, self._tz)
        except ValueError_ as e:
            t = ev.table
            raise EncodeError(f"cannot compute the row checksum of {t.qualified if t else '?'} at commitTs "
                              f"{ev.commit_ts}: {e}") from None


def _json_checksum(cs: RowChecksum | None) -> bytes:
    """The `checksum` member of a JSON DML message (message.go's checksum struct, in field order)."""
    if cs is None:
        return b""
    return b',"checksum":{"version":%d,"corrupted":%s,"current":%d,"previous":%d}' % (
        cs.version, b"true" if cs.corrupted else b"false", cs.current, cs.previous)


def _i64(v: int) -> int:
    """Go's int64(uint64) for Avro longs."""
    return v - (1 << 64) if v >= 1 << 63 else v


def _avro_table_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The JSON TableSchema in the Avro record's shape (simple/avro.go newTableSchemaMap)."""
    columns = []
    for c in schema["columns"]:
        dt = c["dataType"]
        name = dt["mysqlType"]
        adt: dict[str, Any] = {"mysqlType": name, "charset": dt["charset"], "collate": dt["collate"],
                               "length": dt.get("length", 0), "decimal": None, "elements": None,
                               "unsigned": None, "zerofill": None}
        if name in ("tinyint", "smallint", "mediumint", "int", "bigint", "float", "double", "bit", "year"):
            adt["unsigned"] = bool(dt.get("unsigned"))
            adt["zerofill"] = bool(dt.get("zerofill"))
        elif name in ("enum", "set"):
            adt["elements"] = list(dt.get("elements") or [])
        elif name == "decimal":
            adt["decimal"] = dt.get("decimal", 0)
            adt["unsigned"] = bool(dt.get("unsigned"))
            adt["zerofill"] = bool(dt.get("zerofill"))
        d = c["default"]
        columns.append({"name": c["name"], "dataType": adt, "nullable": c["nullable"],
                        "default": None if d is None else str(d)})
    return {"database": schema["schema"], "table": schema["table"], "tableID": schema["tableID"],
            "version": _i64(schema["version"]), "columns": columns,
            "indexes": [dict(i) for i in schema["indexes"]]}
