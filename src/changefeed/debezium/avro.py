"""`--protocol debezium-avro`: the Debezium envelope in Confluent Avro, as Kafka Connect's AvroConverter writes it.

The Connect schema of each message (the `schema` half of the JSON form) becomes an Avro schema the way
Confluent's AvroData does it: structs become records named after the Connect name (namespace = its
prefix), optional fields become `["null", T]` with a null default, int8/int16 become `int` with
`connect.type`, named types keep `connect.name` / `connect.version` / `connect.parameters`. Key and value
are registered under `<topic>-key` / `<topic>-value`; the topic is Debezium's `<cluster>.<db>.<table>`
unless a topic expression is given.
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
from ..model import Event, TableInfo
from ..routing import TopicExpression, TopicSource
from .decoder import DebeziumDecoder
from .encoder import DebeziumEncoder, topic_name
from .jsonnum import RawNumber

_PRIMITIVE = {"int8": "int", "int16": "int", "int32": "int", "int64": "long", "float32": "float", "float": "float",
              "float64": "double", "double": "double", "boolean": "boolean", "string": "string", "bytes": "bytes"}
_CONNECT_OF = {"int": "int32", "long": "int64", "float": "float", "double": "double", "boolean": "boolean",
               "string": "string", "bytes": "bytes"}


def connect_to_avro(schema: dict[str, Any], names: set[str] | None = None) -> Any:
    """A Kafka Connect JSON schema as an Avro schema (AvroData.fromConnectSchema)."""
    names = set() if names is None else names
    typ = schema.get("type")
    if typ == "struct":
        full = schema.get("name") or "ConnectDefault"
        ns, _, name = full.rpartition(".")
        fields = []
        for f in schema.get("fields", []):
            ft = connect_to_avro(f, names)
            field: dict[str, Any] = {"name": f["field"], "type": ft}
            if f.get("optional"):
                field["default"] = None
            fields.append(field)
        if full in names:  # Avro names are defined once: later uses refer to the first definition
            out: Any = full
        else:
            names.add(full)
            out = {"type": "record", "name": name, "fields": fields}
            if ns:
                out["namespace"] = ns
            if schema.get("version") is not None:
                out["connect.version"] = schema["version"]
            out["connect.name"] = full
    elif typ == "array":
        out = {"type": "array", "items": connect_to_avro(schema.get("items", {"type": "string"}), names)}
    else:
        out = {"type": _PRIMITIVE.get(typ, "string")}
        if typ in ("int8", "int16"):
            out["connect.type"] = typ
        if schema.get("name"):
            out["connect.name"] = schema["name"]
            if schema.get("version") is not None:
                out["connect.version"] = schema["version"]
        if schema.get("parameters"):
            out["connect.parameters"] = dict(schema["parameters"])
        if "default" in schema:
            out["connect.default"] = schema["default"]
        if len(out) == 1:
            out = out["type"]
    if schema.get("optional"):
        return ["null", out]
    return out


# Avro logical types (an AvroConverter's schema, or any Avro writer's) as the Connect names the decoder reads
_LOGICAL = {"decimal": "org.apache.kafka.connect.data.Decimal", "date": "org.apache.kafka.connect.data.Date",
            "time-millis": "org.apache.kafka.connect.data.Time",
            "timestamp-millis": "org.apache.kafka.connect.data.Timestamp",
            "time-micros": "io.debezium.time.MicroTime", "timestamp-micros": "io.debezium.time.MicroTimestamp"}


def without_logical_types(schema: Any) -> Any:
    """The schema fastavro reads values with: logical types dropped, so a value comes as its Connect JSON form
    (a Decimal's bytes, a Date's days) instead of a Python Decimal or date (`avro_to_connect` keeps the names)."""
    if isinstance(schema, list):
        return [without_logical_types(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    return {k: without_logical_types(v) for k, v in schema.items() if k != "logicalType"}


def avro_to_connect(schema: Any, field: str | None = None) -> dict[str, Any]:
    """The inverse, enough for the decoder: Connect type, optional, name, parameters."""
    optional = False
    if isinstance(schema, list):
        optional = "null" in schema
        schema = next(s for s in schema if s != "null")
    if isinstance(schema, str):
        out: dict[str, Any] = {"type": _CONNECT_OF.get(schema, "string")}
    elif schema.get("type") == "record":
        out = {"type": "struct", "name": schema.get("connect.name") or schema.get("name"),
               "fields": [avro_to_connect(f["type"], f["name"]) for f in schema["fields"]]}
    elif schema.get("type") == "array":
        out = {"type": "array", "items": avro_to_connect(schema["items"])}
    else:
        out = {"type": schema.get("connect.type") or _CONNECT_OF.get(schema["type"], "string")}
        logical = schema.get("logicalType")
        name = schema.get("connect.name") or _LOGICAL.get(logical)
        if name:
            out["name"] = name
        if schema.get("connect.parameters"):
            out["parameters"] = schema["connect.parameters"]
        elif logical == "decimal":
            out["parameters"] = {"scale": str(schema.get("scale", 0)),
                                 "connect.decimal.precision": str(schema.get("precision", 65))}
    out["optional"] = optional
    if field is not None:
        out["field"] = field
    return out


def _datum(v: Any, schema: dict[str, Any]) -> Any:
    """JSON-form payload values to Avro datums: Go float text to floats, Bits base64 to bytes."""
    if v is None:
        return None
    typ = schema.get("type")
    if typ == "struct":
        by_field = {f["field"]: f for f in schema.get("fields", [])}
        return {k: _datum(x, by_field[k]) if k in by_field else x for k, x in v.items()
                if k in by_field}
    if typ == "array":
        return [_datum(x, schema.get("items", {})) for x in v]
    if isinstance(v, RawNumber):
        return int(float(v)) if typ in ("int8", "int16", "int32", "int64") else float(v)
    if typ == "bytes" and isinstance(v, str):
        return base64.b64decode(v)
    return v


def _fill_missing(value: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Avro records need every field: the JSON form leaves some out (an UPDATE without `before`)."""
    out = dict(value)
    for f in schema.get("fields", []):
        out.setdefault(f["field"], None)
    return out


class DebeziumAvroEncoder:
    def __init__(self, config: CodecConfig, registry: SchemaRegistry, *, topic: str | TopicSource | None = None,
                 clock_ms: Any = None) -> None:
        if config.debezium_disable_schema:
            raise EncodeError("debezium-avro needs the schemas: debezium-disable-schema does not apply")
        self.config = config
        self.registry = registry
        self.inner = DebeziumEncoder(config, clock_ms=clock_ms)
        self.topic_expr: TopicSource | None = TopicExpression(topic) if isinstance(topic, str) else topic
        if self.topic_expr is not None:
            self.topic_expr.require_table_per_topic(config.protocol)
        self._codecs: dict[tuple[str, str], tuple[int, Any]] = {}

    def _topic(self, m: Message) -> str:
        if m.table:
            if self.topic_expr is not None:
                return self.topic_expr.topic(m.schema or "", m.table)
            return topic_name(self.config.cluster_id, m.schema or "", m.table)
        return f"{self.config.cluster_id}"  # schema changes and watermarks: the server's own topic, as Debezium

    def _frame(self, subject: str, connect_schema: dict[str, Any], payload: Any) -> bytes:
        avro_schema = connect_to_avro(connect_schema)
        text = json.dumps(avro_schema, separators=(",", ":"))
        cached = self._codecs.get((subject, text))
        if cached is None:
            try:
                sid = self.registry.register(subject, text)
            except SchemaRegistryError as e:
                raise EncodeError(f"schema registry refused {subject!r}: {e}") from None
            cached = (sid, fastavro.parse_schema(avro_schema))
            self._codecs[(subject, text)] = cached
        sid, parsed = cached
        buf = io.BytesIO()
        datum = _datum(payload, connect_schema)
        if connect_schema.get("type") == "struct":
            datum = _fill_missing(datum, connect_schema)
        fastavro.schemaless_writer(buf, parsed, datum)
        return b"\x00" + struct.pack(">I", sid) + buf.getvalue()

    def encode(self, ev: Event) -> list[Message]:
        out = []
        for key_obj, value_obj, m in self.inner.objects(ev):
            topic = self._topic(m)
            m.topic = topic
            m.key = self._frame(f"{topic}-key", key_obj["schema"], key_obj["payload"])
            m.value = self._frame(f"{topic}-value", _with_tidb_source(value_obj["schema"]), value_obj["payload"])
            out.append(m)
        return out


class DebeziumAvroDecoder:
    def __init__(self, config: CodecConfig, registry: SchemaRegistry) -> None:
        self.registry = registry
        self.inner = DebeziumDecoder(config)
        self._schemas: dict[int, tuple[Any, dict[str, Any]]] = {}

    def remember(self, t: TableInfo) -> None:
        """A definition from earlier DDL (a consumer's schema store): without it a later micro-batch decodes a
        BIGINT UNSIGNED above 2^63 from its Connect int64 as a negative number."""
        self.inner.remember(t)

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
            cached = (fastavro.parse_schema(without_logical_types(raw)), avro_to_connect(raw))
            self._schemas[sid] = cached
        parsed, connect = cached
        buf = io.BytesIO(payload[5:])
        try:
            rec = fastavro.schemaless_reader(buf, parsed, None)
        except Exception as e:  # noqa: BLE001 - any failure: the message does not fit its schema
            raise DecodeError(f"does not match its writer schema {sid}: {e}", field=fld,
                              offset=5 + buf.tell()) from None
        return connect, _to_json_form(rec)

    def decode(self, value: bytes | None, key: bytes | None = None) -> list[Event]:
        if value is None:
            return []
        vschema, vrec = self._read(value, "value")
        key_json = None
        if key is not None:
            kschema, krec = self._read(key, "key")
            key_json = json.dumps({"payload": krec, "schema": kschema}).encode()
        return self.inner.decode(json.dumps({"payload": vrec, "schema": vschema}).encode(), key_json)


def _with_tidb_source(schema: dict[str, Any]) -> dict[str, Any]:
    """TiCDC's source carries commit_ts and cluster_id without declaring them; Avro needs them declared."""
    out = dict(schema)
    fields = []
    for f in schema.get("fields", []):
        if f.get("field") == "source" and f.get("type") == "struct":
            f = dict(f, fields=list(f["fields"]) + [
                {"type": "int64", "optional": True, "field": "commit_ts"},
                {"type": "string", "optional": True, "field": "cluster_id"}])
        fields.append(f)
    out["fields"] = fields
    return out


def _to_json_form(v: Any) -> Any:
    if isinstance(v, bytes):
        return base64.b64encode(v).decode("ascii")
    if isinstance(v, dict):
        return {k: _to_json_form(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_to_json_form(x) for x in v]
    return v
