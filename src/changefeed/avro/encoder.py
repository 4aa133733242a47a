"""The avro protocol (Confluent wire format with a schema registry), as TiCDC's avro encoder.

Key and value are each `0x00 + 4-byte big-endian schema id + Avro binary`. The key is the handle-key
columns (none: no key); the value all columns, plus `_tidb_op`, `_tidb_commit_ts` and
`_tidb_commit_physical_time` with enable-tidb-extension (and, with enable-row-checksum, the after image's
checksum `_tidb_row_level_checksum`, `_tidb_corrupted`, `_tidb_checksum_version`). A DELETE is a tombstone
(key, no value).
DDL and WATERMARK are not sent, except with enable-tidb-extension and avro-enable-watermark
(`0x01 + JSON` and `0x02 + ts`, no header). Schemas are registered once per table version.
"""

from __future__ import annotations

import io
import struct
from typing import Any

import fastavro

from .. import gojson
from ..checksum import event_checksum
from ..config import CodecConfig
from ..ddl import ACTIONS
from ..errors import EncodeError
from ..eventline import Message
from ..largemsg import record_length, too_large
from ..model import Event, Kind, TableInfo
from ..mysqltypes import ValueError_
from ..routing import TopicExpression, TopicSource
from ..tso import physical_ms
from .registry import SchemaRegistry, SchemaRegistryError
from .schema import BEFORE_FIELD, avro_value, key_columns, key_schema, sanitize, schema_text, value_schema

DEFAULT_TOPIC = "tidb_{schema}_{table}"
DDL_BYTE = b"\x01"
CHECKPOINT_BYTE = b"\x02"
DELETE_BYTE = b"\x03"


def subject(topic: str, suffix: str) -> str:
    """TopicNameStrategy on TiCDC's sanitised topic (dots become underscores)."""
    return topic.replace(".", "_") + suffix


class _Registered:
    __slots__ = ("table", "key_header", "key_schema", "key_cols", "value_header", "value_schema", "topic")

    def __init__(self) -> None:
        self.table: TableInfo | None = None
        self.key_header = b""
        self.key_schema: Any = None
        self.key_cols: list = []
        self.value_header = b""
        self.value_schema: Any = None
        self.topic = ""


class AvroEncoder:
    def __init__(self, config: CodecConfig, registry: SchemaRegistry, *, topic: str | TopicSource = DEFAULT_TOPIC,
                 changefeed_namespace: str = "default") -> None:
        self.config = config
        self.registry = registry
        self.topic_expr: TopicSource = TopicExpression(topic) if isinstance(topic, str) else topic
        self.topic_expr.require_table_per_topic(config.protocol)
        self.ns = changefeed_namespace
        self._tables: dict[int, _Registered] = {}

    def schemas(self, t: TableInfo) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """The key and value schemas this encoder registers for a table (key None without a handle key)."""
        return key_schema(t, self.config, self.ns), value_schema(t, self.config, self.ns)

    def _registered(self, t: TableInfo) -> _Registered:
        reg = self._tables.get(id(t))
        if reg is not None and reg.table is t:
            return reg
        reg = _Registered()
        reg.table = t
        reg.topic = self.topic_expr.topic(t.schema, t.table)
        ks, vs = self.schemas(t)
        try:
            if ks is not None:
                kid = self.registry.register(subject(reg.topic, "-key"), schema_text(ks))
                reg.key_header = b"\x00" + struct.pack(">I", kid)
                reg.key_schema = fastavro.parse_schema(ks)
                reg.key_cols = key_columns(t)
            sub = subject(reg.topic, "-value")
            vid = self.registry.register(sub, schema_text(vs))
        except SchemaRegistryError as e:
            what = "refused" if e.status == 409 else "failed to register"
            raise EncodeError(f"schema registry {what} the schema of table {t.qualified} (version {t.version}) "
                              f"under subject {subject(reg.topic, '-value')!r}: {e}") from None
        reg.value_header = b"\x00" + struct.pack(">I", vid)
        reg.value_schema = fastavro.parse_schema(vs)
        if len(self._tables) > 4096:
            self._tables.clear()
        self._tables[id(t)] = reg
        return reg

    def encode(self, ev: Event) -> list[Message]:
        kind = ev.kind
        if ev.is_row:
            return [self._row(ev)]
        ext = self.config.enable_tidb_extension and self.config.avro_enable_watermark
        if kind is Kind.WATERMARK:
            if not ext:
                return []
            return [Message(key=None, value=CHECKPOINT_BYTE + struct.pack(">Q", ev.commit_ts), kind=kind,
                            commit_ts=ev.commit_ts)]
        if kind is Kind.DDL:
            if not ext:
                return []
            t = ev.subject
            body = gojson.dumps_std({"query": ev.query or "", "type": ACTIONS.get(ev.ddl_type or "ActionNone", 0),
                                 "schema": t.schema if t else "", "table": t.table if t else "",
                                 "commitTs": ev.commit_ts})
            return [Message(key=None, value=DDL_BYTE + body, kind=kind, commit_ts=ev.commit_ts,
                            schema=t.schema if t else None, table=t.table if t else None)]
        return []  # BOOTSTRAP is a simple-protocol message

    def _write(self, schema: Any, record: dict[str, Any]) -> bytes:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, schema, record)
        return buf.getvalue()

    def _row(self, ev: Event) -> Message:
        t = ev.table
        if t is None:
            raise EncodeError(f"{ev.kind} event without a table")
        reg = self._registered(t)
        cfg = self.config
        image = ev.before if ev.kind is Kind.DELETE else ev.after
        if image is None:
            raise EncodeError(f"{ev.kind} event for {t.qualified} has no row image")
        key = None
        if reg.key_schema is not None:
            key = reg.key_header + self._write(reg.key_schema, {
                sanitize(c.name): avro_value(c, image.get(c.name), cfg) for c in reg.key_cols})
        value = None
        before = cfg.avro_include_before_value
        if ev.kind is not Kind.DELETE or before:  # ticdc: with the before value a delete is a full value too
            op = "c" if ev.kind is Kind.INSERT else "u" if ev.kind is Kind.UPDATE else "d"
            rec = {sanitize(c.name): avro_value(c, image.get(c.name), cfg) for c in t.columns}
            if before:
                rec[BEFORE_FIELD] = None if ev.before is None or ev.kind is Kind.INSERT else {
                    sanitize(c.name): avro_value(c, ev.before.get(c.name), cfg) for c in t.columns}
                if not cfg.enable_tidb_extension:
                    rec["_tidb_op"] = op
            if cfg.enable_tidb_extension:
                ts = ev.commit_ts
                rec["_tidb_op"] = op
                rec["_tidb_commit_ts"] = ts - (1 << 64) if ts >= 1 << 63 else ts
                rec["_tidb_commit_physical_time"] = physical_ms(ts)
                if cfg.enable_row_checksum:
                    try:
                        cs = event_checksum(ev, cfg.time_zone)
                    except ValueError_ as e:
                        raise EncodeError(f"cannot compute the row checksum of {t.qualified} at commitTs "
                                          f"{ev.commit_ts}: {e}") from None
                    # no checksum (both 0): TiCDC leaves the fields out and the schema defaults are written
                    cur = (cs.previous if ev.kind is Kind.DELETE else cs.current) if cs else None
                    rec["_tidb_row_level_checksum"] = str(cur) if cs else ""
                    rec["_tidb_corrupted"] = cs.corrupted if cs else False
                    rec["_tidb_checksum_version"] = cs.version if cs else 0
            try:
                value = reg.value_header + self._write(reg.value_schema, rec)
            except (ValueError, TypeError) as e:
                raise EncodeError(f"cannot write a row of {t.qualified} as Avro: {e}") from None
        length = record_length(key, value)
        if length > cfg.max_message_bytes:
            raise too_large("avro", f"{t.qualified} at commitTs {ev.commit_ts}", length, cfg.max_message_bytes)
        return Message(key=key, value=value, topic=reg.topic, kind=ev.kind, commit_ts=ev.commit_ts,
                       schema=t.schema, table=t.table, rows=1)
