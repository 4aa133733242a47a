"""`--protocol debezium-avro`: TiCDC's Debezium envelope in Confluent Avro (pingcap/ticdc debezium/avro.go).

The format itself (Connect schemas, Avro schemas and their text, datums) is `avro_connect`'s; this module
registers the schemas and frames the messages (magic byte, 4-byte schema id, Avro binary). Row keys and values
go under `<topic>-key` / `<topic>-value`; the topic is Debezium's `<cluster>.<db>.<table>` unless a topic
expression is given. DDL and watermarks are sent only with enable-tidb-extension=true and
avro-enable-watermark=true, as TiCDC's; their subjects are their record names, as TiCDC registers them (it
passes no topic): `io.debezium.connector.mysql.SchemaChangeKey` / `...SchemaChangeValue` and
`<cluster>.watermark.Key` / `<cluster>.watermark.Envelope`. debezium-disable-schema does not apply (TiCDC's
Avro encoder turns it off).

The decoder reads TiCDC's form, the one this project wrote before (`Envelope`/`Value`/`Key` records,
`transaction`), and real Debezium behind Confluent's AvroConverter (logical types beside `connect.name`).
"""

from __future__ import annotations

import base64
import io
import json
import struct
from typing import Any

import fastavro

from ..avro.registry import SchemaRegistry, SchemaRegistryError
from ..config import CodecConfig
from ..errors import DecodeError, EncodeError
from ..eventline import Message
from ..model import Event, Kind, TableInfo
from ..routing import TopicExpression, TopicSource
from . import avro_connect as fmt
from . import ddl as dbz_ddl
from .decoder import DebeziumDecoder
from .encoder import DebeziumEncoder, row_image, topic_name

_CONNECT_OF = {"int": "int32", "long": "int64", "float": "float", "double": "double", "boolean": "boolean",
               "string": "string", "bytes": "bytes"}
# Avro logical types (an AvroConverter's schema, or any Avro writer's) as the Connect names the decoder reads
_LOGICAL = {"decimal": fmt.DECIMAL, "date": "org.apache.kafka.connect.data.Date",
            "time-millis": "org.apache.kafka.connect.data.Time",
            "timestamp-millis": "org.apache.kafka.connect.data.Timestamp",
            "time-micros": "io.debezium.time.MicroTime", "timestamp-micros": "io.debezium.time.MicroTimestamp"}


def sends_ddl_and_watermarks(config: CodecConfig) -> bool:
    """TiCDC's debezium-avro encodes DDL and checkpoints only with the TiDB extension and avro-enable-watermark
    (encoder.go EncodeDDLEvent / EncodeCheckpointEvent); debezium-output-ddl-and-watermark=false also stops them."""
    return config.enable_tidb_extension and config.avro_enable_watermark and config.debezium_output_ddl_and_watermark


class DebeziumAvroEncoder:
    def __init__(self, config: CodecConfig, registry: SchemaRegistry, *, topic: str | TopicSource | None = None,
                 clock_ms: Any = None) -> None:
        self.config = config
        self.registry = registry
        self.inner = DebeziumEncoder(config, clock_ms=clock_ms)  # DDL and watermark payloads, the clock
        self.topic_expr: TopicSource | None = TopicExpression(topic) if isinstance(topic, str) else topic
        if self.topic_expr is not None:
            self.topic_expr.require_table_per_topic(config.protocol)
        self._codecs: dict[tuple[str, str], tuple[int, Any]] = {}
        self._tables: dict[tuple[int, tuple[str, ...]], tuple[TableInfo, Any]] = {}
        self._texts: dict[int, tuple[dict[str, Any], Any, str]] = {}
        self._other: dict[str | None, tuple[dict[str, Any], dict[str, Any]]] = {}  # DDL (per db), watermark

    def _topic(self, schema: str | None, table: str | None) -> str:
        if table:
            if self.topic_expr is not None:
                return self.topic_expr.topic(schema or "", table)
            return topic_name(self.config.cluster_id, schema or "", table)
        return f"{self.config.cluster_id}"  # schema changes and watermarks: the server's own topic, as Debezium

    def _frame(self, subject: str, connect_schema: dict[str, Any], payload: Any) -> bytes:
        known = self._texts.get(id(connect_schema))  # a table's schemas are built once (`_schemas`)
        if known is None or known[0] is not connect_schema:
            avro_schema = fmt.to_avro(connect_schema)
            known = (connect_schema, avro_schema, fmt.schema_text(avro_schema))
            if len(self._texts) > 8192:
                self._texts.clear()
            self._texts[id(connect_schema)] = known
        _, avro_schema, text = known
        cached = self._codecs.get((subject, text))
        if cached is None:
            try:
                sid = self.registry.register(subject, text)
            except SchemaRegistryError as e:
                raise EncodeError(f"schema registry refused {subject!r}: {e}") from None
            cached = (sid, fastavro.parse_schema(fmt.without_logical_types(avro_schema)))
            self._codecs[(subject, text)] = cached
        sid, parsed = cached
        buf = io.BytesIO()
        try:
            fastavro.schemaless_writer(buf, parsed, fmt.to_datum(connect_schema, payload))
        except (ValueError, TypeError, OverflowError) as e:
            raise EncodeError(f"{subject}: the payload does not fit its Avro schema: {e}") from None
        return b"\x00" + struct.pack(">I", sid) + buf.getvalue()

    def _schemas(self, t: TableInfo, names: tuple[str, ...]) -> Any:
        cached = self._tables.get((id(t), names))
        if cached is not None and cached[0] is t:
            return cached[1]
        keys = set(t.handle_key)
        in_image = set(names)
        key_cols = [c for c in t.columns if c.name in keys]
        cols = [c for c in t.columns if c.name in in_image]
        schemas = (key_cols, cols, *fmt.row_schemas(
            self.config.cluster_id, t.schema, t.table, [fmt.field_schema(c, self.config) for c in key_cols],
            [fmt.field_schema(c, self.config) for c in cols]))
        if len(self._tables) > 4096:
            self._tables.clear()
        self._tables[(id(t), names)] = (t, schemas)
        return schemas

    def _row(self, ev: Event) -> Message:
        t, image = row_image(ev)
        key_cols, cols, key_schema, value_schema = self._schemas(t, tuple(image))
        cfg = self.config

        def values(row: dict[str, Any] | None) -> dict[str, Any] | None:
            return None if row is None else {c.name: fmt.column_value(c, row.get(c.name), cfg) for c in cols}

        payload: dict[str, Any] = {"source": fmt.row_source(cfg.cluster_id, t.schema, t.table, ev.commit_ts),
                                   "ts_ms": self.inner._clock(), "before": None, "after": None}
        if ev.kind is Kind.INSERT:
            payload.update(op="c", after=values(ev.after))
        elif ev.kind is Kind.DELETE:
            payload.update(op="d", before=values(ev.before))
        else:
            payload["op"] = "u"
            if cfg.debezium_output_old_value:
                payload["before"] = values(ev.before)
            payload["after"] = values(ev.after)
        topic = self._topic(t.schema, t.table)
        key = {c.name: fmt.column_value(c, image.get(c.name), cfg) for c in key_cols}
        return Message(key=self._frame(f"{topic}-key", key_schema, key),
                       value=self._frame(f"{topic}-value", value_schema, payload),
                       kind=ev.kind, commit_ts=ev.commit_ts, schema=t.schema, table=t.table, rows=1, topic=topic)

    def encode(self, ev: Event) -> list[Message]:
        if ev.is_row:
            return [self._row(ev)]
        if ev.kind not in (Kind.DDL, Kind.WATERMARK) or not sends_ddl_and_watermarks(self.config):
            return []
        out = []
        cluster = self.config.cluster_id
        for key_obj, value_obj, m in self.inner.objects(ev):
            db = value_obj["payload"]["databaseName"] if m.kind is Kind.DDL else None
            schemas = self._other.get(db)
            if schemas is None:
                schemas = self._other[db] = fmt.watermark_schemas(cluster) if db is None else (
                    dbz_ddl.KEY_SCHEMA, dbz_ddl.value_schema(fmt.source_schema(cluster, db)))
            key_schema, value_schema = schemas
            m.topic = self._topic(m.schema, m.table)
            m.key = self._frame(key_schema["name"], key_schema, key_obj["payload"])
            m.value = self._frame(value_schema["name"], value_schema, value_obj["payload"])
            out.append(m)
        return out


class DebeziumAvroDecoder:
    def __init__(self, config: CodecConfig, registry: SchemaRegistry) -> None:
        self.registry = registry
        self.inner = DebeziumDecoder(config)
        self._schemas: dict[int, tuple[Any, dict[str, Any]]] = {}
        self._unsigned: dict[tuple[str, str], frozenset[str]] = {}  # remembered BIGINT UNSIGNED columns

    def remember(self, t: TableInfo) -> None:
        """A definition from earlier DDL (a consumer's schema store): the MySQL types the Connect schema cannot
        say (BIGINT UNSIGNED travels as int64, or as a string in avro-bigint-unsigned-handling-mode=string)."""
        self.inner.remember(t)
        if t.columns:
            self._unsigned[(t.schema, t.table)] = frozenset(
                c.name for c in t.columns if c.type.name == "bigint" and c.type.unsigned)

    def _text_unsigned(self, schema: dict[str, Any], rec: Any) -> dict[str, Any]:
        """avro-bigint-unsigned-handling-mode=string without the TiDB extension: a remembered BIGINT UNSIGNED
        column's text back to its number, its Connect type to int64 (the definition then gives the type)."""
        src = rec.get("source") if isinstance(rec, dict) else None
        cols = self._unsigned.get((src.get("db"), src.get("table"))) if isinstance(src, dict) else None
        if not cols:
            return schema
        fields = []
        for f in schema.get("fields", []):
            if f.get("field") in ("before", "after") and f.get("fields"):
                f = dict(f, fields=[dict(c, type="int64") if c["field"] in cols and c["type"] == "string" else c
                                    for c in f["fields"]])
                img = rec.get(f["field"])
                if isinstance(img, dict):
                    for c in cols:
                        if isinstance(img.get(c), str):
                            img[c] = int(img[c])
            fields.append(f)
        return dict(schema, fields=fields)

    def _read(self, payload: bytes, fld: str) -> tuple[dict[str, Any], Any]:
        if len(payload) < 5 or payload[0] != 0:
            raise DecodeError("not in the Confluent wire format", field=fld, offset=0)
        sid = struct.unpack(">I", payload[1:5])[0]
        cached = self._schemas.get(sid)
        if cached is None:
            try:
                raw = json.loads(self.registry.schema(sid))
            except SchemaRegistryError as e:
                raise DecodeError(f"schema id {sid}: {e}", field=fld, offset=1) from None
            cached = (fastavro.parse_schema(fmt.without_logical_types(raw)), avro_to_connect(raw, names={}))
            self._schemas[sid] = cached
        parsed, connect = cached
        buf = io.BytesIO(payload[5:])
        try:
            rec = fastavro.schemaless_reader(buf, parsed, None)
        except Exception as e:  # noqa: BLE001 - any failure: the message does not fit its schema
            raise DecodeError(f"does not match its writer schema {sid}: {e}", field=fld,
                              offset=5 + buf.tell()) from None
        return connect, _to_json_form(rec, connect)

    def decode(self, value: bytes | None, key: bytes | None = None) -> list[Event]:
        if value is None:
            return []
        vschema, vrec = self._read(value, "value")
        vschema = self._text_unsigned(vschema, vrec)
        key_json = None
        if key is not None:
            kschema, krec = self._read(key, "key")
            key_json = json.dumps({"payload": krec, "schema": kschema}).encode()
        return self.inner.decode(json.dumps({"payload": vrec, "schema": vschema}).encode(), key_json)


def avro_to_connect(schema: Any, field: str | None = None, names: dict[str, Any] | None = None,
                    ns: str = "") -> dict[str, Any]:
    """An Avro schema as the Connect schema the JSON decoder reads: type, optional, name, parameters, tidb_type,
    and the Connect field name (`connect.field`, or the Avro name). A named reference resolves to its record."""
    names = {} if names is None else names
    optional = False
    if isinstance(schema, list):
        optional = "null" in schema
        schema = next((s for s in schema if s != "null"), "null")
    if isinstance(schema, str) and schema not in _CONNECT_OF:
        ref = names.get(schema) or names.get(f"{ns}.{schema}")
        schema = ref if ref is not None else schema
    if isinstance(schema, str):
        out: dict[str, Any] = {"type": _CONNECT_OF.get(schema, "string")}
    elif schema.get("type") == "record":
        rns = schema.get("namespace", ns)
        full = f"{rns}.{schema['name']}" if rns and "." not in schema["name"] else schema["name"]
        names[full] = schema
        fields = []
        for f in schema["fields"]:
            cf = avro_to_connect(f["type"], f.get("connect.field") or f["name"], names, rns)
            if f.get("tidb_type"):
                cf["tidb_type"] = f["tidb_type"]
                if cf["type"] == "string" and f["tidb_type"].startswith("bigint unsigned"):
                    cf["type"], cf["avro_text"] = "int64", True  # avro-bigint-unsigned-handling-mode=string
            fields.append(cf)
        out = {"type": "struct", "name": schema.get("connect.name") or full, "fields": fields}
    elif schema.get("type") == "array":
        out = {"type": "array", "items": avro_to_connect(schema["items"], None, names, ns)}
    else:
        out = {"type": schema.get("connect.type") or _CONNECT_OF.get(schema["type"], "string")}
        logical = schema.get("logicalType")
        name = schema.get("connect.name") or _LOGICAL.get(logical)
        if name:
            out["name"] = name
        params = dict(schema.get("connect.parameters") or {})
        if logical == "decimal":  # TiCDC's parameters say precision/scale, Connect's connect.decimal.precision
            params.setdefault("scale", str(schema.get("scale", 0)))
            params.setdefault("connect.decimal.precision", str(params.get("precision", schema.get("precision", 65))))
        if params:
            out["parameters"] = params
    out["optional"] = optional
    if field is not None:
        out["field"] = field
    return out


def _to_json_form(v: Any, s: dict[str, Any] | None) -> Any:
    """A record read with its Avro schema as the JSON form's payload: bytes as base64, the Connect field names,
    and BIGINT UNSIGNED from its text (avro-bigint-unsigned-handling-mode=string) when `tidb_type` says so."""
    if isinstance(v, bytes):
        return base64.b64encode(v).decode("ascii")
    if isinstance(v, list):
        return [_to_json_form(x, (s or {}).get("items")) for x in v]
    if not isinstance(v, dict):
        return int(v) if isinstance(v, str) and s is not None and s.get("avro_text") else v
    fields = {fmt._sanitize(f["field"]): f for f in (s or {}).get("fields", [])}
    out = {}
    for k, x in v.items():
        f = fields.get(k)
        out[f["field"] if f else k] = _to_json_form(x, f)
    return out
