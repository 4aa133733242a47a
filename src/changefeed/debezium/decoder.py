"""Decoder for Debezium JSON: TiCDC's debezium protocol and the real Debezium MySQL connector.

With a `schema` the column types come from the Value struct (`tidb_type` too when TiCDC's extension is
on); without one they are inferred from the JSON values. Real Debezium has no `commit_ts`: the commit ts
is then `source.ts_ms << 18` (ordering by binlog file/pos/gtid is the consumer's business). A tombstone
(null value after a delete) gives no event.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
import struct
from decimal import Decimal
from typing import Any

import orjson

from ..config import CodecConfig
from ..ddl import action_from_query, drops
from ..errors import DecodeError, field_offset, json_object
from ..model import Column, Event, Index, Kind, Row, TableInfo
from ..mysqltypes import (
    Family,
    canonical_float32,
    name_to_enum_index,
    names_to_set_mask,
    split_escaped_list,
)

_EPOCH = dt.datetime(1970, 1, 1)
_log = logging.getLogger("changefeed.values")
_WARNED: set[tuple[str, str, str]] = set()  # once per column and process: decoders are made again per Spark task
_OPS = {"c": Kind.INSERT, "r": Kind.INSERT, "u": Kind.UPDATE, "d": Kind.DELETE}
_ENVELOPE = frozenset(("op", "ddl", "tableChanges", "status"))  # a payload's own keys: the message is bare


# Connect logical names of real Debezium's temporal columns: the MySQL type each one reads back as
# (`time.precision.mode=adaptive_time_microseconds`, Debezium's default, `adaptive` and `connect`)
_TEMPORAL = {
    "io.debezium.time.Date": "date", "org.apache.kafka.connect.data.Date": "date",
    "io.debezium.time.Timestamp": "datetime(3)", "org.apache.kafka.connect.data.Timestamp": "datetime(3)",
    "io.debezium.time.MicroTimestamp": "datetime(6)", "io.debezium.time.NanoTimestamp": "datetime(6)",
    "io.debezium.time.ZonedTimestamp": "timestamp(6)",
    "io.debezium.time.Time": "time(3)", "org.apache.kafka.connect.data.Time": "time(3)",
    "io.debezium.time.MicroTime": "time(6)", "io.debezium.time.NanoTime": "time(6)",
    # `time.precision.mode=isostring` (Debezium 3.1): ISO-8601 text in UTC, `Z` at its end
    "io.debezium.time.IsoDate": "date", "io.debezium.time.IsoTime": "time(6)",
    "io.debezium.time.IsoTimestamp": "datetime(6)",
}
_ISO = frozenset(("io.debezium.time.IsoDate", "io.debezium.time.IsoTime", "io.debezium.time.IsoTimestamp"))
_DECIMAL = "org.apache.kafka.connect.data.Decimal"  # `decimal.handling.mode=precise`, Debezium's default
# spatial columns: a struct of the value's WKB and its SRID (BinlogValueConverters, io.debezium.data.geometry)
_GEOMETRY = frozenset(("io.debezium.data.geometry.Geometry", "io.debezium.data.geometry.Point",
                       "io.debezium.data.geometry.Geography"))


def _mysql_type(f: dict[str, Any]) -> str:
    tidb = f.get("tidb_type")
    name = f.get("name", "")
    typ = f.get("type")
    params = f.get("parameters") or {}
    temporal = _TEMPORAL.get(name)
    if temporal is not None:
        return temporal
    if name == _DECIMAL:
        scale = int(params.get("scale", 0))
        return f"decimal({max(int(params.get('connect.decimal.precision', 65)), scale, 1)},{scale})"
    if name == "io.debezium.time.Year":
        return "year"
    if name == "io.debezium.data.Bits":
        return f"bit({params.get('length', '64')})"
    if name in ("io.debezium.data.Enum", "io.debezium.data.EnumSet"):
        kind = "enum" if name.endswith("Enum") else "set"
        elems = split_escaped_list(params.get("allowed", ""))
        return f"{kind}(" + ",".join("'" + e.replace("\\", "\\\\").replace("'", "''") + "'" for e in elems) + ")"
    if name == "io.debezium.data.Json":
        return "json"
    if name in _GEOMETRY:
        return "geometry"
    if name == "io.debezium.data.TiDBVectorFloat32":
        return "vector"
    if tidb and tidb.split(" ")[0] in ("tinyint", "smallint", "mediumint", "int", "bigint", "float", "double",
                                        "decimal", "char", "varchar", "binary", "varbinary", "text", "blob",
                                        "tinytext", "mediumtext", "longtext", "tinyblob", "mediumblob", "longblob"):
        return {"decimal": "decimal(65,30)"}.get(tidb, tidb)
    return {"boolean": "bit(1)", "int16": "smallint", "int32": "int", "int64": "bigint", "float": "float",
            "double": "double", "bytes": "blob"}.get(typ, "text")



def _infer(v: Any) -> str:
    if isinstance(v, bool):
        return "bit(1)"
    if isinstance(v, int):
        return "bigint"
    if isinstance(v, float):
        return "double"
    return "text"


# microseconds per unit of each epoch-based (timestamp) and midnight-based (time) logical type
_TS_MICROS = {"io.debezium.time.Timestamp": 1000, "org.apache.kafka.connect.data.Timestamp": 1000,
              "io.debezium.time.MicroTimestamp": 1, "io.debezium.time.NanoTimestamp": 0.001}
_TIME_MICROS = {"io.debezium.time.MicroTime": 1, "io.debezium.time.Time": 1000,
                "org.apache.kafka.connect.data.Time": 1000, "io.debezium.time.NanoTime": 0.001}


def _decimal(v: Any, scale: int) -> str:
    """A Connect Decimal: its unscaled value as big-endian two's-complement bytes (base64 in JSON), or a number
    where the JsonConverter's `decimal.format=NUMERIC` wrote one."""
    if isinstance(v, str):
        unscaled = int.from_bytes(base64.b64decode(v, validate=True), "big", signed=True)
        return format(Decimal(f"{unscaled}e{-scale}"), "f")  # exact: no context rounds a string's digits
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError("a Decimal is base64 bytes or a number")
    return repr(v) if isinstance(v, float) else str(v)


def _datum(col: Column, semantic: str, v: Any, binary_b64: bool) -> Any:
    if v is None:
        return None
    t = col.type
    fam = t.family
    if semantic in ("io.debezium.time.Date", "org.apache.kafka.connect.data.Date"):
        return (dt.date(1970, 1, 1) + dt.timedelta(days=v)).isoformat()
    if semantic == _DECIMAL:
        return _decimal(v, t.scale or 0)
    per = _TS_MICROS.get(semantic)
    if per is not None:
        micros = v * per if per >= 1 else v // 1000
        t_ = _EPOCH + dt.timedelta(microseconds=micros)
        frac = f"{t_.microsecond:06d}"[: t.fsp] if t.fsp else ""
        return t_.strftime("%Y-%m-%d %H:%M:%S") + (f".{frac}" if frac else "")
    if semantic == "io.debezium.time.ZonedTimestamp":
        body = v.rstrip("Z").replace("T", " ")
        return body
    if semantic in _GEOMETRY:
        wkb = v.get("wkb") if isinstance(v, dict) else None
        if not isinstance(wkb, str | bytes):
            raise TypeError("a geometry is a struct with its wkb")
        # as MySQL stores it (and the binlog gives it): the SRID, 4 bytes little-endian, then the WKB (base64 in
        # JSON, bytes in Avro)
        return struct.pack("<I", v.get("srid") or 0) + (wkb if isinstance(wkb, bytes) else
                                                        base64.b64decode(wkb, validate=True))
    if semantic in _ISO and isinstance(v, str):
        return v.removesuffix("Z").removesuffix("+00:00").replace("T", " ")
    per = _TIME_MICROS.get(semantic)
    if per is not None:
        v = v * per if per >= 1 else int(v / 1000)  # nanoseconds: truncated toward zero, as MySQL's TIME is
        neg = v < 0
        a = abs(v)
        s, us = divmod(a, 1_000_000)
        h, rem = divmod(s, 3600)
        m, sec = divmod(rem, 60)
        out = f"{'-' if neg else ''}{h:02d}:{m:02d}:{sec:02d}"
        return out + (f".{us:06d}" if us else "")
    if fam is Family.BIT:
        if isinstance(v, bool):
            return int(v)
        return int.from_bytes(base64.b64decode(v), "little")
    if fam is Family.ENUM:
        return name_to_enum_index(t, v)
    if fam is Family.SET:
        return names_to_set_mask(t, v)
    if fam is Family.BYTES:
        return base64.b64decode(v) if binary_b64 and isinstance(v, str) else v
    if t.name == "decimal":
        return repr(v) if isinstance(v, float) else str(v)
    if t.name == "float":
        return canonical_float32(v)
    if fam is Family.INT:
        return v & ((1 << 64) - 1) if t.unsigned and v < 0 else v
    return v


def _maybe_unsigned(fields: list[dict] | None, known: TableInfo | None) -> frozenset[str]:
    """The int64 columns whose MySQL type nothing says: no `tidb_type` (TiCDC's extension is off), no
    definition from a schema-change message. A BIGINT UNSIGNED value above 2^63 arrives there wrapped negative
    (TiCDC writes int64), and the consumer cannot tell it from a signed one."""
    if known is not None and known.columns or fields is None:  # without a schema every integer is a guess
        return frozenset()
    return frozenset(f["field"] for f in fields
                     if f.get("type") == "int64" and not f.get("name") and not f.get("tidb_type"))


def _warn_wrapped(t: TableInfo, unsure: frozenset[str], *images: Any) -> None:
    """One warning line per column (and process) when a negative value comes in a column that may be BIGINT
    UNSIGNED: it is kept as it came, and the line says why it may be wrong and how to know."""
    for img in images:
        if not isinstance(img, dict):
            continue
        for name in unsure:
            v = img.get(name)
            if isinstance(v, int) and not isinstance(v, bool) and v < 0:
                key = (t.schema, t.table, name)
                if key not in _WARNED:
                    _WARNED.add(key)
                    _log.warning("column %s.%s.%s: %d arrived as a negative int64 in a debezium stream without TiDB's "
                                 "extension; if the column is BIGINT UNSIGNED it is %d (TiCDC writes values above "
                                 "2^63 wrapped): enable-tidb-extension=true, or the table's DDL in the stream, "
                                 "carries the column's type", t.schema, t.table, name, v, v + (1 << 64))


def _truncate(src: dict[str, Any], ts: int) -> Event:
    """A truncate event as the DDL it was: the lake empties the table as it does for TiCDC's TRUNCATE TABLE."""
    db, table = src.get("db"), src.get("table")
    if not isinstance(db, str) or not isinstance(table, str) or not db or not table:
        raise DecodeError("a truncate event without its source.db and source.table", field="payload.source")
    query = "TRUNCATE TABLE " + ".".join("`" + n.replace("`", "``") + "`" for n in (db, table))
    return Event(kind=Kind.DDL, commit_ts=ts, query=query, ddl_type=action_from_query(query),
                 table=TableInfo(schema=db, table=table))


# type names Debezium keeps as the statement wrote them (its DDL parser registers each): the length and scale it
# gives apply as to the type they stand for
_SYNONYMS = {"numeric": "decimal", "dec": "decimal", "fixed": "decimal", "integer": "int", "real": "double",
             "character": "char"}


def _ddl_column(c: dict[str, Any]) -> Column:
    """A column of a schema-change message back to a MySQL column type."""
    expr = (c.get("typeExpression") or c.get("typeName") or "text").lower()
    words = expr.split()
    base, attrs = words[0], " ".join(words[1:])
    base = _SYNONYMS.get(base.split("(")[0], base.split("(")[0])
    length, scale = c.get("length"), c.get("scale")
    if base in ("enum", "set") and c.get("enumValues"):
        text = f"{base}({','.join(c['enumValues'])})"
    elif base == "decimal" and length:
        text = f"decimal({length},{int(scale or 0)})"
    elif base in ("float", "double") and length:
        # FLOAT(p) above 24 bits is a DOUBLE, as Debezium's converter takes it (BinlogValueConverters)
        if scale is not None:
            text = f"{base}({length},{int(scale)})"
        else:
            text = "double" if base == "double" or int(length) > 24 else "float"
    elif base in ("datetime", "timestamp", "time") and length:
        text = f"{base}({length})"
    elif base in ("char", "varchar", "binary", "varbinary", "bit", "tinyint", "smallint", "mediumint", "int",
                  "bigint", "year") and length:
        text = f"{base}({length})"
    else:
        text = base
    if attrs:
        text += " " + attrs
    return Column(name=c["name"], mysql_type=text, charset=c.get("charsetName"), nullable=bool(c.get("optional")),
                  default=c.get("defaultValueExpression"), auto_increment=bool(c.get("autoIncremented")),
                  comment=c.get("comment"))


HEARTBEAT = "io.debezium.connector.common.Heartbeat"


def _in_snapshot(src: Any) -> bool:
    """Whether a message's source block says a snapshot wrote it (`snapshot`: "true", "first", "last", ...)."""
    if not isinstance(src, dict):
        return False
    snap = src.get("snapshot")
    return snap not in (None, False, "false")


class DebeziumDecoder:
    def __init__(self, config: CodecConfig | None = None) -> None:
        self.config = config or CodecConfig(protocol="debezium")
        self._tables: dict[tuple, tuple[TableInfo, dict[str, str]]] = {}
        self._known: dict[tuple[str, str], TableInfo] = {}  # definitions from schema-change messages
        self._unsure: dict[int, frozenset[str]] = {}  # per table: int64 columns that may be BIGINT UNSIGNED

    def remember(self, t: TableInfo) -> None:
        """A definition from earlier DDL: its MySQL types (unsigned, enum members) refine the Connect schema's."""
        if t.columns:
            self._known[(t.schema, t.table)] = t

    def _table(self, db: str, table: str, fields: list[dict] | None, sample: dict[str, Any], keys: list[str]
               ) -> tuple[TableInfo, dict[str, str]]:
        known = self._known.get((db, table))
        sig = (db, table, orjson.dumps(fields) if fields else tuple(sample), tuple(keys), id(known))
        cached = self._tables.get(sig)
        if cached is not None:
            return cached
        semantics: dict[str, str] = {}
        cols = []
        if fields:
            for f in fields:
                semantics[f["field"]] = f.get("name", "")
                col = Column(name=f["field"], mysql_type=_mysql_type(f), nullable=bool(f.get("optional")),
                             primary_key=f["field"] in keys)
                k = known.by_name.get(col.name) if known is not None else None
                if k is not None and k.type.family is col.type.family and k.mysql_type != col.mysql_type:
                    # the DDL's type says what the Connect schema cannot (BIGINT UNSIGNED travels as int64)
                    col = Column(name=col.name, mysql_type=k.mysql_type, charset=k.charset, collate=k.collate,
                                 nullable=col.nullable, primary_key=col.primary_key)
                cols.append(col)
        else:
            cols = [Column(name=n, mysql_type=_infer(v), primary_key=n in keys) for n, v in sample.items()]
        t = TableInfo(schema=db, table=table, columns=cols,
                      indexes=[Index("PRIMARY", list(keys), primary=True, unique=True)] if keys else [])
        self._unsure[id(t)] = _maybe_unsigned(fields, known)
        self._tables[sig] = (t, semantics)
        return t, semantics

    def _ddl(self, payload: dict[str, Any]) -> Event:
        src = payload.get("source") or {}
        ts = src.get("commit_ts") or ((src.get("ts_ms") or 0) << 18)
        db = payload.get("databaseName") or src.get("db") or ""
        query = payload.get("ddl") or ""
        ev = Event(kind=Kind.DDL, commit_ts=ts, query=query, ddl_type=action_from_query(query))
        changes = payload.get("tableChanges") or []
        table_name = src.get("table") or ""
        after = None
        if changes and isinstance(changes[0], dict):
            ident = changes[0].get("id") or ""
            parts = [p.strip('"') for p in ident.split(",")[-1].split(".")]
            if len(parts) == 2:
                db, table_name = parts
            tbl = changes[0].get("table")
            if isinstance(tbl, dict):
                cols = [_ddl_column(c) for c in tbl.get("columns") or []]
                pk = list(tbl.get("primaryKeyColumnNames") or [])
                for c in cols:
                    c.primary_key = c.name in pk
                after = TableInfo(schema=db, table=table_name, columns=cols, charset=tbl.get("defaultCharsetName"),
                                  indexes=[Index("PRIMARY", pk, primary=True, unique=True)] if pk else [])
        if after is not None:
            ev.table = after
            self.remember(after)
        elif drops(ev.ddl_type):
            ev.pre_table = TableInfo(schema=db, table=table_name)
        else:
            ev.table = TableInfo(schema=db, table=table_name)
        return ev

    def decode(self, value: bytes | None, key: bytes | None = None) -> list[Event]:
        if value is None:
            return []  # a tombstone: the delete before it already said everything
        msg = json_object(value, "a Debezium message")
        schema = msg.get("schema")
        if schema is None and "payload" in msg and msg["payload"] is None:
            return []  # a tombstone as Kafka Connect's JsonConverter wrote it before Kafka 2.2 (KAFKA-3832)
        if (isinstance(schema, dict) and schema.get("name") == HEARTBEAT) or msg.keys() == {"ts_ms"}:
            return []  # a heartbeat (`heartbeat.interval.ms`; with `schemas.enable=false` its payload alone)
        # without the envelope (the JsonConverter's `schemas.enable=false`) the message is the payload itself
        payload = msg["payload"] if "payload" in msg else msg if not _ENVELOPE.isdisjoint(msg) else None
        if not isinstance(payload, dict):
            raise DecodeError("missing payload", field="payload", offset=0)
        if "ddl" in payload or "tableChanges" in payload:
            ddl = self._ddl(payload)
            if drops(ddl.ddl_type) and _in_snapshot(payload.get("source")):
                # a snapshot's DROP ... IF EXISTS before it writes the table's CREATE again (Debezium's
                # BinlogSnapshotChangeEventSource): schema history, not a change; the CREATE then stands for the
                # table as the snapshot found it (a lake table's columns reconciled, its rows kept)
                return []
            return [ddl]
        if payload.get("status") in ("BEGIN", "END") and "op" not in payload and "source" not in payload:
            return []  # Debezium's transaction metadata (`provide.transaction.metadata`): a boundary, no change
        op = payload.get("op")
        src = payload.get("source")
        if not isinstance(src, dict):
            raise DecodeError("missing source", field="payload.source", offset=field_offset(value, "source"))
        ts = src.get("commit_ts")
        if ts is None:
            ts = (src.get("ts_ms") or 0) << 18
        if op == "m":
            return [Event(kind=Kind.WATERMARK, commit_ts=ts)]
        if op == "t":  # real Debezium's truncate event (`skipped.operations` leaves it out by default)
            return [_truncate(src, ts)]
        kind = _OPS.get(op)  # type: ignore[arg-type]
        if kind is None:
            raise DecodeError(f"unknown op {op!r}: expected c, r, u, d, t or m", field="payload.op",
                              offset=field_offset(value, "op"))
        keys: list[str] = []
        if key is None and src.get("connector") == "TiCDC":
            raise DecodeError(f"a TiCDC {op!r} message without its key (TiCDC always writes one)", field="key")
        if key is not None:
            try:
                k = orjson.loads(key)
            except orjson.JSONDecodeError as e:
                raise DecodeError(f"key is not JSON: {e.msg}", field="key", offset=e.pos) from None
            keys = list((k.get("payload") if isinstance(k, dict) and "payload" in k else k) or {})
        elif kind is not Kind.INSERT:
            pass
        fields = None
        if isinstance(schema, dict):
            for f in schema.get("fields", []):
                if f.get("field") in ("after", "before") and f.get("fields"):
                    fields = f["fields"]
                    break
        before, after = payload.get("before"), payload.get("after")
        sample = after if isinstance(after, dict) else before if isinstance(before, dict) else None
        if sample is None:
            raise DecodeError(f"op {op!r} without a row image", field="payload.after",
                              offset=field_offset(value, "after"))
        if fields is not None:
            names = {f["field"] for f in fields}
            for img_name, img in (("before", before), ("after", after)):
                if isinstance(img, dict):
                    extra = set(img) - names
                    if extra:
                        raise DecodeError(f"payload does not match its schema: {sorted(extra)} not in the Value struct",
                                          field=f"payload.{img_name}", offset=field_offset(value, img_name))
        t, semantics = self._table(src.get("db", ""), src.get("table", ""), fields, sample, keys)
        b64 = src.get("connector") == "TiCDC" or fields is not None
        unsure = self._unsure.get(id(t))
        if unsure:
            _warn_wrapped(t, unsure, before, after)

        def row(img: Any, name: str) -> Row | None:
            if img is None:
                return None
            if not isinstance(img, dict):
                raise DecodeError("expected an object", field=f"payload.{name}")
            out: Row = {}
            for n, v in img.items():
                col = t.by_name.get(n)
                if col is None:
                    raise DecodeError(f"column {n!r} not in {t.qualified}", field=f"payload.{name}.{n}")
                try:
                    out[n] = _datum(col, semantics.get(n, ""), v, b64)
                except (ValueError, TypeError, OverflowError) as e:
                    raise DecodeError(f"bad value {v!r}: {e}", field=f"payload.{name}.{n}") from None
            return out

        ev = Event(kind=kind, commit_ts=ts, table=t)
        start = src.get("start_ts")
        if type(start) is int and 0 < start < 1 << 64:  # ticdc's debezium-include-start-ts
            ev.start_ts = start
        if src.get("commit_ts") is None:
            # real Debezium: no TSO; the binlog position orders the changes (ts_ms only to the millisecond)
            ev.position = {k: src.get(k) for k in ("server_id", "gtid", "file", "pos", "row", "ts_ms")
                           if src.get(k) is not None}
        if kind is not Kind.INSERT:
            ev.before = row(before, "before")
            if ev.before is None and kind is Kind.UPDATE:
                ev.before = {k: v for k, v in (row(after, "after") or {}).items() if k in keys}
        if kind is not Kind.DELETE:
            ev.after = row(after, "after")
        if kind is Kind.DELETE and ev.before is None:
            raise DecodeError("a delete without its before image", field="payload.before")
        return [ev]
