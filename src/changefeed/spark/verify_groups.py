"""Many tables' rows as a few DataFrames, for `verify`: tables of one shape read as one relation each side.

A DataFrame per table (an Arrow relation for the expected rows, a Parquet scan for the lake's) made verify cost
several py4j round trips and plan analyses per table, and its one aggregation a union of two frames per table,
scheduled as a task or more per frame: over 200 tables on a loaded machine, 626 s, two thirds of it that one job
(bench/RESULTS.md). Here the expected rows of all tables with the same columns are one Arrow relation with the
table's index as a column, and the plain local tables with the same schema are one Parquet scan of all their files
(each file's table found by its name): a database of 1,000 tables of a few shapes is a few frames, one job.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from .apply import END_AT, START_AT, q
from .apply.deltalog import file_name
from .types import table_schema, text_of, typed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..model import TableInfo
    from ..upstream import TableState
    from .apply.tablefiles import TableFiles

INDEX = "__i"  # a row's table (its index among the verified tables)
LISTING_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"


def signature(t: TableInfo) -> tuple[tuple[str, str], ...]:
    """What tables must share to be one expected relation: their columns' names and types, in order."""
    return tuple((c.name, repr(c.type)) for c in t.columns)


def expected_rows(spark: SparkSession, states: Sequence[tuple[int, TableState]]) -> DataFrame:
    """The expected rows of tables of one signature (index, state), typed as the lake types them, with each row's
    table index in column `INDEX`."""
    import pyarrow as pa
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    t = states[0][1].table
    names = [c.name for c in t.columns]
    conv = [text_of(c.type) for c in t.columns]
    index: list[int] = []
    cols: list[list[str | None]] = [[] for _ in names]
    for i, st in states:
        rows = list(st.rows.values())
        index += [i] * len(rows)
        for k, (n, f) in enumerate(zip(names, conv, strict=True)):
            cols[k] += [f(r.get(n)) for r in rows]
    data = pa.table({INDEX: pa.array(index, pa.int32()), **{f"c{k}": pa.array(v, pa.string())
                                                             for k, v in enumerate(cols)}})
    fields = [T.StructField(INDEX, T.IntegerType()),
              *[T.StructField(f"c{k}", T.StringType()) for k, _ in enumerate(cols)]]
    text = spark.createDataFrame(data, T.StructType(fields))
    schema = table_schema(t)
    return text.select(F.col(INDEX), *[typed(F.col(f"c{k}"), c.type).cast(schema[k].dataType).alias(c.name)
                                       for k, c in enumerate(t.columns)])


def lake_rows(spark: SparkSession, tables: Sequence[tuple[int, str, TableFiles]], want: Any) -> DataFrame | None:
    """The current rows (an SCD2 table's open versions) of plain local tables of one schema (index, path, files),
    in the columns and types of `want` (the expected StructType), with each row's table index in `INDEX`; None when
    two of them hold a file of the same name (a file's table is found by its name)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    paths, names = [], []
    for i, path, tf in tables:
        for rel in tf.files:
            paths.append(f"{path}/{unquote(rel)}")
            names.append((file_name(rel), i))
    if len({n for n, _ in names}) != len(names):
        return None
    tf0 = tables[0][2]
    schema = T.StructType.fromJson(json.loads(tf0.schema_json))
    phys = tf0.physical() or {}
    stored = T.StructType([T.StructField(phys.get(f.name, f.name), f.dataType, f.nullable) for f in schema.fields])
    which = spark.createDataFrame(names, T.StructType([T.StructField("__f", T.StringType()),
                                                       T.StructField(INDEX, T.IntegerType())]))
    # the files are known: their statuses read on the driver, not by a listing job (Spark starts one for more than 32)
    conf = spark.conf
    was = conf.get(LISTING_THRESHOLD, None)
    conf.set(LISTING_THRESHOLD, str(max(len(paths) + 1, 1_000_000)))
    try:
        files = spark.read.schema(stored).parquet(*paths)
    finally:
        if was is None:
            conf.unset(LISTING_THRESHOLD)
        else:
            conf.set(LISTING_THRESHOLD, was)
    df = (files.select(*[F.col(q(phys.get(f.name, f.name))).alias(f.name) for f in schema.fields],
                       F.col("_metadata.file_name").alias("__f"))
          .join(F.broadcast(which), "__f"))
    if END_AT in schema.fieldNames():
        df = df.where(f"{q(END_AT)} IS NULL")
    return df.select(F.col(INDEX), *[F.col(q(f.name)).cast(f.dataType).alias(f.name) for f in want.fields])


def lake_columns(tf: TableFiles) -> set[str]:
    """A table's columns as verify compares them (without SCD2's validity columns)."""
    return {f["name"] for f in json.loads(tf.schema_json)["fields"]} - {START_AT, END_AT}


def hashed(df: DataFrame, side: str) -> DataFrame:
    """Rows of many tables (`INDEX` and their columns) as (index, side, the row's hash), as `verify._hashes`."""
    from pyspark.sql import functions as F

    cols = [c for c in df.columns if c != INDEX]
    h = F.xxhash64(*[F.col(q(c)) for c in cols]) if cols else F.lit(0).cast("long")
    return df.select(F.col(INDEX).alias("i"), F.lit(side).alias("side"), h.alias("h"))
