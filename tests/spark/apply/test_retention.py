"""The bronze changelog stays bounded (`retention`): what a restart no longer needs (watermark rows, applied rows,
second copies of a table shape) is deleted every few micro-batches, and a restart after the trims still applies
the rest of the stream exactly (the lake equals upstream). The full changelog keeps everything unless given a
retention."""

from __future__ import annotations

from pathlib import Path

from changefeed.model import Kind
from changefeed.spark.apply import ApplyOptions, ChangeApplier, maintenance
from changefeed.spark.apply.retention import Trim, condition, trim_bound
from changefeed.spark.apply.state import ConsumerState
from changefeed.spark.pipeline import read_changes
from changefeed.traits import stream_traits
from changefeed.tso import compose
from changefeed.upstream import final_state
from changefeed.workload import generate

from ..test_pipeline import lake_equals, produce

ROWS = "kind IN ('insert', 'update', 'delete')"


def test_the_bound_follows_the_state_the_batch_started_from() -> None:
    st = ConsumerState()
    st.applied_ts = 500
    st.key_held = {7: (1, 2), 9: (3, 4)}
    assert trim_bound(ApplyOptions(), st, 12, 0) == Trim(12, 500)
    assert trim_bound(ApplyOptions(watermarks=False), st, 12, 0) == Trim(7, None)  # batch 7 still holds rows
    assert trim_bound(ApplyOptions(changelog="full"), st, 12, 0) is None  # an audit log: kept whole
    full = ApplyOptions(changelog="full", changelog_retention_hours=2)
    assert trim_bound(full, st, 12, 3 * 3_600_000) == Trim(12, 500, compose(3_600_000))
    cond = condition(Trim(12, 500, None, "op = 'T'"), [(3, "t", 0, 5, 0)])
    assert "_batch < 12 AND commit_ts <= 500" in cond and "NOT coalesce(op = 'T', false)" in cond
    assert "NOT IN ('3/t/0/5/0')" in cond and "kind = 'watermark'" in cond and "'ddl'" not in cond


def test_the_changelog_is_trimmed_to_what_a_restart_needs(spark, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(maintenance, "TRIM_EVERY", 2)
    monkeypatch.setattr(maintenance, "COMPACT_MIN_FILES", 4)
    events = list(generate(seed=23, transactions=50))
    stream, lake, full = tmp_path / "stream", tmp_path / "lake", tmp_path / "full"
    produce(tmp_path, f"file://{stream}/t?protocol=canal-json&enable-tidb-extension=true&partition-num=3", events)
    changes = read_changes(spark, f"file://{stream}/t", "canal-json", {"enable-tidb-extension": "true"},
                           streaming=False, schema_store=str(tmp_path / "schemas")).persist()
    n = max(r[0] for r in changes.groupBy("partition").count().select("count").collect())
    cuts = [n * i // 6 + (i == 6) for i in range(7)]
    batches = [changes.where(f"offset >= {lo} AND offset < {hi}").select(*changes.columns)
               for lo, hi in zip(cuts, cuts[1:], strict=False)]
    tr = stream_traits("canal-json", {"enable-tidb-extension": "true"})

    def opts(**kw: object) -> ApplyOptions:
        return ApplyOptions(watermarks=tr.watermarks, ddl_definitions=tr.ddl_definitions, text_dialect=tr.text_dialect,
                            untimed_deletes=tr.untimed_deletes, positions=tr.binlog_positions, **kw)  # type: ignore[arg-type]

    first = ChangeApplier(spark, str(lake), options=opts(), partitions={"t": 3})
    applied = []
    for b in range(4):
        applied.append(first.process(batches[b], b).applied_ts)
    bronze = spark.read.format("delta").load(first.layout.changelog)
    # trimmed after batches 1 and 3, each up to the watermark its batch started from
    floor = applied[2]
    gone = bronze.where(f"_batch < 3 AND commit_ts <= {floor} AND (kind = 'watermark' OR ({ROWS} AND table_def IS "
                        "NULL))").count()
    assert gone == 0
    reach = f"_batch < 3 AND commit_ts <= {floor}"
    shapes = bronze.where(f"{ROWS} AND table_def IS NOT NULL AND {reach}")
    assert shapes.groupBy("table_def").count().where("count > 1").count() == 0  # one copy of a shape at most
    assert bronze.where("kind = 'ddl'").count() == changes.where(f"offset < {cuts[4]} AND kind = 'ddl'").count()  # kept
    kept = bronze.count()
    total = changes.where(f"{ROWS} OR kind = 'watermark'").count()
    assert kept < total // 3, (kept, total)
    from deltalake import DeltaTable

    assert len(DeltaTable(first.layout.changelog).file_uris()) <= maintenance.COMPACT_MIN_FILES  # and compacted

    # a restart reads back what it needs from the trimmed changelog and applies the rest exactly (one micro-batch:
    # what it reads back is the same for one or several)
    again = ChangeApplier(spark, str(lake), options=opts(), partitions={"t": 3})
    again.process(changes.where(f"offset >= {cuts[4]}").select(*changes.columns), 4)
    lake_equals(spark, lake, final_state(events))

    # the full changelog: every change kept without a retention, trimmed with one (0 hours: any age)
    whole = ChangeApplier(spark, str(full), options=opts(changelog="full"), partitions={"t": 3})
    whole.process(batches[0], 0)
    rows_in = changes.where(f"offset < {cuts[1]} AND kind <> 'error'").count()
    assert spark.read.format("delta").load(whole.layout.changelog).count() == rows_in
    aged = ChangeApplier(spark, str(full), options=opts(changelog="full", changelog_retention_hours=0),
                         partitions={"t": 3})
    reached = aged.process(batches[1], 1).applied_ts
    aged.process(batches[2], 2)  # trimmed after it: batches 0 and 1, up to the watermark batch 1 reached
    logged = spark.read.format("delta").load(whole.layout.changelog)
    assert logged.where(f"_batch < 2 AND commit_ts <= {reached} AND (kind = 'watermark' OR ({ROWS} AND table_def IS "
                        "NULL))").count() == 0
    assert logged.where(f"_batch < 2 AND commit_ts > {reached} AND kind = 'watermark'").count() > 0  # not yet
    assert logged.where("kind = 'ddl'").count() == changes.where(f"offset < {cuts[3]} AND kind = 'ddl'").count()
    assert logged.count() < changes.where(f"offset < {cuts[3]} AND kind <> 'error'").count()
    assert sum(1 for e in events if e.kind in (Kind.INSERT, Kind.UPDATE, Kind.DELETE)) > kept
    changes.unpersist()
