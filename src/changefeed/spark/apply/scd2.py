"""SCD type 2: a table holds every version of a key, each [__START_AT, __END_AT); one MERGE per table write.

The merge source holds one row per key that closes or updates the key's open version in the table, and one
per new version:
    CLOSE        the key's open version ends where its first change in the write starts
    IN_PLACE     (track_history_column_list) the first run of images changes no tracked column of the open
                 version: it is updated in place, keeps its start, ends where the next version starts
    NEW_VERSION  a version to insert: an image, from its sequence value to the next one's (NULL: open)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

from .options import END_AT, START_AT, q
from .ordering import UPSERT, ops, typed_key

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from ...model import TableInfo
    from .lake import Lake
    from .options import ApplyOptions
    from .projection import Projection

CLOSE, IN_PLACE, NEW_VERSION = "C", "I", "V"


def merge_scd2(lake: Lake, proj: Projection, o: ApplyOptions, t: TableInfo, path: str, rows: DataFrame,
               cols: list[str], version: int) -> None:
    """History rows: each image of a key is a version [__START_AT, __END_AT); a delete ends the open one.

    With track_history_column_list, an image that changes none of those columns replaces the version
    it follows (in place, the version keeps its start) instead of opening a new one."""
    from delta.tables import DeltaTable

    keys = proj.keys(t)
    changes, key_names = ops(rows, keys, o)
    seq = F.col(o.sequence_by[0])
    target = DeltaTable.forPath(lake.spark, path)
    if not o.watermarks:
        # a change at the commit ts its partition last applied may be one delivered again (the rest of its
        # transaction may still come, so it was not filtered out): an image of a key whose version already
        # starts at that sequence value is that version, not a new one (one change per key per commit ts)
        starts = target.toDF().select(*[F.col(q(k)).alias(f"__s{i}") for i, k in enumerate(keys)],
                                      F.col(q(START_AT)).alias("__s_at"))
        changes = changes.select("*", *[c.alias(f"__x{i}") for i, c in enumerate(typed_key(t, keys, key_names, o))])
        same = (F.col("__op") == UPSERT) & (seq == F.col("__s_at"))
        for i in range(len(keys)):
            same &= F.col(f"__x{i}").eqNullSafe(F.col(f"__s{i}"))
        changes = changes.join(starts, same, "left_anti").drop(*[f"__x{i}" for i in range(len(keys))])
    w = Window.partitionBy(*key_names).orderBy("__ord")
    changes = changes.withColumn("__seq", seq).withColumn("__next", F.lead(seq).over(w))
    tk = typed_key(t, keys, key_names, o)
    tracked = [c for c in (o.track_history_column_list or []) if c in cols]
    inplace = F.lit(False)
    if o.track_history_column_list is not None:
        sig = F.to_json(F.struct(*[proj.value(t, c, "__img").cast("string").alias(c) for c in tracked]))
        prev = F.lag(F.struct(F.col("__op").alias("op"), F.col("__sig").alias("s")), 1).over(w)
        changes = changes.withColumn("__sig", sig)
        changes = changes.withColumn("__same", F.coalesce((prev["op"] == UPSERT) & (prev["s"] == F.col("__sig")),
                                                          F.lit(False)) & (F.col("__op") == UPSERT))
        changes = changes.withColumn("__grp", F.sum(F.when(F.col("__same"), 0).otherwise(1)).over(
            w.rowsBetween(Window.unboundedPreceding, 0)))
        run = Window.partitionBy(*key_names, "__grp")
        # a run of images that change no tracked column is one version: the first's start, the last's image
        changes = (changes.withColumn("__start", F.min("__seq").over(run))
                   .withColumn("__n", F.row_number().over(run.orderBy(F.col("__ord").desc())))
                   .where("__n = 1").withColumn("__seq", F.col("__start")).drop("__n", "__start"))
        # the key's open version in the table: when the first run changes no tracked column of it, the
        # run updates that version in place
        cur = (target.toDF().where(F.col(q(END_AT)).isNull())
               .select(*[F.col(q(k)).alias(f"__c{i}") for i, k in enumerate(keys)],
                       F.to_json(F.struct(*[F.col(q(c)).cast("string").alias(c) for c in tracked])).alias("__cur")))
        changes = changes.select("*", *[c.alias(f"__t{i}") for i, c in enumerate(typed_key(t, keys, key_names, o))])
        changes = changes.join(cur, F.expr(" AND ".join(f"__t{i} <=> __c{i}" for i in range(len(keys)))), "left")
        changes = changes.withColumn("__inplace", F.coalesce((F.col("__grp") == 1) & (F.col("__op") == UPSERT)
                                                             & (F.col("__cur") == F.col("__sig")), F.lit(False)))
        inplace = F.col("__inplace")
    first = changes.groupBy(*key_names).agg(
        F.min("__seq").alias("__first"),
        F.first(F.when(inplace, F.struct("__img", "__next")), ignorenulls=True).alias("__ip"))
    close = first.select(F.when(F.col("__ip").isNull(), F.lit(CLOSE)).otherwise(F.lit(IN_PLACE)).alias("__op"),
                         F.col("__ip.__img").alias("__img"), F.lit(None).cast("long").alias("__seq"),
                         F.col("__ip.__next").alias("__next"), F.col("__first"), *tk)
    nulls = [F.lit(None).cast(f.dataType).alias(f.name) for f in close.select(*key_names).schema.fields]
    vers = changes.where(F.col("__op") == UPSERT).where(~inplace).select(
        F.lit(NEW_VERSION).alias("__op"), "__img", "__seq", "__next", F.lit(None).cast("long").alias("__first"),
        *nulls)
    src = close.unionByName(vers)
    cond = " AND ".join(f"t.{q(k)} <=> s.{q(n)}" for k, n in zip(keys, key_names, strict=True))
    ins = {q(c): proj.value(t, c) for c in cols}
    ins[q(START_AT)] = F.col("s.__seq")
    ins[q(END_AT)] = F.col("s.__next")
    in_place = {q(c): F.when(F.map_contains_key(F.col("s.__img"), c), proj.value(t, c))
                .otherwise(F.col(f"t.{q(c)}")) for c in cols}
    in_place[q(END_AT)] = F.col("s.__next")
    merge = (target.alias("t")
             .merge(src.alias("s"), f"({cond}) AND t.{q(END_AT)} IS NULL AND s.__op IN ('{CLOSE}', '{IN_PLACE}')")
             .whenMatchedUpdate(condition=f"s.__op = '{IN_PLACE}'", set=in_place)
             .whenMatchedUpdate(set={q(END_AT): F.col("s.__first")})
             .whenNotMatchedInsert(condition=f"s.__op = '{NEW_VERSION}'", values=ins))
    lake.with_txn(version, merge.execute, path)
