"""canal-json decoded on the JVM: `from_json` with the message's explicit schema, no Python per message.

Row and WATERMARK messages (nearly all of a stream) become change rows with Spark SQL alone. Their images
keep canal-json's own value text (binary as ISO-8859-1 characters, ENUM/SET as index/bitmask), which
`types.typed(..., dialect="canal")` reads. Everything else — DDL (their table definitions come from
replaying the statement, which needs the previous definition: Python's SchemaTracker), messages that do not
parse, claim-check references — goes through the Python decoder (`decode.py`) in the same micro-batch, so a
bad message still lands in the dead-letter table with its bytes and the reason.

A row carries its table's shape (`table_def`) only where its partition first shows that shape in the batch, as the
Python decoder writes it once per shape per task: a shape on every row made every row one the minimal changelog keeps
(`restart.restart_rows`) and the control job collects (bench/RESULTS.md, 2026-11-28).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .decode import decode
from .objectstore import SchemaFolder

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

MESSAGE_SCHEMA = ("id long, database string, `table` string, pkNames array<string>, isDdl boolean, type string, "
                  "es long, ts long, `sql` string, sqlType map<string,int>, mysqlType map<string,string>, "
                  "data array<map<string,string>>, old array<map<string,string>>, "
                  "_tidb struct<commitTs: long, watermarkTs: long, claimCheckLocation: string>")

# a message the JVM takes: a well-formed row message (one image per data row, a type for every column) or a
# watermark. No lambdas here: Spark interprets higher-order functions row by row, several times slower.
_JVM_ROW = """m IS NOT NULL AND coalesce(m.isDdl, false) = false AND m._tidb.claimCheckLocation IS NULL AND (
  (m.type = 'TIDB_WATERMARK' AND m._tidb.watermarkTs IS NOT NULL)
  OR (m.type IN ('INSERT', 'DELETE', 'UPDATE') AND size(m.data) > 0 AND m.data[0] IS NOT NULL
      AND size(m.mysqlType) = size(m.data[0])
      AND (m._tidb.commitTs IS NOT NULL OR m.es IS NOT NULL)
      AND (m.type <> 'UPDATE' OR size(m.old) = size(m.data))))"""

# the table as this message shows it (columns in mysqlType order, key from pkNames); apply.py reads it
_TABLE_SHAPE = "to_json(named_struct('schema', m.database, 'table', m.`table`, 'mysqlType', m.mysqlType, " \
               "'pkNames', m.pkNames))"


def decode_canal(raw: DataFrame, options: dict[str, str] | None, store: str | SchemaFolder | None) -> DataFrame:
    """CHANGES_SCHEMA rows of canal-json messages: rows and watermarks on the JVM, the rest in Python."""
    from pyspark.sql import functions as F

    parsed = raw.withColumn("m", F.from_json(F.col("value").cast("string"), MESSAGE_SCHEMA))
    jvm = F.expr(_JVM_ROW)
    mark = F.col("m.type") == "TIDB_WATERMARK"

    def only(cond: Column) -> Column:
        """The branch's messages picked by a generator, not a filter: Spark pushes a filter below the parse and
        inlines `from_json` into it once per field it reads (16-30 parses a message in the executed plan)."""
        return F.explode(F.when(cond, F.array(F.lit(0)))).alias("_only")

    rest = parsed.select("*", only(F.coalesce(~jvm, F.lit(True)))).select(
        "topic", "partition", "offset", "key", "value")
    marks = parsed.select("*", only(jvm & mark)).select(
        "topic", "partition", "offset", F.lit(0).alias("idx"), F.lit("watermark").alias("kind"),
        F.lit(None).cast("string").alias("database"), F.lit(None).cast("string").alias("table"),
        F.col("m._tidb.watermarkTs").alias("commit_ts"), F.lit(None).cast("long").alias("schema_version"),
        F.lit(None).cast("string").alias("position"),
        F.lit(None).cast("map<string,string>").alias("before"), F.lit(None).cast("map<string,string>").alias("after"),
        *[F.lit(None).cast("string").alias(c) for c in ("ddl", "ddl_type", "table_def", "pre_table_def", "error")],
        F.lit(None).cast("binary").alias("key"), F.lit(None).cast("binary").alias("value"))
    rows = parsed.select("*", F.posexplode(F.when(jvm & ~mark, F.col("m.data"))).alias("idx", "row")).select(
        "topic", "partition", "offset", F.col("idx").cast("int").alias("idx"),
        F.lower("m.type").alias("kind"), F.col("m.database").alias("database"), F.col("m.table").alias("table"),
        F.coalesce("m._tidb.commitTs", F.shiftleft("m.es", 18)).alias("commit_ts"),
        F.lit(None).cast("long").alias("schema_version"), F.lit(None).cast("string").alias("position"),
        F.expr("CASE m.type WHEN 'DELETE' THEN row WHEN 'UPDATE' THEN m.old[idx] END").alias("before"),
        F.expr("CASE WHEN m.type <> 'DELETE' THEN row END").alias("after"),
        F.lit(None).cast("string").alias("ddl"), F.lit(None).cast("string").alias("ddl_type"),
        F.expr(_TABLE_SHAPE).alias("table_def") if raw.isStreaming else F.lit(None).cast("string").alias("table_def"),
        F.lit(None).cast("string").alias("pre_table_def"),
        F.lit(None).cast("string").alias("error"), F.lit(None).cast("binary").alias("key"),
        F.lit(None).cast("binary").alias("value"))
    if not raw.isStreaming:  # (apply_changes decodes each micro-batch, not a stream: a stream keeps it on every row)
        # each shape's first message per partition: a small aggregate, broadcast to its rows (the batch parsed again)
        changed = parsed.select("*", only(jvm & ~mark))
        firsts = F.broadcast(changed.groupBy("topic", "partition", F.expr(_TABLE_SHAPE).alias("_shape")).agg(
            F.min("offset").alias("offset")).select("topic", "partition", "offset", F.lit(0).alias("idx"), "_shape"))
        rows = rows.join(firsts, ["topic", "partition", "offset", "idx"], "left").select(
            *[F.col("_shape").alias(c) if c == "table_def" else c for c in rows.columns])
    slow = decode(rest, "canal-json", options, store)
    return rows.unionByName(marks).unionByName(slow)
