"""A Delta table's change data feed (`readChangeFeed`) as changes in `read_changes`' shape, for `write_changes`:
a table that never lived in TiDB published as a TiCDC stream.

The table's columns become MySQL columns (the inverse of types.spark_type where one exists: LONG is BIGINT,
DECIMAL(p,s) DECIMAL(p,s), TIMESTAMP_NTZ DATETIME(6), TIMESTAMP TIMESTAMP(6) in UTC, BINARY VARBINARY/LONGBLOB, a
nested type JSON); `keys` are its primary key. A Delta commit is one transaction: its commit ts is TiDB's TSO of
the commit's timestamp (milliseconds, shifted 18 bits) plus the commit version in the logical bits, so versions
stay in order. An update's pre- and post-image (joined on the commit version and the keys) are one UPDATE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model import Column, Index, TableInfo
from .decode import def_json

if TYPE_CHECKING:
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import types as T

META = ("_change_type", "_commit_version", "_commit_timestamp")
_TS_FMT = "yyyy-MM-dd HH:mm:ss.SSSSSS"


def mysql_type(dt: T.DataType, key: bool) -> str:
    from pyspark.sql import types as T

    simple = {T.ByteType: "tinyint", T.ShortType: "smallint", T.IntegerType: "int", T.LongType: "bigint",
              T.BooleanType: "tinyint(1)", T.FloatType: "float", T.DoubleType: "double", T.DateType: "date",
              T.TimestampNTZType: "datetime(6)", T.TimestampType: "timestamp(6)"}
    for cls, name in simple.items():
        if isinstance(dt, cls):
            return name
    if isinstance(dt, T.DecimalType):
        return f"decimal({dt.precision},{dt.scale})"
    if isinstance(dt, T.StringType):
        return "varchar(255)" if key else "longtext"
    if isinstance(dt, T.BinaryType):
        return "varbinary(255)" if key else "longblob"
    return "json"


def table_info(schema: T.StructType, database: str, table: str, keys: list[str]) -> TableInfo:
    """The MySQL definition of a Delta table's columns."""
    from ..errors import ChangefeedError

    names = [f.name for f in schema.fields if f.name not in META]
    missing = [k for k in keys if k not in names]
    if missing or not keys:
        raise ChangefeedError(f"{database}.{table}: keys {', '.join(missing) or '(none)'} not among its columns "
                              f"{', '.join(names)}")
    cols = [Column(f.name, mysql_type(f.dataType, f.name in keys), nullable=f.name not in keys and f.nullable,
                   primary_key=f.name in keys) for f in schema.fields if f.name not in META]
    return TableInfo(database, table, columns=cols, indexes=[Index("PRIMARY", list(keys), primary=True, unique=True)])


def text(c: SparkColumn, dt: T.DataType, session_tz: str) -> SparkColumn:
    """A value as the text decode's maps hold (types.text_of)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(dt, T.BinaryType):
        return F.base64(c)
    if isinstance(dt, T.BooleanType):
        return c.cast("int").cast("string")
    if isinstance(dt, T.TimestampNTZType):
        return F.date_format(c, _TS_FMT)
    if isinstance(dt, T.TimestampType):
        return F.date_format(F.to_utc_timestamp(c, session_tz), _TS_FMT)
    if isinstance(dt, T.ArrayType | T.MapType | T.StructType):
        return F.to_json(c)
    return c.cast("string")


def cdf_changes(spark: SparkSession, path: str, *, database: str, table: str, keys: list[str],
                starting_version: int = 0, ending_version: int | None = None) -> DataFrame:
    """The change data feed of the Delta table at `path` (change data feed on), as change rows of
    `database`.`table` with primary key `keys`, ready for `write_changes(..., dialect="text")`."""
    from pyspark.sql import functions as F

    r = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", starting_version)
    if ending_version is not None:
        r = r.option("endingVersion", ending_version)
    feed = r.load(path)
    t = table_info(feed.schema, database, table, keys)
    tz = spark.conf.get("spark.sql.session.timeZone") or "UTC"
    fields = [f for f in feed.schema.fields if f.name not in META]
    image = F.create_map(*[x for f in fields for x in (F.lit(f.name), text(F.col(f.name), f.dataType, tz))])
    ts = F.shiftleft(F.unix_millis("_commit_timestamp"), 18) + (F.col("_commit_version") % (1 << 18))
    base = feed.select("_change_type", "_commit_version", ts.alias("commit_ts"), *keys, image.alias("image"))
    pre = base.where("_change_type = 'update_preimage'").select("_commit_version", *keys,
                                                                F.col("image").alias("before"), "commit_ts")
    post = base.where("_change_type = 'update_postimage'").select("_commit_version", *keys,
                                                                  F.col("image").alias("after"),
                                                                  F.col("commit_ts").alias("ts2"))
    updates = pre.join(post, ["_commit_version", *keys], "full_outer").select(
        F.when(F.col("before").isNull(), "insert").when(F.col("after").isNull(), "delete").otherwise("update")
        .alias("kind"), "_commit_version", F.coalesce("commit_ts", "ts2").alias("commit_ts"), "before", "after")
    others = base.where("_change_type IN ('insert', 'delete')").select(
        F.col("_change_type").alias("kind"), "_commit_version", "commit_ts",
        F.when(F.col("_change_type") == "delete", F.col("image")).alias("before"),
        F.when(F.col("_change_type") == "insert", F.col("image")).alias("after"))
    rows = others.unionByName(updates)
    return rows.select(
        F.lit(path).alias("topic"), F.lit(0).alias("partition"), F.col("_commit_version").alias("offset"),
        F.lit(0).alias("idx"), "kind", F.lit(database).alias("database"), F.lit(table).alias("table"), "commit_ts",
        F.lit(None).cast("long").alias("schema_version"), F.lit(None).cast("string").alias("position"),
        "before", "after", F.lit(None).cast("string").alias("ddl"), F.lit(None).cast("string").alias("ddl_type"),
        F.lit(def_json(t)).alias("table_def"), F.lit(None).cast("string").alias("pre_table_def"),
        F.lit(None).cast("string").alias("error"), F.lit(None).cast("binary").alias("key"),
        F.lit(None).cast("binary").alias("value"))
