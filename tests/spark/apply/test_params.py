"""A batch's values given to Spark as data: the same rows as literals, and the same compiled code whatever the
values (Spark's codegen metrics count every class Janino compiles)."""

from __future__ import annotations

import pytest

from changefeed.spark.apply import params
from changefeed.spark.apply.params import bind, local_rows, within
from changefeed.spark.apply.segments import TableWrite


@pytest.fixture(scope="module")
def rows(spark):  # noqa: ANN001, ANN201
    df = spark.createDataFrame([(ts, "shop", "a" if ts % 2 else "b") for ts in range(100, 200)],
                               "commit_ts long, database string, table string").persist()
    df.count()
    yield df
    df.unpersist()


def _compiles(spark) -> int:  # noqa: ANN001
    return spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount()


def test_within_selects_what_the_literal_filter_selects(rows) -> None:  # noqa: ANN001
    for lo, hi in ((99, 150), (120, 121), (150, 150), (0, 10**15)):
        got = sorted(r[0] for r in within(rows, "commit_ts > _p_lo AND commit_ts <= _p_hi", _p_lo=lo, _p_hi=hi)
                     .select("commit_ts").collect())
        assert got == [ts for ts in range(100, 200) if lo < ts <= hi]
    # the columns are the frame's own: the values are dropped after the filter
    assert within(rows, "commit_ts > _p_lo", _p_lo=1).columns == rows.columns


def test_bind_adds_the_values_as_columns(rows) -> None:  # noqa: ANN001
    out = bind(rows, _batch=7, _none=None).select("_batch", "_none").distinct().collect()
    assert [(r["_batch"], r["_none"]) for r in out] == [(7, None)]


def test_new_bounds_compile_no_new_code(spark, rows) -> None:  # noqa: ANN001
    def count(lo: int, hi: int) -> int:
        return within(rows, "commit_ts > _p_lo AND commit_ts <= _p_hi", _p_lo=lo, _p_hi=hi) \
            .groupBy("database").count().collect()[0]["count"]

    count(100, 150)  # compiled once
    before = _compiles(spark)
    bounds = [(100 + 30 * i, 170 + 10 * i) for i in range(1, 4)]
    assert [count(lo, hi) for lo, hi in bounds] == [sum(lo < ts <= hi for ts in range(100, 200)) for lo, hi in bounds]
    assert _compiles(spark) == before
    # the same filter with the bounds as literals compiles anew for new bounds (what the bound columns avoid)
    rows.where("commit_ts > 131 AND commit_ts <= 177").groupBy("database").count().collect()
    assert _compiles(spark) > before


def test_a_table_writes_rows_within_its_bounds(spark, rows) -> None:  # noqa: ANN001
    w = TableWrite("shop", "a", 1, rows, after=120, upto=140)
    assert sorted(r[0] for r in w.rows.select("commit_ts").collect()) == [ts for ts in range(121, 141, 2)]
    unbounded = TableWrite("shop", "b", 1, rows)
    assert unbounded.rows.count() == 50
    w.rows.count()
    before = _compiles(spark)
    assert TableWrite("shop", "a", 2, rows, after=102, upto=158).rows.count() == 28
    assert _compiles(spark) == before


def _jobs(spark) -> int:  # noqa: ANN001
    return spark.sparkContext._jsc.sc().dagScheduler().nextJobId()


def test_values_run_no_job_of_their_own(spark, rows) -> None:  # noqa: ANN001
    """The values reach the query without a job (a broadcast of their relation ran one per query)."""
    def jobs_of(df) -> tuple[int, int]:  # noqa: ANN001
        before = _jobs(spark)
        n = df.groupBy("database").count().collect()[0]["count"]
        return n, _jobs(spark) - before

    plain, plain_jobs = jobs_of(rows.where("commit_ts > 120"))
    bound, bound_jobs = jobs_of(within(rows, "commit_ts > _p_lo AND commit_ts <= _p_hi", _p_lo=120, _p_hi=10**15))
    both, both_jobs = jobs_of(bind(rows, _batch=3).where("commit_ts > 120 AND _batch = 3"))
    assert (plain, bound, both) == (79, 79, 79)
    assert bound_jobs == plain_jobs and both_jobs == plain_jobs


def test_local_rows_from_arrow_past_its_threshold_are_the_values_rows(spark, rows) -> None:  # noqa: ANN001
    """Many rows come from Arrow (Spark's parser is slow on a long VALUES), few from VALUES: the same relation,
    NULLs included, joined under a broadcast in as many jobs."""
    from pyspark.sql import functions as F

    cols = [("database", "string"), ("table", "string"), ("__t", "int"), ("__lo", "long"), ("__hi", "long")]
    many = [("shop", "a" if i == 7 else f"x{i}", i, None if i % 3 else 10 * i, 150 if i == 7 else None)
            for i in range(params.ARROW_ROWS + 36)]
    few = many[:params.ARROW_ROWS]
    for got in (many, few):
        df = local_rows(spark, got, cols)
        assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == \
            [("database", "string"), ("table", "string"), ("__t", "int"), ("__lo", "bigint"), ("__hi", "bigint")]
        assert sorted(tuple(r) for r in df.collect()) == sorted(got)
    before = _jobs(spark)
    joined = rows.join(F.broadcast(local_rows(spark, many, cols)), ["database", "table"]) \
        .where("commit_ts <= __hi").count()
    arrow_jobs = _jobs(spark) - before
    before = _jobs(spark)
    assert rows.join(F.broadcast(local_rows(spark, few[:8], cols)), ["database", "table"]) \
        .where("commit_ts <= __hi").count() == joined == 25  # shop.a's rows up to 150
    assert arrow_jobs == _jobs(spark) - before
