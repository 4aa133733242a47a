"""MySQL/TiDB column types as Spark SQL types, chosen so that every value fits without loss.

Integers get the smallest Spark type that holds their whole range (so unsigned ones move up a size, and
BIGINT UNSIGNED becomes DECIMAL(20,0)); DECIMAL(p,s) stays decimal when Spark can hold p (38 at most),
else it is kept as its exact text; DATETIME is TIMESTAMP_NTZ (a wall-clock value, no zone) and TIMESTAMP a
UTC instant; TIME (up to ±838:59:59.999999, no Spark type in 4.0) is its MySQL text; ENUM and SET are their
names; BIT(n) an integer (DECIMAL(20,0) for BIT(64)); JSON its text, or VARIANT when asked.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..model import TableInfo
from ..mysqltypes import ColumnType, Family, make_json_out

_SIGNED = {"tinyint": T.ByteType(), "smallint": T.ShortType(), "mediumint": T.IntegerType(),
           "int": T.IntegerType(), "bigint": T.LongType()}
_UNSIGNED = {"tinyint": T.ShortType(), "smallint": T.IntegerType(), "mediumint": T.IntegerType(),
             "int": T.LongType(), "bigint": T.DecimalType(20, 0)}
_SIMPLE = {Family.DATE: T.DateType(), Family.DATETIME: T.TimestampNTZType(), Family.TIMESTAMP: T.TimestampType(),
           Family.TIME: T.StringType(), Family.YEAR: T.ShortType(), Family.STRING: T.StringType(),
           Family.BYTES: T.BinaryType(), Family.ENUM: T.StringType(), Family.SET: T.StringType(),
           Family.VECTOR: T.ArrayType(T.FloatType(), containsNull=False)}


def spark_type(ct: ColumnType, *, json_as_variant: bool = False) -> T.DataType:
    f = ct.family
    if f is Family.INT:
        return (_UNSIGNED if ct.unsigned else _SIGNED)[ct.name]
    if f is Family.FLOAT:
        return T.FloatType() if ct.name == "float" else T.DoubleType()
    if f is Family.DECIMAL:
        precision = ct.flen if ct.flen > 0 else 10
        scale = max(ct.scale, 0)
        return T.DecimalType(precision, scale) if precision <= 38 else T.StringType()
    if f is Family.BIT:
        return T.LongType() if ct.display_length < 64 else T.DecimalType(20, 0)
    if f is Family.JSON:
        return T.VariantType() if json_as_variant else T.StringType()
    return _SIMPLE[f]


def table_schema(t: TableInfo, *, json_as_variant: bool = False) -> T.StructType:
    """The Delta schema of an upstream table: its columns in order, NOT NULL kept."""
    return T.StructType([T.StructField(c.name, spark_type(c.type, json_as_variant=json_as_variant),
                                       nullable=c.nullable is not False) for c in t.columns])


def text_of(ct: ColumnType) -> Callable[[Any], str | None]:
    """A function from the column's datum (model.py) to the text `typed()` turns into its Spark value.

    Changes travel as string maps (one shape for every table, so one DataFrame holds them all):
    binary as base64, ENUM/SET by their names, everything else as MySQL writes it.
    """
    f = ct.family
    if f is Family.BYTES:
        return lambda v: None if v is None else base64.b64encode(v).decode("ascii")
    if f is Family.FLOAT:
        return lambda v: None if v is None else repr(float(v))
    if f in (Family.ENUM, Family.SET) and ct.elements:
        out = make_json_out(ct)
        return lambda v: None if v is None else str(out(v))
    return lambda v: None if v is None else str(v)


def typed(text: Column, ct: ColumnType, *, json_as_variant: bool = False, dialect: str = "text") -> Column:
    """The Spark value of a column's text (see `text_of`): a JVM expression, no Python per row.

    `dialect="canal"` reads canal-json's own value text instead (binary as ISO-8859-1 characters, ENUM as
    its index, SET as its bitmask: what the JVM decoder keeps). Values Spark cannot hold (MySQL's zero
    dates) become NULL rather than failing the batch."""
    st = spark_type(ct, json_as_variant=json_as_variant)
    if dialect == "canal":
        if isinstance(st, T.BinaryType):
            return F.encode(text, "ISO-8859-1")
        if ct.family in (Family.ENUM, Family.SET) and ct.elements:
            return _canal_enum_set(text, ct)
    if isinstance(st, T.StringType):
        return text
    if isinstance(st, T.BinaryType):
        return F.unbase64(text)
    if isinstance(st, T.VariantType):
        return F.try_parse_json(text)
    if isinstance(st, T.ArrayType):
        return F.from_json(text, st)
    if isinstance(st, T.TimestampType):  # the text is UTC wall-clock time, whatever the session's zone
        return F.concat(text, F.lit("Z")).try_cast(st)
    return text.try_cast(st)


def _canal_enum_set(text: Column, ct: ColumnType) -> Column:
    """ENUM index / SET bitmask (canal-json's text) to the names; a text that is not a number is a name."""
    names = F.array(*[F.lit(e) for e in ct.elements])
    n = text.try_cast("long")
    if ct.family is Family.ENUM:
        value = F.when(n == 0, F.lit("")).otherwise(F.element_at(names, n.cast("int")))
    else:
        bits = F.array(*[F.when(F.shiftrightunsigned(n, i).bitwiseAND(1) == 1, F.lit(e))
                         for i, e in enumerate(ct.elements)])
        picked = F.filter(bits, lambda e: e.isNotNull())
        value = F.array_join(picked, ",")
    return F.when(text.rlike("^[0-9]+$"), value).otherwise(text)
