"""A micro-batch with rows past the global watermark holds only those rows (and its control rows) for the next
window, cached by its changelog append, and releases the rest of its cache: the next window scans a few rows, not
the whole batch again. The cache held must stay filled once the batch's own is released (Spark drops a cache
built on another unless it is loaded), on a replay too, where the changelog append finds its rows in."""

from __future__ import annotations

from pathlib import Path

from changefeed.model import Kind
from changefeed.spark.apply import ApplyOptions, ChangeApplier
from changefeed.spark.pipeline import read_changes
from changefeed.traits import stream_traits
from changefeed.upstream import final_state
from changefeed.workload import generate

from ..test_pipeline import copy_records, lake_equals, produce

ROWS = "kind IN ('insert', 'update', 'delete')"


def _loaded(spark, df) -> bool:
    """Whether `df`'s cache is filled (what Spark asks before keeping it when the cache under it goes)."""
    found = spark._jsparkSession.sharedState().cacheManager().lookupCachedData(df._jdf)
    return found.isDefined() and found.get().cachedRepresentation().cacheBuilder().isCachedColumnBuffersLoaded()


def test_a_batch_holds_only_the_rows_a_later_window_needs(spark, tmp_path: Path) -> None:
    events = list(generate(seed=17, transactions=60))
    staged, live, lake = tmp_path / "staged", tmp_path / "live", tmp_path / "lake"
    produce(tmp_path, f"file://{staged}/t?protocol=canal-json&enable-tidb-extension=true&partition-num=3", events)
    copy_records(staged, live, "t", {0: 1.0, 1: 1.0, 2: 1.0})
    changes = read_changes(spark, f"file://{live}/t", "canal-json", {"enable-tidb-extension": "true"},
                           streaming=False, schema_store=str(tmp_path / "schemas")).persist()
    half = {r["partition"]: r["n"] // 2 for r in changes.groupBy("partition").count().withColumnRenamed(
        "count", "n").collect()}
    first = " OR ".join(f"(partition = {p} AND offset < {n})" for p, n in half.items())
    parts = {"t": 3}
    tr = stream_traits("canal-json", {"enable-tidb-extension": "true"})
    opts = ApplyOptions(watermarks=tr.watermarks, ddl_definitions=tr.ddl_definitions, text_dialect=tr.text_dialect,
                        untimed_deletes=tr.untimed_deletes, positions=tr.binlog_positions)  # as apply_changes

    def batch(cond: str):  # a micro-batch's DataFrame, as foreachBatch gives one
        return changes.where(cond).select(*changes.columns)

    b0 = batch(first)
    applier = ChangeApplier(spark, str(lake), options=opts, partitions=parts)
    rep = applier.process(b0, 0)
    assert 0 < rep.applied_ts < rep.max_ts  # rows past the watermark: held for the next window
    held = applier.held[0][1]
    assert applier.held[0][0] is not b0 and not b0.is_cached  # the batch's own cache released
    assert _loaded(spark, held)
    later = f"{ROWS} AND commit_ts > {rep.applied_ts}"
    past = b0.where(later).count()
    # besides those, only the rows that carry a table's shape (restore reads them), whatever their commit ts
    assert held.where(later).count() == past > 0
    assert held.where(ROWS).count() - past == held.where(f"{ROWS} AND commit_ts <= {rep.applied_ts} AND "
                                                          "table_def IS NOT NULL").count() < b0.where(ROWS).count()

    # a restarted consumer replays batch 0 (its changelog commit is in: the append reads nothing), then batch 1
    applier.backlog.release({})  # (the first one's caches gone with it: the same plan would find them)
    again = ChangeApplier(spark, str(lake), options=opts, partitions=parts)
    again.process(batch(first), 0)
    assert _loaded(spark, again.held[0][1]) and again.held[0][1].where(later).count() == past
    again.process(batch(f"NOT ({first})"), 1)
    assert not again.held
    lake_equals(spark, lake, final_state(events))
    assert sum(1 for e in events if e.kind in (Kind.INSERT, Kind.UPDATE, Kind.DELETE)) > past
    changes.unpersist()
