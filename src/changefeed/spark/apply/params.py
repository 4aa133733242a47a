"""A micro-batch's own values (its id, the commit ts bounds of its window and cutoff) given to Spark as data.

Spark's generated Java code writes a long literal into its source, so `commit_ts <= 1387391877120` compiles to
a new class for every new bound: each micro-batch of a consumer planned ~12 new classes (Janino, on the
driver, before its jobs start), and loading them made the JVM's C2 compiler recompile what had inlined the old
ones (its threads took ~9 CPU-s of an 18 s run on two cores, after a million-change warm-up). Read from a
one-row relation joined by broadcast, the bound is a column: the code is the same every batch, and Spark's
codegen cache serves it (bench/RESULTS.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .options import q, sql_string

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def local_rows(spark: Any, rows: list[tuple[Any, ...]], columns: list[tuple[str, str]]) -> DataFrame:
    """A small table of driver-side values as SQL VALUES: a local relation, which a broadcast join takes without
    a Spark job (`createDataFrame` of Python rows runs one, through a Python worker)."""
    def lit(v: Any) -> str:
        if v is None:
            return "NULL"
        return sql_string(v) if isinstance(v, str) else str(int(v))

    values = ", ".join("(" + ", ".join(lit(v) for v in r) + ")" for r in rows)
    cast = ", ".join(f"CAST(col{i + 1} AS {t}) AS {q(n)}" for i, (n, t) in enumerate(columns))
    return spark.sql(f"SELECT {cast} FROM VALUES {values}")


def bind(df: DataFrame, **values: int | None) -> DataFrame:
    """`df` with a long column per value (NULL for None), the same in every row: a filter or a projection
    that reads it compiles to the same code whatever the value."""
    from pyspark.sql import functions as F

    names = list(values)
    one = local_rows(df.sparkSession, [tuple(values[n] for n in names)], [(n, "long") for n in names])
    return df.crossJoin(F.broadcast(one))


def within(df: DataFrame, cond: str, **values: int | None) -> DataFrame:
    """`df.where(cond)`, where `cond` names the values (as columns) instead of holding them as literals."""
    if not values:
        return df.where(cond)
    return bind(df, **values).where(cond).drop(*values)
