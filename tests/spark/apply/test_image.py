"""An image read by position where its keys are the table's columns in order, by key otherwise: the same texts
and the same "holds the column" as Spark's own map lookups, whatever the order and whichever columns it has."""

from __future__ import annotations

from pyspark.sql import functions as F

from changefeed.model import Column, Index, TableInfo
from changefeed.spark.apply.projection import Image

T = TableInfo("shop", "t", columns=[Column("id", "bigint", nullable=False), Column("name", "varchar(8)"),
                                    Column("qty", "int")], indexes=[Index("PRIMARY", ["id"], primary=True)])

IMAGES = [
    [("id", "1"), ("name", "a"), ("qty", "3")],  # the table's order: read by position
    [("name", "b"), ("id", "2"), ("qty", "4")],  # another order: by key
    [("id", "3"), ("qty", "5")],  # only some columns (only-output-updated-columns)
    [("id", "4"), ("name", None), ("qty", "6")],  # a NULL value
    [("id", "5"), ("name", "c"), ("qty", "7"), ("extra", "x")],  # a column the definition lacks
    None,  # no image
]


def test_an_image_reads_what_its_map_holds(spark) -> None:  # noqa: ANN001
    df = spark.createDataFrame([(i, dict(img) if img is not None else None) for i, img in enumerate(IMAGES)],
                               "n int, after map<string,string>")
    img = Image(T, "after")
    names = ["id", "name", "qty", "extra", "gone"]
    got = df.orderBy("n").select(*[img.text(c).alias(f"t_{c}") for c in names],
                                 *[img.has(c).alias(f"h_{c}") for c in names]).collect()
    for row, pairs in zip(got, IMAGES, strict=True):
        m = dict(pairs) if pairs is not None else None
        for c in names:
            assert row[f"t_{c}"] == (m.get(c) if m is not None else None), (pairs, c)
            assert row[f"h_{c}"] == ((c in m) if m is not None else None), (pairs, c)


def test_the_order_check_is_part_of_the_plan(spark) -> None:  # noqa: ANN001
    # the positional read applies only where the keys are the table's columns in order: a reordered image of the
    # same columns reads each value by its key (a positional read would swap id and name here)
    df = spark.createDataFrame([({"name": "9", "id": "8", "qty": "1"},)], "after map<string,string>")
    img = Image(T, "after")
    r = df.select(img.text("id").alias("id"), img.text("name").alias("name"),
                  F.map_values("after")[0].alias("first")).collect()[0]
    assert (r["id"], r["name"], r["first"]) == ("8", "9", "9")
