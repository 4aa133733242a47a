"""SCD type 1: a table holds each key's latest image; one MERGE per table write."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import Window
from pyspark.sql import functions as F

from .options import q
from .ordering import DELETE, UPSERT, delete_rank, key_changed, order, typed_key
from .projection import Image, jvm_columns, select

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from ...model import TableInfo
    from .lake import Lake
    from .options import ApplyOptions
    from .projection import Projection


def last_ops(proj: Projection, t: TableInfo, rows: DataFrame, cols: list[str],
             group: tuple[str, ...] = ()) -> tuple[DataFrame, list[str], list[str], list[str]]:
    """Each key's last operation (`__op`, typed key `__k*`, values `__v*`, `__h*`: whether the image holds the
    column), per `group` column too (`multiwrite`: one table of many in a column).

    Built as two plain selects (key images written, keys deleted) rather than `ordering.ops`' array of structs
    exploded per change: the same operations and order, with the key typed before rows are grouped by it.
    Measured apart it was not faster than the exploded form (the cost is reading the cached maps, typing
    values and sorting per key)."""
    flat, key_names, vals, has, by = flat_ops(proj, t, rows, cols, group)
    cols_l = proj.memo(t, cols, lambda: _op_columns(proj, t, cols, group, rows.sparkSession), "last_ops", group)[-1]
    w = Window.partitionBy(*group, *key_names).orderBy(*[F.col(n).desc() for n in by])
    last = select(flat.withColumn("__n", F.row_number().over(w)).where("__n = 1"), cols_l)
    return last, key_names, vals, has


def flat_ops(proj: Projection, t: TableInfo, rows: DataFrame, cols: list[str], group: tuple[str, ...] = ()
             ) -> tuple[DataFrame, list[str], list[str], list[str], list[str]]:
    """Every change as its keyed operations (`last_ops` before its window): the `group` columns, the ordering
    columns (`by`, in the order they sort), `__op`, the typed key, values and `__h*`. `drivermerge` takes each
    key's last one on the driver from these."""
    cols_w, cols_g, key_names, vals, has, by, _ = proj.memo(
        t, cols, lambda: _op_columns(proj, t, cols, group, rows.sparkSession), "last_ops", group)
    writes = select(rows.where("kind <> 'delete'"), cols_w)
    # a delete, and an UPDATE that changes the key (its old key goes; within a commit ts before the writes)
    gone = select(rows.where(f"kind = 'delete' OR (kind = 'update' AND before IS NOT NULL AND "
                             f"({key_changed(proj.keys(t))}))"), cols_g)
    return writes.unionByName(gone, allowMissingColumns=False), key_names, vals, has, by


def _op_columns(proj: Projection, t: TableInfo, cols: list[str], group: tuple[str, ...], spark: Any
                ) -> tuple[Any, Any, list[str], list[str], list[str], list[str], Any]:
    """The select lists of `last_ops` (key images written; keys deleted; each key's last operation, as JVM Seqs:
    `projection.jvm_columns`) and its column names: a few hundred Column objects, each a call into the JVM (~0.1 s a
    micro-batch), built once per table definition."""
    o = proj.o
    keys = proj.keys(t)
    key_names = [f"__k{i}" for i in range(len(keys))]
    vals = [f"__v{i}" for i in range(len(cols))]
    has = [f"__h{i}" for i in range(len(cols))]
    place, by = order(o)
    carry = [F.col(g) for g in group]
    after = Image(t, "after")  # read by position where its keys are the table's columns in order
    writes = [*carry, *place, F.lit(1).alias("__r"), F.lit(UPSERT).alias("__op"),
              *typed_key(t, keys, key_names, o, text=after.text),
              *[proj.value(t, c, text=after.text(c)).alias(v) for c, v in zip(cols, vals, strict=True)],
              # a column the image lacks (only-output-updated-columns) keeps the table's value
              *[after.has(c).alias(h) for c, h in zip(cols, has, strict=True)]]
    gone = [*carry, *place, F.lit(delete_rank(o)).alias("__r"), F.lit(DELETE).alias("__op"),
            *typed_key(t, keys, key_names, o, "CASE WHEN kind = 'delete' THEN coalesce(before, after) ELSE before END"),
            *[F.lit(None).alias(v) for v in vals], *[F.lit(False).alias(h) for h in has]]
    last = [*group, "__op", *key_names, *vals, *has]
    return (jvm_columns(spark, writes), jvm_columns(spark, gone), key_names, vals, has, by,
            jvm_columns(spark, last))


def merge_scd1(lake: Lake, proj: Projection, o: ApplyOptions, t: TableInfo, path: str, rows: DataFrame,
               cols: list[str], version: int) -> None:
    """The last operation of each key (`last_ops`), as flat typed columns, merged in one Delta commit."""
    keys = proj.keys(t)
    last, key_names, vals, has = last_ops(proj, t, rows, cols)
    cond = " AND ".join(f"t.{q(k)} <=> s.{q(n)}" for k, n in zip(keys, key_names, strict=True))
    upd = {q(c): F.when(F.col(f"s.{h}"), F.col(f"s.{v}")).otherwise(F.col(f"t.{q(c)}"))
           for c, v, h in zip(cols, vals, has, strict=True)}
    ins = {q(c): F.col(f"s.{v}") for c, v in zip(cols, vals, strict=True)}
    lake.merge_in_memory(path, last, cond, version, lambda m: m.whenMatchedDelete(condition=f"s.__op = '{DELETE}'")
                         .whenMatchedUpdate(condition=f"s.__op = '{UPSERT}'", set=upd)
                         .whenNotMatchedInsert(condition=f"s.__op = '{UPSERT}'", values=ins))
