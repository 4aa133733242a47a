"""The BOOTSTRAP cadence with a fake clock (no sleeping)."""

from __future__ import annotations

from changefeed.codecs import make_encoder
from changefeed.config import build_config
from changefeed.model import Column, Event, Index, Kind, TableInfo
from changefeed.simple import Bootstrapper


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def table(name: str = "t", tid: int = 1, version: int = 1) -> TableInfo:
    return TableInfo("d", name, [Column("id", "int", nullable=False, primary_key=True)],
                     [Index("PRIMARY", ["id"], primary=True, unique=True)], tid, version)


def row(t: TableInfo, i: int = 1) -> Event:
    return Event(kind=Kind.INSERT, commit_ts=i << 18, table=t, after={"id": i})


def kinds(bs: Bootstrapper, ev: Event) -> int:
    return len(bs.before_row(ev))


def test_first_row_of_a_table_gets_a_bootstrap_first():
    clock = Clock()
    bs = Bootstrapper(120, 10000, clock=clock)
    t, u = table("t", 1), table("u", 2)
    [b] = bs.before_row(row(t))
    assert b.kind is Kind.BOOTSTRAP and b.table is t and b.commit_ts == 0
    assert bs.before_row(row(t, 2)) == []
    assert len(bs.before_row(row(u))) == 1  # each table on its own


def test_every_interval_and_every_n_messages():
    clock = Clock()
    bs = Bootstrapper(120, 5, clock=clock)
    t = table()
    assert kinds(bs, row(t)) == 1
    assert [kinds(bs, row(t, i)) for i in range(2, 7)] == [0, 0, 0, 0, 1]  # the 5th DML since the last one
    clock.now += 119
    assert kinds(bs, row(t)) == 0
    clock.now += 1
    assert kinds(bs, row(t)) == 1  # 120 s since the last
    # time alone: tick() sends for tables that had no DML in between
    clock.now += 120
    assert [b.table for b in bs.tick()] == [t]
    assert bs.tick() == []


def test_idle_table_is_forgotten_until_its_next_dml():
    clock = Clock()
    bs = Bootstrapper(120, 10000, clock=clock)
    t = table()
    bs.before_row(row(t))
    clock.now += 30 * 60 + 1
    assert bs.tick() == []  # inactive for 30 minutes: no more periodic bootstraps
    assert kinds(bs, row(t)) == 1  # and its next DML brings one first


def test_disabled_when_set_to_zero():
    for interval, count in ((0, 0), (0, 10), (10, 0)):
        bs = Bootstrapper(interval, count, clock=Clock())
        assert bs.before_row(row(table())) == [] and bs.tick() == []


def test_a_ddl_changes_what_later_bootstraps_carry():
    clock = Clock()
    bs = Bootstrapper(120, 2, clock=clock)
    t1, t2 = table(version=1), table(version=2)
    bs.before_row(row(t1))
    bs.before_row(row(t2))
    [b] = bs.before_row(row(t2))
    assert b.table is t2


def test_encoder_sends_bootstraps_to_partition_zero_when_not_to_all():
    clock = Clock()
    cfg = build_config("simple", {"send-bootstrap-to-all-partition": "false"})
    enc = make_encoder(cfg, clock_s=clock, clock_ms=lambda: 1)
    msgs = enc.encode(row(table()))
    assert [m.kind for m in msgs] == [Kind.BOOTSTRAP, Kind.INSERT]
    assert msgs[0].partition == 0 and msgs[1].partition is None
    cfg = build_config("simple")
    msgs = make_encoder(cfg, clock_s=clock, clock_ms=lambda: 1).encode(row(table()))
    assert msgs[0].partition is None  # all partitions: the router broadcasts it


def test_primary_key_columns_are_not_nullable_when_the_definition_does_not_say():
    """TestNewTableSchema (tiflow pkg/sink/codec/simple/message_test.go): `id int, primary key(id)` and `t tinyint
    primary key` are written `nullable: false` (MySQL makes a primary key NOT NULL); a definition that leaves
    nullability unknown (an event line, a protocol that does not carry it) must not make them nullable."""
    from changefeed.simple.schema import table_schema

    by_index = TableInfo("test", "t", [Column("id", "int"), Column("v", "varchar(8)")],
                         [Index("PRIMARY", ["id"], primary=True, unique=True)], 1, 1)
    by_flag = TableInfo("test", "t", [Column("t", "tinyint", primary_key=True), Column("v", "varchar(8)")], [], 2, 1)
    composite = TableInfo("test", "t", [Column("a", "int"), Column("b", "varchar(8)"), Column("v", "int")],
                          [Index("PRIMARY", ["a", "b"], primary=True, unique=True)], 3, 1)
    for t in (by_index, by_flag, composite):
        got = table_schema(t)
        assert {c["name"]: c["nullable"] for c in got["columns"]} == {
            c.name: c.name == "v" for c in t.columns}, t.columns
        assert all(not i["nullable"] for i in got["indexes"] if i["primary"])
