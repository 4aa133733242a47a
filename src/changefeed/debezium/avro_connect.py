"""The format of `--protocol debezium-avro` as TiCDC writes it (pingcap/ticdc pkg/sink/codec/debezium/avro.go).

No I/O here: the Connect schemas TiCDC builds for the Avro form (codec.go under `isDebeziumAvro()`), their Avro
schemas and schema text (avro.go toAvroSchema, marshalled by Go's encoding/json), and the Avro datums of the
payloads (avro.go toNative, written by goavro). What differs from the JSON form:

- records named `<cluster>.<db>.<table>Envelope` / `<table>` / `<table>Key` and `<cluster>.<db>.Source`
  (each part sanitised), every column optional (`["null", T]`, default null; the key's too);
- binary strings as Avro bytes; DECIMAL as `bytes` + `logicalType: decimal` (precision, scale), or a string
  with avro-decimal-handling-mode=string; BIGINT UNSIGNED as a long (a value above 2^63-1 is an error) or,
  with avro-bigint-unsigned-handling-mode=string, its decimal text;
- no `transaction` field, `source.snapshot`/`source.thread` null, `commit_ts`/`cluster_id` always declared;
- Connect metadata as `connect.name` / `connect.version` / `connect.parameters` / `connect.type` (int8/int16)
  / `connect.field`, and `tidb_type` on a field with the TiDB extension; Connect defaults are not carried.
"""

from __future__ import annotations

import base64
from fractions import Fraction
from typing import Any

from .. import gojson
from ..config import CodecConfig
from ..errors import EncodeError
from ..goavro import signed_bytes
from ..model import Column
from ..mysqltypes import Family, to_float32
from .connect_schema import TRANSACTION_SCHEMA, _f
from .connect_schema import field_schema as json_field_schema
from .encoder import _sanitize
from .values import field_value

DECIMAL = "org.apache.kafka.connect.data.Decimal"
_MAX_LONG = (1 << 63) - 1
_PRIMITIVE = {"boolean": "boolean", "string": "string", "bytes": "bytes", "int8": "int", "int16": "int",
              "int32": "int", "int64": "long", "float": "float", "double": "double"}


# --- Connect schemas (codec.go / avro.go with isDebeziumAvro) -----------------------------------------------
def namespace(cluster: str, db: str) -> str:
    """debeziumAvroNamespace: `<cluster>.<db>`, sanitised."""
    return f"{_sanitize(cluster)}.{_sanitize(db)}"


def field_schema(col: Column, cfg: CodecConfig) -> dict[str, Any]:
    """writeDebeziumFieldSchema under debezium-avro: optional always, bytes for binary strings, the decimal and
    unsigned-bigint modes. (The JSON form's `default` is dropped: avro.go's Connect struct does not read it.)"""
    f = json_field_schema(col, cfg.enable_tidb_extension)
    f.pop("default", None)
    f["optional"] = True
    t = col.type
    if t.name == "decimal":
        f.pop("type")
        if cfg.avro_decimal_handling_mode == "precise":
            f.update(type="bytes", name=DECIMAL,
                     parameters={"precision": str(t.display_length), "scale": str(max(t.scale, 0))})
        else:
            f["type"] = "string"
    elif t.family is Family.BYTES:
        f["type"] = "bytes"
    elif t.name == "bigint" and t.unsigned and cfg.avro_bigint_unsigned_handling_mode == "string":
        f["type"] = "string"
    return f


def source_schema(cluster: str, db: str) -> dict[str, Any]:
    """writeSourceSchema under debezium-avro: no snapshot Enum nor sequence, table required, TiDB's fields."""
    return {"type": "struct", "optional": False, "name": f"{namespace(cluster, db)}.Source", "field": "source",
            "fields": [_f("string", False, "version"), _f("string", False, "connector"), _f("string", False, "name"),
                       _f("int64", False, "ts_ms"), _f("string", True, "snapshot"), _f("string", False, "db"),
                       _f("string", False, "table"), _f("int64", False, "server_id"), _f("string", True, "gtid"),
                       _f("string", False, "file"), _f("int64", False, "pos"), _f("int32", False, "row"),
                       _f("int64", True, "thread"), _f("string", True, "query"), _f("int64", False, "commit_ts"),
                       _f("string", False, "cluster_id")]}


def row_schemas(cluster: str, db: str, table: str, key_fields: list[dict[str, Any]],
                fields: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """buildDebeziumAvroKeyMessage / buildDebeziumAvroValueMessage: the key struct and the Envelope."""
    base = f"{namespace(cluster, db)}.{_sanitize(table)}"
    key = {"type": "struct", "name": f"{base}Key", "optional": False, "fields": key_fields}
    value = {"type": "struct", "optional": False, "name": f"{base}Envelope", "version": 1, "fields": [
        {"type": "struct", "optional": True, "name": base, "field": "before", "fields": fields},
        {"type": "struct", "optional": True, "name": base, "field": "after", "fields": fields},
        source_schema(cluster, db),
        {"type": "string", "optional": False, "field": "op"},
        {"type": "int64", "optional": False, "field": "ts_ms"}]}
    return key, value


def watermark_schemas(cluster: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """EncodeCheckpointEvent's schemas (the JSON form's, with the Avro source)."""
    base = f"{_sanitize(cluster)}.watermark"
    key = {"type": "struct", "name": f"{base}.Key", "optional": False, "fields": []}
    value = {"type": "struct", "optional": False, "name": f"{base}.Envelope", "version": 1, "fields": [
        source_schema(cluster, "watermark"),
        {"type": "string", "optional": False, "field": "op"},
        {"type": "int64", "optional": True, "field": "ts_ms"}, TRANSACTION_SCHEMA]}
    return key, value


def row_source(cluster: str, db: str, table: str, commit_ts: int) -> dict[str, Any]:
    """buildDebeziumAvroSourcePayload."""
    return {"version": "2.4.0.Final", "connector": "TiCDC", "name": cluster, "ts_ms": commit_ts >> 18,
            "snapshot": None, "db": db, "table": table, "server_id": 0, "gtid": None, "file": "", "pos": 0,
            "row": 0, "thread": None, "query": None, "commit_ts": commit_ts, "cluster_id": cluster}


def column_value(col: Column, v: Any, cfg: CodecConfig) -> Any:
    """debeziumAvroFieldValue: the JSON form's value but for binary strings (bytes), DECIMAL (its text),
    BIGINT UNSIGNED (by the handling mode) and FLOAT (the float32, widened when the schema says double)."""
    t = col.type
    if v is None:
        if col.default is None:
            return None
        if t.family is Family.BYTES or t.name == "decimal" or (t.name == "bigint" and t.unsigned):
            v = col.default if isinstance(col.default, (str, bytes, int)) else str(col.default)
    if t.family is Family.BYTES:
        return v if isinstance(v, bytes) else str(v).encode("utf-8")
    if t.name == "decimal":
        return v if isinstance(v, str) else str(v)
    if t.name == "bigint" and t.unsigned:
        iv = int(v)
        if cfg.avro_bigint_unsigned_handling_mode == "string":
            return str(iv)
        if iv > _MAX_LONG:
            raise EncodeError(f"column {col.name}: unsigned bigint value {iv} overflows avro long")
        return iv
    out = field_value(col, v)
    if t.name == "float" and out is not None:
        return to_float32(float(out))
    return out


# --- Avro schemas (avro.go toAvroSchema) ----------------------------------------------------------------
def _full_name(name: str) -> str:
    return ".".join(_sanitize(p) for p in name.split("."))


def _meta(out: dict[str, Any], s: dict[str, Any]) -> None:
    if s.get("name"):
        out["connect.name"] = s["name"]
    if s.get("version"):
        out["connect.version"] = s["version"]
    if s.get("parameters"):
        out["connect.parameters"] = dict(s["parameters"])


def to_avro(s: dict[str, Any], fallback: str = "", defined: set[str] | None = None) -> Any:
    """A Connect schema as TiCDC's Avro schema: a record is defined once, later uses name it."""
    defined = set() if defined is None else defined
    typ = s.get("type")
    if typ == "struct":
        full = _full_name(s.get("name") or fallback or "ConnectDefault")
        if full in defined:
            return full
        defined.add(full)
        ns, _, name = full.rpartition(".")
        rec: dict[str, Any] = {"type": "record", "name": name}
        if ns:
            rec["namespace"] = ns
        _meta(rec, s)
        fields = []
        for f in s.get("fields", []):
            fname = _sanitize(f.get("field", ""))
            ft = to_avro(f, fname, defined)
            field: dict[str, Any] = {"name": fname, "type": ft}
            if f.get("field"):
                field["connect.field"] = f["field"]
            if f.get("tidb_type"):
                field["tidb_type"] = f["tidb_type"]
            if f.get("optional"):
                field["type"], field["default"] = ["null", ft], None
            fields.append(field)
        rec["fields"] = fields
        return rec
    if typ == "array":
        arr: dict[str, Any] = {"type": "array", "items": to_avro(s["items"], fallback + "Item", defined)}
        _meta(arr, s)
        return arr
    if typ == "bytes" and s.get("name") == DECIMAL:
        p = s.get("parameters") or {}
        dec: dict[str, Any] = {"type": "bytes", "logicalType": "decimal", "precision": int(p["precision"]),
                               "scale": int(p["scale"])}
        _meta(dec, s)
        return dec
    avro = _PRIMITIVE.get(typ)  # type: ignore[arg-type]
    if avro is None:
        raise EncodeError(f"unsupported schema type {typ}")
    if not (s.get("name") or s.get("version") or s.get("parameters")) and typ not in ("int8", "int16"):
        return avro
    prim: dict[str, Any] = {"type": avro}
    if typ in ("int8", "int16"):
        prim["connect.type"] = typ
    _meta(prim, s)
    return prim


def schema_text(avro: Any) -> str:
    """The text TiCDC registers: Go's json.Marshal of maps (keys sorted, compact, <>& and U+2028/9 escaped)."""
    return gojson.marshal_std(avro, sort_keys=True)


def without_logical_types(schema: Any) -> Any:
    """The schema with `logicalType` dropped: fastavro then takes and gives the raw bytes / ints."""
    if isinstance(schema, list):
        return [without_logical_types(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    return {k: without_logical_types(v) for k, v in schema.items() if k != "logicalType"}


# --- datums (avro.go toNative, goavro's encodings) -------------------------------------------------------
def decimal_bytes(text: str, scale: int) -> bytes:
    """A decimal's text as goavro writes a big.Rat for `logicalType: decimal` (floored to the scale)."""
    r = Fraction(text)
    return signed_bytes(r.numerator * 10 ** scale // r.denominator)


def to_datum(s: dict[str, Any], v: Any) -> Any:
    """A payload value as the datum of `to_avro(s)` (written with its logical types dropped)."""
    if v is None:
        return None
    typ = s.get("type")
    if typ == "struct":
        if not isinstance(v, dict):
            raise EncodeError("struct payload is not an object")
        out = {}
        for f in s.get("fields", []):
            name = _sanitize(f["field"])
            raw = v.get(f["field"])
            if raw is None and f["field"] != name:
                raw = v.get(name)
            out[name] = to_datum(f, raw)
        return out
    if typ == "array":
        return [to_datum(s["items"], x) for x in v]
    if typ == "bytes":
        if s.get("name") == DECIMAL:
            return decimal_bytes(str(v), int((s.get("parameters") or {}).get("scale", 0)))
        if isinstance(v, str):  # the JSON form's base64 (BIT(n))
            return base64.b64decode(v)
        return bytes(v)
    if typ in ("boolean", "string"):
        if not isinstance(v, bool if typ == "boolean" else str):
            raise EncodeError(f"{typ} payload is invalid: {v!r}")
        return v
    if typ in ("int8", "int16", "int32", "int64"):
        return int(v) if isinstance(v, int) else int(float(v))
    if typ == "float":
        return to_float32(float(v))
    if typ == "double":
        return float(v)
    raise EncodeError(f"unsupported schema type {typ}")
