"""The Kafka Connect schemas of debezium messages: the `schema` half of each key and value.

Split from the encoder because building schemas is its own concern: per column, real Debezium's MySQL
type mapping with TiCDC's defaults (`field_schema`); per message, the key struct, the row Envelope and the
constant `source` struct. The encoder's object path, its fast row path (rowplan) and the DDL messages use them.
"""

from __future__ import annotations

from typing import Any

from ..model import Column
from ..mysqltypes import Family, escape_enum_option
from .jsonnum import go_json_float
from .jsonnum import raw_number as _num
from .values import _bit_default, _bits_le, _date_days, _datetime_value, _default_text, _time_micros, _timestamp_value


def field_schema(col: Column, tidb_extension: bool) -> dict[str, Any]:
    """One column's Connect field schema (with `tidb_type` first under the TiDB extension)."""
    t = col.type
    fam = t.family
    out: dict[str, Any] = {}
    if tidb_extension:
        out["tidb_type"] = tidb_type(col)
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
                   parameters={"allowed": ",".join(escape_enum_option(e) for e in t.elements)}, field=name)
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
    if fam is Family.VECTOR:  # TiCDC's own name (no version): the vector's text, "[1,2.5]"
        out.update(type="string", optional=optional, name="io.debezium.data.TiDBVectorFloat32", field=name)
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


def tidb_type(col: Column) -> str:
    """The column's type as the TiDB extension's `tidb_type` names it."""
    t = col.type
    if t.name in ("year", "bit", "varchar", "char", "binary", "varbinary", "decimal") or not t.unsigned:
        return t.name
    return t.name + " unsigned"


def key_schema(base: str, fields: list[dict[str, Any]]) -> dict[str, Any]:
    """The key's struct, `<base>.Key`, of the given field schemas."""
    return {"type": "struct", "name": f"{base}.Key", "optional": False, "fields": fields}


def envelope(base: str, fields: list[dict[str, Any]], start_ts: bool = False) -> dict[str, Any]:
    """A row value's `<base>.Envelope`: before/after structs of the given field schemas, source (declaring
    `start_ts` last with ticdc's debezium-include-start-ts), op, ts_ms, ..."""
    return {
        "type": "struct", "optional": False, "name": f"{base}.Envelope", "version": 1,
        "fields": [
            {"type": "struct", "optional": True, "name": f"{base}.Value", "field": "before", "fields": fields},
            {"type": "struct", "optional": True, "name": f"{base}.Value", "field": "after", "fields": fields},
            SOURCE_SCHEMA_START_TS if start_ts else SOURCE_SCHEMA,
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
            TRANSACTION_SCHEMA,
        ],
    }


# the envelope's `transaction` block (Debezium's event.block; always null in TiCDC's payloads)
TRANSACTION_SCHEMA: dict[str, Any] = {
    "type": "struct", "fields": [
        {"type": "string", "optional": False, "field": "id"},
        {"type": "int64", "optional": False, "field": "total_order"},
        {"type": "int64", "optional": False, "field": "data_collection_order"}],
    "optional": True, "name": "event.block", "version": 1, "field": "transaction"}


def watermark_envelope(base: str) -> dict[str, Any]:
    """A watermark value's Envelope: a row's without before and after."""
    env = envelope(base, [])
    env["fields"] = env["fields"][2:3] + [env["fields"][3], env["fields"][4], env["fields"][5]]
    return env


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
SOURCE_SCHEMA_START_TS: dict[str, Any] = {**SOURCE_SCHEMA,
                                          "fields": [*SOURCE_SCHEMA["fields"], _f("int64", False, "start_ts")]}
