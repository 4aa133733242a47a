"""Delta table features: a table carries only those its history needs, so every engine that reads Delta
can read it until a change requires more.

A table is created on Delta's lowest protocol that holds its columns (Delta itself adds `timestampNtz` for a
DATETIME column); column mapping comes only with the first RENAME COLUMN or DROP COLUMN that reaches it, and
type widening with the first MODIFY COLUMN that widens a type. Column mapping and type widening lock out
readers (delta-rs, Polars and DuckDB read neither, or only through some paths: README, "Delta table features"),
so with `table-features = "minimal"` those DDL are applied by rewriting the table instead (one overwrite commit:
the rows stay, the columns change), which costs a full copy but keeps the table readable everywhere.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("changefeed.lake")

AUTO, MINIMAL = "auto", "minimal"
MODES = (AUTO, MINIMAL)
COLUMN_MAPPING = "columnMapping"
TYPE_WIDENING = "typeWidening"
# what turns each feature on (the protocol versions column mapping needs without table features)
_PROPERTIES = {
    COLUMN_MAPPING: {"delta.columnMapping.mode": "name", "delta.minReaderVersion": "2",
                     "delta.minWriterVersion": "5"},
    TYPE_WIDENING: {"delta.enableTypeWidening": "true"},
}
_ON = {COLUMN_MAPPING: ("delta.columnMapping.mode", "name"), TYPE_WIDENING: ("delta.enableTypeWidening", "true")}
# characters Parquet column names cannot hold without column mapping (Delta refuses them)
_PARQUET_UNSAFE = frozenset(" ,;{}()\n\t=")


@dataclass(frozen=True)
class Upgrade:
    """A feature turned on for a table because of a DDL: logged, and kept in the consumer's progress."""

    table: str
    feature: str
    ddl: str
    commit_ts: int

    def line(self) -> str:
        return f"{self.table}: Delta feature {self.feature} turned on for DDL at commit ts {self.commit_ts} " \
               f"({self.ddl})"


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"table-features must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


def creation_properties(column_names: list[str]) -> dict[str, str]:
    """Properties a new table needs: none, unless a column name is one Parquet cannot hold."""
    if any(_PARQUET_UNSAFE.intersection(n) for n in column_names):
        return dict(_PROPERTIES[COLUMN_MAPPING])
    return {}


def table_properties(spark: SparkSession, path: str) -> dict[str, str]:
    rows = spark.sql(f"SHOW TBLPROPERTIES delta.`{path}`").collect()
    return {r["key"]: r["value"] for r in rows}


def has(props: dict[str, str], feature: str) -> bool:
    key, value = _ON[feature]
    return props.get(key, "").lower() == value


def turn_on(spark: SparkSession, path: str, feature: str, table: str, ddl: str, commit_ts: int) -> Upgrade | None:
    """Turn `feature` on for the table at `path` unless it is on; the upgrade, or None if there was none."""
    if has(table_properties(spark, path), feature):
        return None
    sets = ", ".join(f"'{k}' = '{v}'" for k, v in _PROPERTIES[feature].items())
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({sets})")
    return noted(table, feature, ddl, commit_ts)


def noted(table: str, feature: str, ddl: str, commit_ts: int) -> Upgrade:
    """A feature turned on for a DDL (here, or in the DDL's own commit by the driver: `ddlfeatures`), logged."""
    up = Upgrade(table, feature, ddl, commit_ts)
    log.warning(up.line())
    return up


def rewrite(spark: SparkSession, path: str, change: Callable[[DataFrame], DataFrame]) -> None:
    """The table rewritten with `change` applied to its rows, in one overwrite commit: a column renamed,
    dropped or widened without the feature Delta would otherwise need. Re-running it after a crash is
    harmless: each change is only asked for while the table still has the old shape."""
    df = spark.read.format("delta").load(path)
    (change(df).write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path))


def plain(dt: Any) -> bool:
    """A type a protocol-1/2 Delta table holds (others, such as TIMESTAMP_NTZ, need a table feature, which
    Delta's CREATE TABLE turns on by itself)."""
    from pyspark.sql import types as T

    return isinstance(dt, (T.LongType, T.IntegerType, T.ShortType, T.ByteType, T.StringType, T.BinaryType,
                           T.BooleanType, T.DoubleType, T.FloatType, T.DecimalType, T.DateType, T.TimestampType)) \
        and getattr(dt, "collation", "UTF8_BINARY") == "UTF8_BINARY"


def plain_nested(dt: Any) -> bool:
    """`plain`, or arrays, maps and structs of such types (protocol 1/2 holds them too)."""
    from pyspark.sql import types as T

    if isinstance(dt, T.ArrayType):
        return plain_nested(dt.elementType)
    if isinstance(dt, T.MapType):
        return plain_nested(dt.keyType) and plain_nested(dt.valueType)
    if isinstance(dt, T.StructType):
        return all(plain_nested(f.dataType) for f in dt.fields)
    return plain(dt)
