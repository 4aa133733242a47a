"""The debezium protocol (JSON), as TiCDC writes it (tiflow debezium/codec.go).

Key: `{"payload": {<handle-key columns>}, "schema": {... "<cluster>.<db>.<table>.Key" ...}}`.
Value: `{"payload": {"source", "ts_ms", "transaction", "op", "before"/"after"}, "schema": Envelope}` with
real Debezium's MySQL type mapping (int16/int32/int64, io.debezium.time.*, Bits, Enum, Json ...) and
TiCDC's differences (binary as base64 strings, decimal as double, bigint unsigned wrapping).
A NULL value is replaced by the column's default, as TiCDC does.

This module builds the messages; the payload values come from `values`, the `schema` halves from
`connect_schema`, and row messages take the byte-template fast path of `rowplan` when they can.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from typing import Any

from ..config import CodecConfig
from ..errors import EncodeError
from ..eventline import Message
from ..model import Column, Event, Kind, Row, TableInfo
from . import ddl as dbz_ddl
from .connect_schema import SOURCE_SCHEMA, envelope, field_schema, key_schema, watermark_envelope
from .jsonnum import dumps
from .rowplan import _Plan
from .values import field_value

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


def row_image(ev: Event) -> tuple[TableInfo, dict[str, Any]]:
    """A row event's table and the image its message describes (a delete's before, else its after)."""
    t = ev.table
    if t is None:
        raise EncodeError(f"{ev.kind} event without a table")
    image = ev.before if ev.kind is Kind.DELETE else ev.after
    if image is None:
        raise EncodeError(f"{ev.kind} event for {t.qualified} has no row image")
    return t, image


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
        """One column's Connect field schema (connect_schema.field_schema under this encoder's config)."""
        return field_schema(col, self.config.enable_tidb_extension)

    def row_schemas(self, t: TableInfo, key_cols: Iterable[Column],
                    cols: Iterable[Column]) -> tuple[dict[str, Any], dict[str, Any]]:
        """A row message's key and value schemas: the key struct of `key_cols`, the Envelope of `cols`."""
        base = topic_name(self.cluster, t.schema, t.table)
        return (key_schema(base, [self.field_schema(c) for c in key_cols]),
                envelope(base, [self.field_schema(c) for c in cols], self.config.debezium_include_start_ts))

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
            m.key = dumps(m._key_obj)  # type: ignore[attr-defined]
            m.value = dumps(m._value_obj)  # type: ignore[attr-defined]
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
        if t is None or self.config.debezium_include_start_ts:  # its templates have no start_ts
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
        t, image = row_image(ev)
        keys = set(t.handle_key)
        key_cols = [c for c in t.columns if c.name in keys]
        key: dict[str, Any] = {"payload": {c.name: self.field_value(c, image.get(c.name)) for c in key_cols}}
        source = self._source(t, ev.commit_ts)
        if self.config.debezium_include_start_ts:  # ticdc: after commit_ts; 0 where the source does not know it
            source = {**{k: v for k, v in source.items() if k != "cluster_id"}, "start_ts": ev.start_ts or 0,
                      "cluster_id": source["cluster_id"]}
        payload: dict[str, Any] = {"source": source, "ts_ms": self._clock(), "transaction": None}
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
            key["schema"], value["schema"] = self.row_schemas(t, key_cols, [c for c in t.columns if c.name in image])
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
            key["schema"] = key_schema(base, [])
            value["schema"] = watermark_envelope(base)
        return [_ObjMessage(key, value, kind=Kind.WATERMARK, commit_ts=ts)]
