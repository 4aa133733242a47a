"""What survives a restart: the progress record round-trips the consumer's state (no Spark)."""

from __future__ import annotations

import orjson

from changefeed.spark import table_features as features
from changefeed.spark.apply import BatchReport, ConsumerState
from changefeed.spark.apply.state import PROGRESS_PREFIX, progress_record


def test_state_round_trips_through_the_progress_record_as_json():
    st = ConsumerState(applied_ts=42, watermarks={"t/0": 50, "t/1": 42}, floors={"t/0": 51}, ddl_ts=40,
                       key_held={3: (30, 60), 12: (45, 70)}, key_floors={"t/0/db.a": 44})
    rep = BatchReport(7, rows_in=5, errors=1, phases={"merge": 1.23456})
    rep.upgrades.append(features.Upgrade("db.a", features.COLUMN_MAPPING, "ALTER TABLE a DROP c", 40))
    rec = orjson.loads(orjson.dumps(progress_record(7, st, rep, 1000)))  # as it is written and read back
    assert ConsumerState.from_record(rec) == st
    assert rec["batch_id"] == 7 and rec["rows"] == 5 and rec["errors"] == 1 and rec["at_ms"] == 1000
    assert rec["seconds"] == {"merge": 1.235}
    assert rec["upgrades"] == [{"table": "db.a", "feature": features.COLUMN_MAPPING, "ddl": "ALTER TABLE a DROP c",
                                "commit_ts": 40}]


def test_restore_keeps_the_object_others_hold():
    st = ConsumerState()
    held_by_catalog = st
    st.restore({"applied_ts": 9, "watermarks": {"t/0": 9}})
    assert held_by_catalog.applied_ts == 9 and held_by_catalog.watermarks == {"t/0": 9}


def test_records_of_older_versions_restore_with_defaults():
    st = ConsumerState.from_record({"applied_ts": 5, "watermarks": {}, "floors": None, "held": None})
    assert st == ConsumerState(applied_ts=5)


def test_progress_files_sort_in_batch_order():
    names = [f"{PROGRESS_PREFIX}{b:020d}.json" for b in (9, 10, 100, 2)]
    assert [int(n[len(PROGRESS_PREFIX):-5]) for n in sorted(names)] == [2, 9, 10, 100]
