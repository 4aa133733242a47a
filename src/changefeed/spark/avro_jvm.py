"""The avro protocol decoded on the JVM: Spark's `from_avro` with each writer schema from the registry.

Per micro-batch, the driver collects the distinct (key schema id, value schema id) pairs of the row messages
(`0x00` + 4-byte id + body), fetches each schema once, and builds one projection in which every pair's rows
are read by `from_avro` with that pair's schemas: no Python per message. Images hold the text the Python
decoder gives them (`types.text_of`), but for FLOAT and DOUBLE, written by Java (`1.0E-5`, not `1e-05`):
the same value once `typed()` reads it.

Everything else goes through the Python decoder (`decode.py`) in the same micro-batch, so a bad message
still becomes a dead letter with its bytes and the reason: DDL and watermarks (magic bytes 0x01/0x02),
tombstones and 0x03 deletes (their table needs the key schema alone), unknown schema ids, bytes that do not
fit their schema, values the JVM cannot render as Python does (BIT wider than 64, DECIMAL wider than 38
digits, a malformed BIGINT UNSIGNED string). As in the Python decoder, a row carries its table definition
only where its partition first shows that definition in the batch; a definition also seen in a message
the Python decoder takes is left to Python in that partition, so it is still written exactly once.

Measured on this project's VM, this path is slower than the Python decoder (see bench/RESULTS.md):
collecting the schema ids and building the plan take a good part of it (each batch pays them), and the rows
are read twice (the JVM rows, then the rest for Python, each running from_avro), so it is not the default.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from ..avro.decoder import _EXT, AvroDecoder
from ..avro.registry import SchemaRegistry
from ..codecs import registry_tls_args
from ..config import ConfigError, build_config
from ..errors import DecodeError
from ..eventline import table_to_json
from ..model import Column, TableInfo
from ..mysqltypes import Family
from .decode import decode
from .objectstore import SchemaFolder

if TYPE_CHECKING:
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import DataFrame

_TWO64 = "18446744073709551616BD"
_SEP = "\u0000"
# one decoder (schema and table caches) per registry: an id's schema never changes in a registry
_DECODERS: dict[str, AvroDecoder] = {}


def _decoder(options: dict[str, str] | None) -> AvroDecoder:
    """The driver's decoder: the Python decoder's schema lookups and table definitions, cached."""
    cfg = build_config("avro", dict(options or {}))
    if not cfg.schema_registry:
        raise ConfigError("protocol avro needs a schema registry: schema-registry=http://host:port")
    d = _DECODERS.get(cfg.schema_registry)
    if d is None:
        registry = SchemaRegistry(cfg.schema_registry, **registry_tls_args(cfg))
        d = _DECODERS[cfg.schema_registry] = AvroDecoder(cfg, registry)
    return d


@dataclass
class _Pair:
    """Rows with one (key schema id, value schema id): their table and how the JVM reads them."""

    index: int
    key_head: bytes | None
    value_head: bytes
    table: TableInfo | None = None
    key_schema: str | None = None
    value_schema: str = ""
    key_fields: list[dict[str, Any]] = field(default_factory=list)
    value_fields: list[dict[str, Any]] = field(default_factory=list)
    jvm: bool = True
    skip: set[tuple[str, int]] = field(default_factory=set)  # partitions whose rows of this pair go to Python


def _avro_type(f: dict[str, Any]) -> tuple[Any, bool]:
    """A field's type without its null branch, and whether it is nullable."""
    t = f["type"]
    if isinstance(t, list):
        return next(x for x in t if x != "null"), True
    return t, False


def _fits_spark(fields: list[dict[str, Any]]) -> bool:
    """Spark's from_avro refuses a decimal of more than 38 digits (the whole schema, not just the value)."""
    for f in fields:
        t, _ = _avro_type(f)
        if isinstance(t, dict) and t.get("logicalType") == "decimal" and int(t.get("precision", 0)) > 38:
            return False
    return True


def _witness(fields: list[dict[str, Any]]) -> str | None:
    """A field that is never null once read: from_avro's PERMISSIVE mode gives all nulls for bad bytes."""
    return next((f["name"] for f in fields if not isinstance(f["type"], list)), None)


def _text(col: Column, f: dict[str, Any], v: SparkColumn) -> tuple[SparkColumn, SparkColumn] | None:
    """The image text of a read field (what `text_of` gives for the Python decoder's datum) and a condition
    the value must meet for that text to be the Python decoder's; None: the JVM cannot."""
    from pyspark.sql import functions as F

    t, _ = _avro_type(f)
    avro = t.get("type") if isinstance(t, dict) else t
    logical = t.get("logicalType") if isinstance(t, dict) else None
    ct = col.type
    fam = ct.family
    yes = F.lit(True)
    if logical == "decimal" and avro == "bytes":
        return v.cast("string"), yes
    if logical is not None:
        return None
    if avro in ("int", "long"):
        if ct.unsigned:  # the Python decoder takes a negative long as its uint64 (Go's int64(uint64) wrap)
            return F.when(v < 0, (v.cast("decimal(20,0)") + F.expr(_TWO64)).cast("string")) \
                .otherwise(v.cast("string")), yes
        return v.cast("string"), yes
    if avro in ("float", "double"):
        return v.cast("string"), yes
    if avro == "bytes":
        if fam is Family.BIT:  # minimal big-endian bytes to the unsigned integer
            return F.when(F.length(v) == 0, F.lit("0")).otherwise(F.conv(F.hex(v), 16, 10)), \
                v.isNull() | (F.length(v) <= 8)
        if fam is Family.BYTES:  # Spark's base64 breaks lines every 76 characters; Python's does not
            return F.regexp_replace(F.base64(v), "\r\n", ""), yes
        return None
    if avro != "string":
        return None
    if fam is Family.INT:  # BIGINT UNSIGNED as a string: Python's int() then str(); canonical text only
        return v, v.isNull() | v.rlike("^(0|-?[1-9][0-9]*)$")
    if fam in (Family.ENUM, Family.SET) and not ct.elements:
        return None
    if fam is Family.ENUM:  # a name that is not a member is MySQL's error value, index 0: ''
        return F.when(v.isNull(), F.lit(None).cast("string")).when(
            v.isin(*ct.elements), v).otherwise(F.lit("")), yes
    if fam is Family.SET:  # members only, each once, in definition order (array_join skips the nulls)
        parts = F.split(v, ",", -1)
        picked = F.array(*[F.when(F.array_contains(parts, F.lit(e)), F.lit(e)) for e in ct.elements])
        return F.when(v.isNull() | (v == ""), v).otherwise(F.array_join(picked, ",")), yes
    if fam in (Family.FLOAT, Family.DECIMAL, Family.BIT, Family.BYTES):
        return None
    return v, yes


def _image(t: TableInfo, fields: list[dict[str, Any]], rec: SparkColumn) -> tuple[SparkColumn, SparkColumn] | None:
    """The text map of a record read by from_avro, and the condition its values must meet."""
    from pyspark.sql import functions as F

    kv: list[SparkColumn] = []
    ok = F.lit(True)
    for f in fields:
        name = f["name"]
        if name in _EXT:
            continue
        col = t.by_name.get(name)
        if col is None:
            return None
        got = _text(col, f, rec[name])
        if got is None:
            return None
        kv += [F.lit(name), got[0]]
        ok = ok & got[1]
    image = F.create_map(*kv) if kv else F.create_map().cast("map<string,string>")
    return image, ok


def _row_struct(p: _Pair) -> SparkColumn | None:
    """One pair's change: kind, commit ts, images, names, and whether the JVM read it as Python would."""
    from pyspark.sql import functions as F

    assert p.table is not None
    v = F.col(f"_v{p.index}")
    after = _image(p.table, p.value_fields, v)
    vw = _witness(p.value_fields)
    if after is None or vw is None:
        return None
    names = {f["name"] for f in p.value_fields}
    ok = v[vw].isNotNull() & after[1]
    if p.key_head is not None:
        k = F.col(f"_k{p.index}")
        before = _image(p.table, p.key_fields, k)
        kw = _witness(p.key_fields)
        if before is None or kw is None:
            return None
        ok = ok & k[kw].isNotNull() & before[1]
        key_image = before[0]
    else:
        key_image = F.create_map().cast("map<string,string>")
    op = v["_tidb_op"] if "_tidb_op" in names else F.lit(None).cast("string")
    ts = F.coalesce(v["_tidb_commit_ts"], F.lit(0)) if "_tidb_commit_ts" in names else F.lit(0).cast("long")
    ok = ok & (ts >= 0)
    kind = F.when(op == "u", "update").when(op == "d", "delete").otherwise("insert")
    return F.struct(
        ok.alias("ok"), kind.alias("kind"), ts.cast("long").alias("commit_ts"),
        F.lit(p.table.schema).alias("database"), F.lit(p.table.table).alias("table"),
        F.lit(p.table.version).cast("long").alias("schema_version"),
        F.when(op == "d", after[0]).when(op == "u", key_image).alias("before"),
        F.when(op.isNull() | (op != "d"), after[0]).alias("after"))


def _tagged(raw: DataFrame) -> DataFrame:
    """Raw records with their Confluent heads: `_tag` row (framed value, and framed key or none), del
    (a tombstone or 0x03 delete with a framed key), else null (Python's)."""
    from pyspark.sql import functions as F

    return raw.select(
        "topic", "partition", "offset", "key", "value",
        F.expr("CASE WHEN length(key) >= 5 AND substring(key, 1, 1) = X'00' THEN substring(key, 1, 5) END")
        .alias("_kh"),
        F.expr("CASE WHEN length(value) >= 5 AND substring(value, 1, 1) = X'00' THEN substring(value, 1, 5) END")
        .alias("_vh")).withColumn("_tag", F.expr(
            "CASE WHEN _vh IS NOT NULL AND (key IS NULL OR _kh IS NOT NULL) THEN 'row' "
            "WHEN _kh IS NOT NULL AND (value IS NULL OR substring(value, 1, 1) = X'03') THEN 'del' END"))


def _plan(dec: AvroDecoder, groups: list[Any]) -> tuple[list[_Pair], dict[str, str]]:
    """The pairs the JVM reads, and the rows (topic, partition, offset) that carry their table definition.

    A definition goes on the first row of its partition that shows it; where that row, or any message
    showing the same definition in that partition, is the Python decoder's, every row of that definition in
    that partition is left to Python, which then writes the definition itself."""
    pairs: dict[tuple[bytes | None, bytes], _Pair] = {}
    python_sigs: dict[tuple[str, int], set[tuple]] = {}
    jvm_groups: list[tuple[Any, _Pair, tuple]] = []

    def fetch(head: bytes, fld: str) -> tuple[int, dict[str, Any]]:
        sid = struct.unpack(">I", head[1:5])[0]
        return sid, dec._schema(sid, fld)[1]

    for g in groups:
        tp = (g["topic"], g["partition"])
        kh = bytes(g["_kh"]) if g["_kh"] is not None else None
        if g["_tag"] == "del":  # Python's: its definition (key columns only) is written there
            try:
                kid, kraw = fetch(kh, "key")  # type: ignore[arg-type]
                python_sigs.setdefault(tp, set()).add(dec._table(kid, kraw, None, None, "").signature())
            except DecodeError:
                pass
            continue
        vh = bytes(g["_vh"])
        p = pairs.get((kh, vh))
        if p is None:
            p = pairs[(kh, vh)] = _Pair(len(pairs), kh, vh)
            try:
                kid, kraw = fetch(kh, "key") if kh is not None else (None, None)
                vid, vraw = fetch(vh, "value")
                p.table = dec._table(kid, kraw, vid, vraw, "")
                p.value_schema, p.value_fields = json.dumps(vraw), vraw.get("fields", [])
                if kraw is not None:
                    p.key_schema, p.key_fields = json.dumps(kraw), kraw.get("fields", [])
                p.jvm = _fits_spark(p.value_fields) and _fits_spark(p.key_fields) and _row_struct(p) is not None
            except DecodeError:  # an unknown id: every such message is a dead letter, by Python
                p.jvm = False
        if p.table is None:
            continue
        sig = p.table.signature()
        try:
            first_ok = bool(dec.decode(bytes(g["value"]), bytes(g["key"]) if g["key"] is not None else None))
        except Exception:  # noqa: BLE001 - whatever the Python decoder makes of it, it is Python's message
            first_ok = False
        if p.jvm and first_ok:
            jvm_groups.append((g, p, sig))
        else:
            python_sigs.setdefault(tp, set()).add(sig)
            p.skip.add(tp)
    marks: dict[tuple[str, int, tuple], tuple[int, TableInfo]] = {}
    for g, p, sig in jvm_groups:
        tp = (g["topic"], g["partition"])
        if sig in python_sigs.get(tp, ()):
            p.skip.add(tp)
            continue
        have = marks.get((*tp, sig))
        if have is None or g["first"] < have[0]:
            marks[(*tp, sig)] = (g["first"], p.table)  # type: ignore[assignment]
    defs = {f"{topic}{_SEP}{part}{_SEP}{off}": orjson.dumps(table_to_json(t)).decode()
            for (topic, part, _), (off, t) in marks.items()}
    return [p for p in pairs.values() if p.jvm], defs


def decode_avro(raw: DataFrame, options: dict[str, str] | None, store: str | SchemaFolder | None) -> DataFrame:
    """CHANGES_SCHEMA rows of avro messages: framed row messages by from_avro, the rest in Python.

    `raw` must be a batch DataFrame (a streaming micro-batch in `foreachBatch`): the schema ids are
    collected first. Cache it: it is read three times (ids, JVM rows, the rest)."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    dec = _decoder(options)
    tagged = _tagged(raw)
    groups = tagged.where("_tag IS NOT NULL").groupBy("_tag", "topic", "partition", "_kh", "_vh").agg(
        F.min("offset").alias("first"), F.min_by("key", "offset").alias("key"),
        F.min_by("value", "offset").alias("value")).collect()
    pairs, defs = _plan(dec, groups)
    raw_cols = ["topic", "partition", "offset", "key", "value"]
    if not pairs:
        return decode(raw, "avro", options, store)

    which: Any = F
    for p in pairs:
        cond = (F.col("_tag") == "row") & (F.col("_vh") == F.lit(p.value_head))
        cond = cond & (F.col("_kh").isNull() if p.key_head is None else F.col("_kh") == F.lit(p.key_head))
        for topic, part in sorted(p.skip):
            cond = cond & ~((F.col("topic") == topic) & (F.col("partition") == part))
        which = which.when(cond, F.lit(p.index))
    permissive = {"mode": "PERMISSIVE"}
    read = tagged.select(*raw_cols, which.alias("_pair"))
    body = [F.when(F.col("_pair") == p.index, from_avro(F.expr("substring(value, 6)"), p.value_schema, permissive))
            .alias(f"_v{p.index}") for p in pairs]
    body += [F.when(F.col("_pair") == p.index, from_avro(F.expr("substring(key, 6)"), p.key_schema, permissive))
             .alias(f"_k{p.index}") for p in pairs if p.key_schema is not None]
    read = read.select(*raw_cols, "_pair", *body)
    change: Any = F
    for p in pairs:
        change = change.when(F.col("_pair") == p.index, _row_struct(p))
    # spark_partition_id() is nondeterministic: in this projection it keeps the optimizer from pushing the
    # filters below through it, which would copy from_avro and every image into their conditions
    read = read.select(*raw_cols, F.when(F.spark_partition_id() >= 0, change).alias("c"))

    jvm_ok = F.coalesce(F.col("c.ok"), F.lit(False))
    if defs:
        where = F.concat_ws(_SEP, "topic", F.col("partition").cast("string"), F.col("offset").cast("string"))
        table_def = F.try_element_at(F.create_map(*[F.lit(x) for kv in defs.items() for x in kv]), where)
    else:
        table_def = F.lit(None).cast("string")
    none = F.lit(None).cast("string")
    rows = read.where(jvm_ok).select(
        "topic", "partition", "offset", F.lit(0).alias("idx"), F.col("c.kind").alias("kind"),
        F.col("c.database").alias("database"), F.col("c.table").alias("table"),
        F.col("c.commit_ts").alias("commit_ts"), F.col("c.schema_version").alias("schema_version"),
        none.alias("position"), F.col("c.before").alias("before"), F.col("c.after").alias("after"),
        none.alias("ddl"), none.alias("ddl_type"), table_def.alias("table_def"), none.alias("pre_table_def"),
        none.alias("error"), F.lit(None).cast("binary").alias("key"), F.lit(None).cast("binary").alias("value"))
    rest = decode(read.where(~jvm_ok).select(*raw_cols), "avro", options, store)
    return rows.unionByName(rest)
