"""Topics and partitions as TiCDC's event router decides them. Expected partitions are those of TiCDC's own
tests (ticdc downstreamadapter/sink/eventrouter: event_router_test.go, partition/*_test.go)."""

from __future__ import annotations

import pytest

from changefeed.config import ConfigError
from changefeed.model import Column, Event, Index, Kind, TableInfo
from changefeed.routing import DispatchRule, Partitioner, Router, TopicExpression
from changefeed.tablefilter import TableFilter


def row(schema, table, cols, values, pk=None, indexes=None, ts=1):
    t = TableInfo(schema, table, cols, indexes or ([Index("PRIMARY", pk, primary=True, unique=True)] if pk else []))
    return Event(kind=Kind.INSERT, commit_ts=ts, table=t, after=dict(zip([c.name for c in cols], values, strict=True)))


def ints(*names, not_null=()):
    return [Column(n, "int", nullable=n not in not_null) for n in names]


@pytest.mark.parametrize(("values", "expected"), [((11, 12), 2), ((22, 22), 11), ((11, 33), 2)])
def test_index_value_single_pk(values, expected):
    ev = row("test", "t1", ints("a", "b", not_null=("a",)), values, pk=["a"])
    assert Partitioner("index-value").partition(ev, 16) == expected


@pytest.mark.parametrize(("values", "expected"), [((11, 22), 5), ((11, 0), 14), ((11, 33), 2)])
def test_index_value_composite_pk(values, expected):
    ev = row("test", "t2", ints("a", "b", not_null=("a", "b")), values, pk=["a", "b"])
    assert Partitioner("index-value").partition(ev, 16) == expected


def test_index_value_named_index_and_implicit_pk():
    cols = ints("COL2", "Col1", "col3", not_null=("COL2", "Col1"))
    idx = [Index("index1", ["COL2", "Col1"], unique=True)]
    ev = row("test", "t1", cols, (22, 11, 33), indexes=idx)
    assert Partitioner("index-value", index="index1").partition(ev, 16) == 5
    assert Partitioner("index-value", index="INDEX1").partition(ev, 16) == 5
    assert Partitioner("index-value").partition(ev, 16) == 5  # the NOT NULL unique index is the handle key
    with pytest.raises(ConfigError, match="no index 'index2'"):
        Partitioner("index-value", index="index2").partition(ev, 16)


def test_columns_dispatcher():
    ev = row("test", "t1", ints("COL2", "Col1", "col3"), (22, 11, 33))
    assert Partitioner("columns", columns=["col2", "col1"]).partition(ev, 16) == 5
    assert Partitioner("columns", columns=["COL2", "Col1"]).partition(ev, 16) == 5
    with pytest.raises(ConfigError, match="col-not-found"):
        Partitioner("columns", columns=["col-2", "col-not-found"]).partition(ev, 16)


def test_table_and_ts_dispatchers():
    assert Partitioner("default").partition(row("test_default1", "table", ints("a"), (1,)), 16) == 14
    assert Partitioner("table").partition(row("test_table", "table", ints("a"), (1,)), 16) == 15
    assert Partitioner("ts").partition(row("a", "table", ints("a"), (1,), ts=1), 2) == 1
    ev = row("test_index_value", "table1", ints("a", "b", not_null=("a",)), (11, 22), pk=["a"], ts=2)
    assert Partitioner("index-value").partition(ev, 10) == 9


def rules():
    def r(m, p, t=None):
        return DispatchRule(TableFilter(m), TopicExpression(t) if t else None, Partitioner(p))
    return [r(["test_default1.*"], "default"), r(["test_table.*"], "table", "hello_{schema}_world"),
            r(["test_index_value.*"], "index-value", "{schema}_world"), r(["test.*"], "rowid", "hello_{schema}"),
            r(["*.*", "!*.test"], "ts", "{schema}_{table}"), r(["hard_code_schema.*"], "default", "hard_code_topic")]


def test_topics_like_ticdc():
    router = Router("test", rules())
    assert router.topic("test_default1", "table") == "test"
    assert router.topic("test_table", "table") == "hello_test_table_world"
    assert router.topic("test_index_value", "table") == "test_index_value_world"
    assert router.topic("test", "table") == "hello_test"
    assert router.topic("sbs", "table") == "sbs_table"
    assert router.topic("a", "table") == "a_table"
    assert router.topic("sbs", "test") == "test"  # !*.test: no rule, the default topic
    assert TopicExpression("{schema}_{table}").topic("db-1", "t 2.x") == "db-1_t_2.x"


def test_table_filter_syntax():
    f = TableFilter(["db.*", "!db.secret", "`odd.name`.t?", "shop[0-9].ord*", "# comment"])
    assert f.match("db", "a") and f.match("DB", "Anything")  # case-insensitive
    assert not f.match("db", "secret") and not f.match("other", "a")
    assert f.match("odd.name", "t1") and not f.match("odd.name", "t12")
    assert f.match("shop3", "orders") and not f.match("shopx", "orders")
    assert TableFilter(["*.*", "!*.test"]).match("x", "y") and not TableFilter(["*.*", "!*.test"]).match("x", "test")
    with pytest.raises(ConfigError, match="schema.table"):
        TableFilter(["nodot"])


def test_update_that_moves_the_key_is_split():
    cols = ints("id", "v", not_null=("id",))
    t = TableInfo("d", "t", cols, [Index("PRIMARY", ["id"], primary=True, unique=True)])
    router = Router("x", [DispatchRule(TableFilter(["*.*"]), None, Partitioner("index-value"))], partition_num=4)
    moved = Event(kind=Kind.UPDATE, commit_ts=5, table=t, before={"id": 1, "v": 1}, after={"id": 2, "v": 1})
    out = router.split_update(moved)
    assert [e.kind for e in out] == [Kind.DELETE, Kind.INSERT]
    assert out[0].before == {"id": 1, "v": 1} and out[1].after == {"id": 2, "v": 1}
    moved.start_ts, moved.physical_table_id = 3, 77  # a partition's row: both halves stay the partition's
    assert [(e.start_ts, e.physical_table_id) for e in router.split_update(moved)] == [(3, 77), (3, 77)]
    same = Event(kind=Kind.UPDATE, commit_ts=5, table=t, before={"id": 1, "v": 1}, after={"id": 1, "v": 2})
    assert router.split_update(same) == [same]
    assert router.partition(Event(kind=Kind.WATERMARK, commit_ts=5)) is None  # every partition
    assert Router("x", canal_ddl_to_partition_zero=True).partition(
        Event(kind=Kind.DDL, commit_ts=1, table=t, query="q", ddl_type="ActionNone")) == 0


def test_unknown_dispatcher_is_named():
    with pytest.raises(ConfigError, match="unknown-dispatcher"):
        Partitioner("unknown-dispatcher")


def test_avro_refuses_dispatchers_that_share_a_topic():
    """TiCDC refuses an Avro changefeed unless every topic rule contains {schema} and {table}."""

    with pytest.raises(ConfigError, match="one table per topic"):
        Router("t").require_table_per_topic("avro")
    shared = DispatchRule(TableFilter(["*.*"]), TopicExpression("{schema}"), Partitioner("default"))
    with pytest.raises(ConfigError, match=r"\{schema\} and \{table\}"):
        Router("t", [shared]).require_table_per_topic("avro")
    per_table = DispatchRule(TableFilter(["*.*"]), TopicExpression("x_{schema}_{table}"), Partitioner("default"))
    r = Router("t", [per_table])
    r.require_table_per_topic("avro")
    assert r.topic("db", "t1") == "x_db_t1"
    assert r.topic_globs() == ["t", "x_*_*"]


def test_column_filter_is_tidbs():
    from changefeed.tablefilter import ColumnFilter

    f = ColumnFilter(["*", "!secret*", "secret_ok", "!A?"])
    assert f.match("id") and f.match("SECRET_OK") and f.match("abc")
    assert not f.match("secret") and not f.match("Secret_key") and not f.match("ab")
    assert not ColumnFilter([]).match("id")
    assert ColumnFilter(["c[0-9]"]).match("C7") and not ColumnFilter(["c[0-9]"]).match("cx")
