"""The ordering rule between micro-batches, without Spark (in the style of TiCDC's kafka-consumer writer tests)."""

from __future__ import annotations

import sqlite3

from changefeed.spark.apply import schedule
from changefeed.spark.apply.ddlplan import Ddl


def _ddl(ts: int, query: str = "ALTER TABLE t ADD c INT") -> Ddl:
    return Ddl(ts, query, "ActionAddColumn", "db", "t", None, None)


def _rows_in(sql: str, stamps: list[int]) -> list[int]:
    """The commit ts among `stamps` a window's SQL condition selects (run by SQLite: the same text Spark gets)."""
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE r (commit_ts INTEGER)")
    con.executemany("INSERT INTO r VALUES (?)", [(s,) for s in stamps])
    return sorted(r[0] for r in con.execute(f"SELECT commit_ts FROM r WHERE {sql}"))


def test_global_watermark_is_the_least_over_partitions():
    marks = {"t/0": 30, "t/1": 10, "t/2": 20}
    assert schedule.global_watermark(marks, {"t": 3}) == 10
    marks["t/1"] = 40
    assert schedule.global_watermark(marks, {"t": 3}) == 20


def test_global_watermark_stays_zero_while_a_partition_has_none():
    assert schedule.global_watermark({"t/0": 30, "t/2": 20}, {"t": 3}) == 0
    assert schedule.global_watermark({}, {"t": 1}) == 0
    assert schedule.global_watermark({}, {}) == 0
    # partitions of every topic count
    assert schedule.global_watermark({"a/0": 5, "b/0": 7}, {"a": 1, "b": 2}) == 0


def test_global_watermark_without_partition_counts_takes_the_partitions_seen():
    assert schedule.global_watermark({"t/0": 30, "t/5": 25}, {}) == 25


def test_window_is_open_below_and_closed_above():
    assert schedule.next_window(100, 100) is None
    assert schedule.next_window(100, 90) is None
    w = schedule.next_window(100, 200)
    assert w is not None
    assert 100 not in w and 101 in w and 200 in w and 201 not in w
    assert _rows_in(w.sql(), [99, 100, 101, 150, 200, 201]) == [101, 150, 200]


def test_redelivered_rows_at_or_below_applied_never_enter_a_window_again():
    applied = 0
    delivered = []
    for stamps, mark in (([10, 20], 20), ([10, 20, 30], 30)):  # the second batch repeats the first's rows
        w = schedule.next_window(applied, mark)
        assert w is not None
        delivered += _rows_in(w.sql(), stamps)
        applied = mark
    assert delivered == [10, 20, 30]


def test_ddls_in_a_window_in_commit_order():
    pending = [_ddl(30, "b"), _ddl(10, "a"), _ddl(50, "c"), _ddl(20, "z")]
    got = schedule.ddls_in(pending, 10, 30, keyed=False)
    assert [d.commit_ts for d in got] == [20, 30]  # 10 is at the window's lower end: applied already
    got = schedule.ddls_in(pending, -1, 30, keyed=True)
    assert [d.commit_ts for d in got] == [10, 20, 30]


def test_a_ddl_is_a_barrier_until_every_partition_of_its_topic_has_its_copy():
    d = _ddl(100)
    copies = {(100, d.query): {"t"}}
    # partition 1 has not delivered its copy: its rows before the DDL may still come
    assert schedule.barrier([d], copies, {"t/0": 100}, {"t": 2}) == 99
    assert schedule.barrier([d], copies, {"t/0": 100, "t/1": 50}, {"t": 2}) == 99
    assert schedule.barrier([d], copies, {"t/0": 100, "t/1": 100}, {"t": 2}) == schedule.UNBOUNDED


def test_the_first_waiting_ddl_is_the_barrier():
    early, late = _ddl(100, "early"), _ddl(200, "late")
    copies = {(100, "early"): {"t"}, (200, "late"): {"t"}}
    assert schedule.barrier([late, early], copies, {"t/0": 200}, {"t": 2}) == 99
    assert schedule.barrier([late, early], copies, {"t/0": 200, "t/1": 150}, {"t": 2}) == 199


def test_a_ddl_with_no_broadcast_copies_holds_nothing():
    assert schedule.barrier([_ddl(100)], {}, {}, {"t": 2}) == schedule.UNBOUNDED


def test_redelivery_floors_drop_older_rows_of_a_partition_and_table():
    floors = schedule.RedeliveryFloors({})
    assert floors.admits("t", 0, "db", "a", 5)  # no floor yet
    floors.raise_to("t", 0, "db", "a", 50)
    floors.raise_to("t", 0, "db", "a", 40)  # floors never go down
    assert not floors.admits("t", 0, "db", "a", 49)  # a redelivered (older) row
    assert floors.admits("t", 0, "db", "a", 50)  # the rest of the transaction applied last
    assert floors.admits("t", 0, "db", "a", 51)
    assert floors.admits("t", 1, "db", "a", 10)  # another partition
    assert floors.admits("t", 0, "db", "b", 10)  # another table
    assert floors.admits("t", 0, "db", "a", None)  # no commit ts: nothing to compare
    assert floors.admits("t", 0, "db", "a", 10, positioned=True)  # a binlog position orders it, not the clock


def test_redelivery_floors_persist_in_the_dict_they_wrap():
    persisted: dict[str, int] = {}
    schedule.RedeliveryFloors(persisted).raise_to("t", 3, "db", "a", 7)
    assert not schedule.RedeliveryFloors(dict(persisted)).admits("t", 3, "db", "a", 6)


def test_keyed_batches_stay_held_while_they_have_rows_past_the_barrier():
    held = schedule.keyed_held({1: (0, 300)}, 2, 200, 250)
    assert held == {1: (200, 300), 2: (200, 250)}
    held = schedule.keyed_held(held, 3, schedule.UNBOUNDED, 10)
    assert held == {}
    # a replayed batch is not kept twice
    assert schedule.keyed_held({2: (0, 250)}, 2, 100, 250) == {2: (100, 250)}


def test_txn_versions_increase_in_apply_order():
    assert schedule.txn_version(12345) == 12345  # with watermarks: the commit ts
    order = [schedule.txn_version(0, keyed_batch=b, step=s, ddl=d)
             for b in (7, 8) for s in range(3) for d in (False, True)]
    assert order == sorted(order) and len(set(order)) == len(order)


def test_spans_find_the_tables_a_window_touches():
    agg = [{"kind": "insert", "database": "db", "table": "a", "n": 2, "lo": 10, "ts": 20},
           {"kind": "update", "database": "db", "table": "a", "n": 1, "lo": 5, "ts": 15},
           {"kind": "insert", "database": "db", "table": "b", "n": 4, "lo": 40, "ts": 60},
           {"kind": "watermark", "database": None, "table": None, "n": 1, "lo": 99, "ts": 99}]
    spans = schedule.batch_spans(agg)
    assert spans == {("db", "a"): (5, 20, 3), ("db", "b"): (40, 60, 4)}
    assert schedule.tables_in_window([spans], 0, 30) == {("db", "a"): 3}
    assert schedule.tables_in_window([spans], 20, 50) == {("db", "b"): 4}
    assert schedule.tables_in_window([spans, spans], 0, 100) == {("db", "a"): 6, ("db", "b"): 8}
    untimed = [{"kind": "delete", "database": "db", "table": "a", "n": 1, "lo": None, "ts": None}]
    assert schedule.batch_spans(agg + untimed) is None


def test_window_spans_unknown_after_a_restart():
    spans = {1: {("db", "a"): (1, 2, 1)}}
    assert schedule.window_spans(spans, {1: 2}, [1]) == [spans[1]]
    assert schedule.window_spans(spans, {1: 2, 2: 9}, [1, 2]) is None  # batch 2 read back from the changelog
    assert schedule.window_spans(spans, {1: 2}, [1, 3]) == [spans[1], {}]  # batch 3 holds no rows


def test_delete_floors_pass_the_latest_row_and_watermark():
    floors: dict[str, int] = {"t/0": 5}
    schedule.raise_delete_floors(floors, [{"kind": "insert", "topic": "t", "partition": 0, "ts": 10},
                                          {"kind": "watermark", "topic": "t", "partition": 1, "ts": 20},
                                          {"kind": "error", "topic": "t", "partition": 2, "ts": 30}])
    assert floors == {"t/0": 10, "t/1": 21}
    schedule.raise_delete_floors(floors, [{"kind": "insert", "topic": "t", "partition": 0, "ts": 3}])
    assert floors["t/0"] == 10
