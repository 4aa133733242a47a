"""A micro-batch's own values (its id, the commit ts bounds of its window and cutoff) given to Spark as data.

Spark's generated Java code writes a long literal into its source, so `commit_ts <= 1387391877120` compiles to
a new class for every new bound: each micro-batch of a consumer planned ~12 new classes (Janino, on the
driver, before its jobs start), and loading them made the JVM's C2 compiler recompile what had inlined the old
ones (its threads took ~9 CPU-s of an 18 s run on two cores, after a million-change warm-up). The values are
read from a scalar subquery over a one-row local relation, as one struct: the code keeps a struct result out of
its source (a reference object, as it keeps strings), so it is the same every batch and Spark's codegen cache
serves it; and the subquery is run on the driver, with no job (a broadcast join of the same relation, the form
before, ran a job per query: `executeCollectIterator`, bench/RESULTS.md). The relation must have a FROM: a
subquery of a bare SELECT is inlined by the optimizer, folded to literals, and compiled per value again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .options import q, sql_string

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


ARROW_ROWS = 64


def _arrow_type(name: str) -> Any:
    """A `local_rows` column type (Spark's name) as Arrow's."""
    import pyarrow as pa

    return {"string": pa.string(), "int": pa.int32(), "long": pa.int64()}[name]


def _lit(v: Any) -> str:
    if v is None:
        return "NULL"
    return sql_string(v) if isinstance(v, str) else str(int(v))


def local_rows(spark: Any, rows: list[tuple[Any, ...]], columns: list[tuple[str, str]]) -> DataFrame:
    """A small table of driver-side values as SQL VALUES: a local relation, which a broadcast join takes without
    a Python worker (`createDataFrame` of Python rows runs a job through one). Past `ARROW_ROWS` rows, the same
    local relation made from Arrow: Spark's parser took 0.08-0.15 s for a VALUES of 1,000 rows (a database's first
    micro-batch: a row per new table), Arrow 0.02 s."""
    if len(rows) > ARROW_ROWS:
        import pyarrow as pa

        from .pycycles import young

        table = pa.table({n: pa.array([r[i] for r in rows], _arrow_type(t)) for i, (n, t) in enumerate(columns)})
        df = spark.createDataFrame(table)
        young()  # the JVM's iterator over the table's Arrow bytes released now, not at the batch's end (`pycycles`)
        return df
    values = ", ".join("(" + ", ".join(_lit(v) for v in r) + ")" for r in rows)
    cast = ", ".join(f"CAST(col{i + 1} AS {t}) AS {q(n)}" for i, (n, t) in enumerate(columns))
    return spark.sql(f"SELECT {cast} FROM VALUES {values}")


def scalar(spark: Any, **values: int | None) -> Column:
    """The values as one struct column (a long field each, NULL for None) that compiles to the same code whatever
    they are, and runs no job: a scalar subquery (module docstring)."""
    fields = ", ".join(f"{sql_string(n)}, CAST(col{i + 1} AS BIGINT)" for i, n in enumerate(values))
    row = ", ".join(_lit(v) for v in values.values())
    return spark.sql(f"SELECT named_struct({fields}) AS v FROM VALUES ({row})").scalar()


def bind(df: DataFrame, **values: int | None) -> DataFrame:
    """`df` with a long column per value (NULL for None), the same in every row: a filter or a projection
    that reads it compiles to the same code whatever the value."""
    one = scalar(df.sparkSession, **values)
    return df.select("*", *[one.getField(n).alias(n) for n in values])


def within(df: DataFrame, cond: str, **values: int | None) -> DataFrame:
    """`df.where(cond)`, where `cond` names the values (as columns) instead of holding them as literals."""
    if not values:
        return df.where(cond)
    return bind(df, **values).where(cond).drop(*values)
