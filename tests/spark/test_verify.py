"""`verify` over many tables: every table's count and checksum in one pass, the differing rows only for the
tables that differ (a difference planted in one of them is found and named; the equal ones pass)."""

from __future__ import annotations

from pathlib import Path

from changefeed.model import Column, Event, Index, Kind, TableInfo
from changefeed.spark.verify import verify
from changefeed.upstream import final_state

from .test_pipeline import consume, produce

TABLES = 40


def _ts(i: int) -> int:
    return (1_763_000_000_000 + i) << 18


def _events() -> list[Event]:
    evs: list[Event] = []
    tick = 0
    for k in range(TABLES):
        t = TableInfo("many", f"t{k:02d}", columns=[Column("id", "int", nullable=False), Column("name", "varchar(20)"),
                                                  Column("price", "decimal(8,2)")],
                      indexes=[Index("PRIMARY", ["id"], primary=True, unique=True)], version=1)
        tick += 1
        evs.append(Event(Kind.DDL, _ts(tick), table=t, query=f"CREATE TABLE many.t{k:02d} (id int NOT NULL PRIMARY "
                         "KEY, name varchar(20), price decimal(8,2))", ddl_type="ActionCreateTable"))
        tick += 1
        for i in range(k % 5 + 3):
            evs.append(Event(Kind.INSERT, _ts(tick), table=t, after={"id": i, "name": f"n{k}-{i}",
                                                                     "price": f"{i}.{k:02d}"}))
        tick += 1
        evs.append(Event(Kind.UPDATE, _ts(tick), table=t, before={"id": 1, "name": f"n{k}-1", "price": f"1.{k:02d}"},
                         after={"id": 1, "name": f"n{k}-1", "price": "9.99"}))
        tick += 1
        evs.append(Event(Kind.DELETE, _ts(tick), table=t, before={"id": 0, "name": f"n{k}-0", "price": f"0.{k:02d}"}))
    return evs


def _jobs(spark, group: str, fn):
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    try:
        out = fn()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return out, len(sc.statusTracker().getJobIdsForGroup(group))


def test_verify_names_the_one_table_of_many_that_differs(spark, tmp_path: Path) -> None:
    evs = _events()
    folder, lake = tmp_path / "s", tmp_path / "lake"
    produce(tmp_path, f"file://{folder}/t?protocol=canal-json&enable-tidb-extension=true&partition-num=2", evs)
    consume(spark, folder, lake, "canal-json", {"enable-tidb-extension": "true"})
    expected = final_state(evs)
    assert len(expected.tables) == TABLES

    rep, equal_jobs = _jobs(spark, "verify-equal", lambda: verify(spark, str(lake), expected, chunk=25))
    assert rep.ok, [(t.name, t.problem, t.samples) for t in rep.tables if not t.ok]
    assert [t.name for t in rep.tables] == [f"many.t{k:02d}" for k in range(TABLES)]
    assert all(t.actual == t.expected == k % 5 + 2 and t.actual_checksum == t.expected_checksum != 0
               for k, t in enumerate(rep.tables))
    # the checksums of 40 tables on both sides in a few jobs, not several per table: the tables of one shape are
    # one relation each side (`verify_groups`), one aggregation over them
    assert equal_jobs <= 3, equal_jobs

    # one row of one table changed behind the consumer's back, one row of another removed
    spark.sql(f"UPDATE delta.`{lake}/many/t17` SET name = 'planted' WHERE id = 2")
    spark.sql(f"DELETE FROM delta.`{lake}/many/t31` WHERE id = 3")
    rep = verify(spark, str(lake), expected, chunk=25)
    bad = {t.name: t for t in rep.tables if not t.ok}
    assert set(bad) == {"many.t17", "many.t31"}
    t17, t31 = bad["many.t17"], bad["many.t31"]
    assert (t17.actual, t17.missing, t17.extra) == (t17.expected, 1, 1)
    assert t17.actual_checksum != t17.expected_checksum
    assert any("lake only" in s and "planted" in s for s in t17.samples)
    assert any("upstream only" in s and "n17-2" in s for s in t17.samples)
    assert (t31.actual, t31.missing, t31.extra) == (t31.expected - 1, 1, 0)
    assert any("upstream only" in s and "n31-3" in s for s in t31.samples)
    assert not any(t.samples for t in rep.tables if t.ok)


def test_a_stream_is_compared_at_the_applied_watermark(tmp_path: Path) -> None:
    """`verify --against STREAM`: the upstream state up to the lake's applied watermark, and the changes past it
    counted (a stream cut mid-transaction verifies at its last watermark)."""
    from changefeed.spark.verify import stream_at

    evs = _events()[:60]
    folder = tmp_path / "s"
    produce(tmp_path, f"file://{folder}/t?protocol=canal-json&enable-tidb-extension=true&partition-num=2", evs)
    uri = f"file://{folder}/t"
    opts = {"enable-tidb-extension": "true"}
    upto = evs[40].commit_ts
    state, past = stream_at(uri, upto, "canal-json", opts)
    assert past == sum(1 for e in evs if e.commit_ts > upto) > 0
    want = final_state(evs, upto=upto)
    assert {k: dict(v.rows) for k, v in state.tables.items()} == {k: dict(v.rows) for k, v in want.tables.items()}
    everything, none_past = stream_at(uri, 0, "canal-json", opts)  # no watermark applied yet: all of it
    assert none_past == 0
    assert sum(len(v.rows) for v in everything.tables.values()) == \
        sum(len(v.rows) for v in final_state(evs).tables.values())
