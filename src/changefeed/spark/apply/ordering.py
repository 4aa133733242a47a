"""The ordering rule within a window, as Spark columns.

A key's changes are applied in the order of: the sequence columns (`sequence_by`, the commit ts by default),
then the binlog position for streams that carry one (real Debezium), then `__r` (within one sequence value a
key's delete, 0, comes before its write, 1; streams whose deletes are dated by their place, avro, keep both
at 1 so the offset decides), then the change's place in its stream (topic, partition, offset, idx). An UPDATE
that changes the key is a delete of the old key and a write of the new one. A delete that carries no commit ts
is dated by its place in its partition (`date_deletes`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from ..types import typed
from .options import sql_string

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import Column, DataFrame

    from ...model import TableInfo
    from .options import ApplyOptions

POSITION = ("__pos_file", "__pos_pos", "__pos_row")  # a change's binlog position, as `order` carries it
PLACE = ("topic", "partition", "offset", "idx")  # where a change sits in its stream
# a keyed operation (`__op`): the key's row goes, or takes the operation's image
DELETE, UPSERT = "D", "U"


def key_changed(keys: list[str]) -> str:
    """SQL: an UPDATE's before image has a key column whose value differs from its after image's."""
    return " OR ".join(f"(map_contains_key(before, {sql_string(k)}) AND before[{sql_string(k)}] IS DISTINCT FROM "
                       f"after[{sql_string(k)}])" for k in keys)


def delete_rank(o: ApplyOptions) -> int:
    """`__r` of a delete: before a write of the same sequence value (0), or by place (1, untimed deletes)."""
    return 1 if o.untimed_deletes else 0


def order(o: ApplyOptions) -> tuple[list[Column], list[str]]:
    """A change's place in its stream: the columns to carry (sequence, binlog position for streams that have
    one, topic/partition/offset/idx) and the order they sort by (`__r`, set by the caller, puts a key's
    delete before its write within one sequence value)."""
    pos = [F.get_json_object("position", "$.file").alias(POSITION[0]),  # real Debezium's binlog position,
           F.get_json_object("position", "$.pos").cast("long").alias(POSITION[1]),  # numbers as numbers
           F.get_json_object("position", "$.row").cast("long").alias(POSITION[2])] if o.positions else []
    place = [*[F.col(c) for c in o.sequence_by], *pos, *[F.col(c) for c in PLACE]]
    return place, [*o.sequence_by, *(POSITION if o.positions else ()), "__r", *PLACE]


def typed_key(t: TableInfo, keys: list[str], key_names: list[str], o: ApplyOptions,
              image: str | None = None, text: Callable[[str], Column] | None = None) -> list[Column]:
    """The key columns typed as the table's: from the columns `key_names`, or read from an image (a map column
    or SQL expression; or `text`, a column's text by its name: `projection.Image.text`) into columns of those
    names."""
    by = t.by_name
    if text is None and image is not None:
        src = F.expr(image)
        text = src.__getitem__  # a value of the map (or struct) by its key
    texts = [text(k) if text is not None else F.col(n) for k, n in zip(keys, key_names, strict=True)]
    return [(typed(c, by[k].type, json_as_variant=o.json_as_variant, dialect=o.text_dialect)
             if k in by else c).alias(n) for k, n, c in zip(keys, key_names, texts, strict=True)]


def ops(rows: DataFrame, keys: list[str], o: ApplyOptions) -> tuple[DataFrame, list[str]]:
    """Each change as one or two keyed operations: DELETE (the key) and UPSERT (the key's new image).

    An UPDATE that changes the key deletes the old key and writes the new one; within one commit ts,
    deletes come before writes (TiCDC's order when it splits such updates)."""
    changed = key_changed(keys)
    r0 = delete_rank(o)
    d = f"named_struct('op', '{DELETE}', 'img', before, 'r', {r0})"
    u = f"named_struct('op', '{UPSERT}', 'img', after, 'r', 1)"
    ops_expr = (f"CASE WHEN kind = 'delete' THEN array(named_struct('op', '{DELETE}', 'img', coalesce(before, "
                f"after), 'r', {r0})) WHEN kind = 'insert' THEN array({u}) WHEN before IS NOT NULL AND ({changed}) "
                f"THEN array({d}, {u}) ELSE array({u}) END")
    place, by = order(o)
    out = rows.select(*place, F.explode(F.expr(ops_expr)).alias("o"))
    key_names = [f"__k{i}" for i in range(len(keys))]
    out = out.select(*[c for c in out.columns if c != "o"], F.col("o.op").alias("__op"),
                     F.col("o.img").alias("__img"), F.col("o.r").alias("__r"),
                     *[F.col("o.img")[k].alias(n) for k, n in zip(keys, key_names, strict=True)])
    return out.withColumn("__ord", F.struct(*by)), key_names


def date_deletes(rows: DataFrame, floors: dict[str, int]) -> DataFrame:
    """A delete that carries no commit ts (an Avro tombstone) takes the least its partition allows: the
    latest commit ts before it in the partition, or one past the latest watermark (`floors`, per partition,
    carried over from earlier batches). It is then ordered after every earlier change of its key (one key, one
    partition) and before every later one, and no watermark has passed it. A pure function of the partition's
    messages, so a replay dates it alike."""
    from pyspark.sql import Window

    mark = (F.when(F.col("kind").isin("insert", "update", "delete") & (F.col("commit_ts") > 0), F.col("commit_ts"))
            .when(F.col("kind") == "watermark", F.col("commit_ts") + 1))
    before = Window.partitionBy("topic", "partition").orderBy("offset", "idx").rowsBetween(
        Window.unboundedPreceding, -1)
    carried = F.lit(0).cast("long")
    if floors:
        m = F.create_map(*[x for k, v in floors.items() for x in (F.lit(k), F.lit(v).cast("long"))])
        carried = F.coalesce(m[F.concat_ws("/", "topic", F.col("partition").cast("string"))], carried)
    floor = F.greatest(F.coalesce(F.max(mark).over(before), F.lit(0).cast("long")), carried)
    untimed = (F.col("kind") == "delete") & (F.coalesce(F.col("commit_ts"), F.lit(0)) == 0)
    return rows.withColumn("commit_ts", F.when(untimed, floor).otherwise(F.col("commit_ts")))
