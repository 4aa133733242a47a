"""Decoder for the avro protocol: Confluent-framed key/value, schemas fetched from the registry by id.

The table definition comes from the writer schema (field names, `connect.parameters.tidb_type`, decimal
precision/scale, enum/set `allowed`, bit `length`). Lossy: INT covers tinyint..int, TEXT/BLOB every
string/binary type, nullability is the field's union; without the TiDB extension there is no commit ts
and no insert/update distinction (rows come back as inserts, i.e. upserts).
"""

from __future__ import annotations

import base64
import io
import json
import struct
from decimal import Decimal
from typing import Any

import fastavro
import orjson

from ..checksum import mismatches
from ..config import CodecConfig
from ..ddl import ACTIONS
from ..errors import DecodeError
from ..model import Column, Event, Index, Kind, Row, RowChecksum, TableInfo
from ..mysqltypes import (
    Family,
    ValueError_,
    canonical_float32,
    name_to_enum_index,
    names_to_set_mask,
    split_escaped_list,
)
from .registry import SchemaRegistry, SchemaRegistryError

_MASK64 = (1 << 64) - 1
_ACTION_NAMES = {v: k for k, v in ACTIONS.items()}
_EXT = ("_tidb_op", "_tidb_commit_ts", "_tidb_commit_physical_time", "_tidb_row_level_checksum",
        "_tidb_corrupted", "_tidb_checksum_version", "_ticdc_before")


def _column_from_field(f: dict[str, Any]) -> Column:
    t = f["type"]
    nullable = isinstance(t, list)
    if nullable:
        t = next(x for x in t if x != "null")
    params = t.get("connect.parameters", {}) if isinstance(t, dict) else {}
    tt = params.get("tidb_type", "")
    avro_t = t.get("type") if isinstance(t, dict) else t
    if tt == "DECIMAL":
        mysql = f"decimal({t.get('precision', 10)},{t.get('scale', 0)})" if t.get("logicalType") else "decimal(65,30)"
    elif tt in ("ENUM", "SET"):
        elems = split_escaped_list(params.get("allowed", ""))
        mysql = f"{tt.lower()}(" + ",".join("'" + e.replace("\\", "\\\\").replace("'", "''") + "'"
                                            for e in elems) + ")"
    elif tt == "BIT":
        mysql = f"bit({params.get('length', '1')})"
    elif tt in ("INT", "INT UNSIGNED", "BIGINT", "BIGINT UNSIGNED"):
        mysql = tt.lower()
    else:
        mysql = {"FLOAT": "float", "DOUBLE": "double", "TEXT": "text", "BLOB": "blob", "JSON": "json",
                 "DATE": "date", "DATETIME": "datetime(6)", "TIMESTAMP": "timestamp(6)", "TIME": "time(6)",
                 "YEAR": "year", "TiDBVECTORFloat32": "vector"}.get(tt) or (
            "blob" if avro_t == "bytes" else "bigint" if avro_t == "long" else "int" if avro_t == "int"
            else "double" if avro_t == "double" else "float" if avro_t == "float" else "text")
    default = f.get("default")
    if avro_t == "bytes" and isinstance(default, str):  # Go's json.Marshal of []byte: base64
        try:
            raw = base64.b64decode(default, validate=True)
        except ValueError:
            raw = None
        if raw is not None:  # a BIT's big-endian bytes; a binary string's own (as the encoder reads them)
            default = int.from_bytes(raw, "big") if tt == "BIT" else _bytes_text(raw)
    return Column(name=f["name"], mysql_type=mysql, nullable=nullable,
                  default=default if not isinstance(default, dict | list) else None)


def _bytes_text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")



def _datum(col: Column, v: Any) -> Any:
    if v is None:
        return None
    t = col.type
    fam = t.family
    if fam is Family.INT:
        if isinstance(v, str):
            return int(v)
        return v & _MASK64 if t.unsigned and v < 0 else v
    if fam is Family.BIT:
        return int.from_bytes(v, "big") if isinstance(v, bytes) else int(v)
    if t.name == "decimal":
        return format(v, "f") if isinstance(v, Decimal) else str(v)
    if t.name == "float":
        return canonical_float32(v)
    if fam is Family.ENUM:
        return name_to_enum_index(t, v)
    if fam is Family.SET:
        return names_to_set_mask(t, v)
    return v


class AvroDecoder:
    def __init__(self, config: CodecConfig, registry: SchemaRegistry) -> None:
        self.config = config
        self.registry = registry
        self._schemas: dict[int, Any] = {}
        self._tables: dict[tuple, TableInfo] = {}

    def _schema(self, schema_id: int, fld: str) -> tuple[Any, dict[str, Any]]:
        cached = self._schemas.get(schema_id)
        if cached is None:
            try:
                text = self.registry.schema(schema_id)
            except SchemaRegistryError as e:
                raise DecodeError(f"schema id {schema_id} not found in the registry: {e}", field=fld,
                                  offset=1) from None
            raw = json.loads(text)
            cached = (fastavro.parse_schema(raw), raw)
            self._schemas[schema_id] = cached
        return cached

    def _read(self, payload: bytes, fld: str) -> tuple[int, dict[str, Any], dict[str, Any]]:
        if len(payload) < 5 or payload[0] != 0:
            raise DecodeError("not in the Confluent wire format (magic byte 0, 4-byte schema id)", field=fld,
                              offset=0)
        sid = struct.unpack(">I", payload[1:5])[0]
        parsed, raw = self._schema(sid, fld)
        buf = io.BytesIO(payload[5:])
        try:
            rec = fastavro.schemaless_reader(buf, parsed, None)
        except Exception as e:  # noqa: BLE001 - any failure here is a message that does not fit its schema
            raise DecodeError(f"does not match its writer schema {sid}: {e}", field=fld,
                              offset=5 + buf.tell()) from None
        return sid, raw, rec  # type: ignore[return-value]

    def _table(self, key_id: int | None, key_raw: dict | None, value_id: int | None, value_raw: dict | None,
               schema_name: str) -> TableInfo:
        ck = (key_id, value_id)
        t = self._tables.get(ck)
        if t is not None:
            return t
        src = value_raw or key_raw or {}
        cols = [_column_from_field(f) for f in src.get("fields", []) if f["name"] not in _EXT]
        keys = [f["name"] for f in (key_raw or {}).get("fields", [])]
        for c in cols:
            if c.name in keys:
                c.primary_key = True
                c.nullable = False
        ns = src.get("namespace", "")
        schema = ns.split(".", 1)[1] if "." in ns else schema_name
        t = TableInfo(schema=schema, table=src.get("name", ""), columns=cols,
                      indexes=[Index("PRIMARY", keys, primary=True, unique=True)] if keys else [])
        self._tables[ck] = t
        return t

    def _row(self, t: TableInfo, rec: dict[str, Any], fld: str) -> Row:
        row: Row = {}
        for name, v in rec.items():
            if name in _EXT:
                continue
            col = t.by_name.get(name)
            if col is None:
                raise DecodeError(f"field {name!r} is not a column of {t.qualified}", field=f"{fld}.{name}")
            try:
                row[name] = _datum(col, v)
            except (ValueError, TypeError) as e:
                raise DecodeError(f"bad value {v!r}: {e}", field=f"{fld}.{name}") from None
        return row

    def _verify(self, t: TableInfo, rec: dict[str, Any], row: Row, ts: int, *, previous: bool = False
                ) -> RowChecksum | None:
        """Check `_tidb_row_level_checksum` against the row (TiCDC's avro decoder: VerifyChecksum; `previous`: a
        delete's, the checksum of the row before it).

        Empty or absent: no checksum. TIMESTAMP values are taken in the configured time-zone (TiCDC's
        consumer: its local zone), which must be the changefeed's. A row TiCDC marked `_tidb_corrupted`, or
        whose values do not give the checksum, is an error: dead-lettered, never applied.
        """
        text = rec.get("_tidb_row_level_checksum")
        if not text:
            return None
        where = f"{t.qualified} at commitTs {ts}"
        fld = "_tidb_row_level_checksum"
        try:
            want = int(text)
            if not 0 <= want < 1 << 64:
                raise ValueError(text)
        except (TypeError, ValueError):
            raise DecodeError(f"{text!r} is not an unsigned integer", field=fld) from None
        side = "previous" if previous else "current"
        cs = RowChecksum(**{side: want & 0xFFFFFFFF}, version=rec.get("_tidb_checksum_version") or 0,
                         corrupted=bool(rec.get("_tidb_corrupted")))
        if cs.corrupted:
            raise DecodeError(f"row marked corrupted by TiCDC (_tidb_corrupted) for {where}", field="_tidb_corrupted")
        try:
            bad = mismatches(t, ((side, row, want),), self.config.time_zone)
        except ValueError_ as e:
            raise DecodeError(f"cannot compute the row checksum for {where}: {e}", field=fld) from None
        if bad is not None:
            raise DecodeError(f"row checksum mismatch for {where}: {fld} is {want}, the row gives {bad[2]}",
                              field=fld)
        return cs

    def decode(self, value: bytes | None, key: bytes | None = None) -> list[Event]:
        if value is not None and value[:1] == b"\x02" and len(value) == 9:
            return [Event(kind=Kind.WATERMARK, commit_ts=struct.unpack(">Q", value[1:])[0])]
        if value is not None and value[:1] == b"\x01":
            try:
                d = orjson.loads(value[1:])
            except orjson.JSONDecodeError as e:
                raise DecodeError(f"DDL message is not JSON: {e.msg}", field="value", offset=1 + e.pos) from None
            t = TableInfo(schema=d.get("schema", ""), table=d.get("table", ""))
            return [Event(kind=Kind.DDL, commit_ts=d.get("commitTs", 0), query=d.get("query", ""),
                          ddl_type=_ACTION_NAMES.get(d.get("type"), "ActionNone"), table=t)]
        if key is None and value is None:
            raise DecodeError("an avro message needs a key or a value", field="key")
        kid = kraw = krec = None
        if key is not None:
            kid, kraw, krec = self._read(key, "key")
        if value is None or value[:1] == b"\x03":
            if krec is None:
                raise DecodeError("a tombstone (delete) without a key cannot say which row it deletes", field="key")
            if value is not None and len(value) != 9:  # ticdc: 0x03 + the commit ts, 8 bytes big-endian
                raise DecodeError(f"a delete marker is 0x03 and an 8-byte commit ts, not {len(value)} bytes",
                                  field="value", offset=min(len(value), 1))
            t = self._table(kid, kraw, None, None, "")
            ts = struct.unpack(">Q", value[1:9])[0] if value else 0
            return [Event(kind=Kind.DELETE, commit_ts=ts, table=t, before=self._row(t, krec, "key"))]
        vid, vraw, vrec = self._read(value, "value")
        t = self._table(kid, kraw, vid, vraw, "")
        op = vrec.get("_tidb_op")
        ts = vrec.get("_tidb_commit_ts") or 0
        kind = Kind.UPDATE if op == "u" else Kind.DELETE if op == "d" else Kind.INSERT
        row = self._row(t, vrec, "value")
        if kind is Kind.DELETE:  # a full value (avro-include-before-value): its checksum is the old row's
            ev = Event(kind=kind, commit_ts=ts & _MASK64, table=t, before=row)
            ev.checksum = self._verify(t, vrec, row, ev.commit_ts, previous=True)
            return [ev]
        ev = Event(kind=kind, commit_ts=ts & _MASK64, table=t, after=row)
        ev.checksum = self._verify(t, vrec, row, ev.commit_ts)
        if kind is Kind.UPDATE:
            old = vrec.get("_ticdc_before")  # ticdc's avro-include-before-value
            if isinstance(old, dict):
                ev.before = self._row(t, old, "value._ticdc_before")
            else:  # no before image: only the key is known (it cannot change without a split)
                ev.before = self._row(t, krec, "key") if krec is not None else {}
        return [ev]
