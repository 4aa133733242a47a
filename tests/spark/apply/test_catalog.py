"""Learning table definitions and pending DDL from control rows (no Spark)."""

from __future__ import annotations

import orjson

from changefeed.eventline import table_to_json
from changefeed.model import Column, Index, TableInfo
from changefeed.spark.apply import ApplyOptions, ConsumerState
from changefeed.spark.apply.catalog import TableCatalog, order_control, shape_type, table_of


def _table(name: str, *cols: str, version: int | None = None, db: str = "db") -> TableInfo:
    return TableInfo(db, name, columns=[Column(c, "int", primary_key=c == "id") for c in cols],
                     indexes=[Index("PRIMARY", ["id"], primary=True, unique=True)], version=version)


def _def(t: TableInfo | None) -> str | None:
    return orjson.dumps(table_to_json(t)).decode() if t is not None else None


def _ddl_row(ts: int, query: str, ddl_type: str, after: TableInfo | None, before: TableInfo | None = None, *,
             topic: str | None = None, partition: int = 0, table: str = "t") -> dict:
    return {"kind": "ddl", "_truncate": False, "commit_ts": ts, "ddl": query, "ddl_type": ddl_type,
            "database": "db", "table": table, "table_def": _def(after), "pre_table_def": _def(before),
            "topic": topic, "partition": partition}


def _shape_row(t: TableInfo, kind: str = "insert") -> dict:
    return {"kind": kind, "_truncate": False, "table_def": _def(t), "_hash": None}


def _catalog(applied: int = 0, **opts) -> TableCatalog:
    return TableCatalog(ApplyOptions(**opts), ConsumerState(applied_ts=applied))


def test_ddl_past_the_applied_watermark_waits_and_one_below_is_learnt():
    cat = _catalog(applied=100)
    cat.learn([_ddl_row(150, "ALTER TABLE t ADD b INT", "ActionAddColumn", _table("t", "id", "b"))])
    assert list(cat.pending) == [(150, "ALTER TABLE t ADD b INT")]
    assert ("db", "t") not in cat.defs  # not applied yet: the definition waits with it
    cat.learn([_ddl_row(90, "CREATE TABLE t2 (id INT)", "ActionCreateTable", _table("t2", "id"), table="t2")])
    assert [c.name for c in cat.defs[("db", "t2")].columns] == ["id"]
    assert cat.defs_ts == 90 and len(cat.pending) == 1


def test_a_redelivered_older_ddl_does_not_roll_definitions_back():
    cat = _catalog(applied=100)
    cat.learn([_ddl_row(80, "ALTER TABLE t ADD b INT", "ActionAddColumn", _table("t", "id", "b"))])
    cat.learn([_ddl_row(60, "CREATE TABLE t (id INT)", "ActionCreateTable", _table("t", "id"))])
    assert [c.name for c in cat.defs[("db", "t")].columns] == ["id", "b"]


def test_the_richest_copy_of_a_ddl_is_kept():
    cat = _catalog()
    q = "ALTER TABLE t ADD b INT"
    cat.learn([_ddl_row(10, q, "ActionAddColumn", None, topic="x", partition=0),
               _ddl_row(10, q, "ActionAddColumn", _table("t", "id", "b"), topic="x", partition=1),
               _ddl_row(10, q, "ActionAddColumn", None, topic="y", partition=0)])
    d = cat.pending[(10, q)]
    assert d.after is not None and [c.name for c in d.after.columns] == ["id", "b"]
    assert cat.copies[(10, q)] == {"x", "y"}
    assert cat.ddl_seen == {"x/0": 10, "x/1": 10, "y/0": 10}


def test_without_watermarks_copies_at_or_below_the_last_ddl_applied_are_repeats():
    cat = TableCatalog(ApplyOptions(watermarks=False), ConsumerState(ddl_ts=50))
    cat.learn([_ddl_row(50, "ALTER TABLE t ADD b INT", "ActionAddColumn", _table("t", "id", "b"), topic="x")])
    assert cat.pending == {} and cat.ddl_seen == {"x/0": 50}


def test_row_shapes_newer_versions_win_older_never_roll_back():
    cat = _catalog()
    cat.learn([_shape_row(_table("t", "id", "a", version=2))])
    cat.learn([_shape_row(_table("t", "id", version=1))])
    assert [c.name for c in cat.defs[("db", "t")].columns] == ["id", "a"]
    cat.learn([_shape_row(_table("t", "id", "a", "b", version=3))])
    assert [c.name for c in cat.defs[("db", "t")].columns] == ["id", "a", "b"]
    assert set(cat.known[("db", "t")]) == {"id", "a", "b"}


def test_applied_rename_and_drop_move_definitions():
    cat = _catalog()
    cat.set_def(("db", "t"), _table("t", "id"))
    cat.learn([_ddl_row(10, "RENAME TABLE t TO u", "ActionRenameTable", _table("u", "id"), _table("t", "id"))])
    d = cat.pending[(10, "RENAME TABLE t TO u")]
    cat.applied(d)
    assert ("db", "t") not in cat.defs and ("db", "u") in cat.defs and cat.pending == {}
    cat.learn([_ddl_row(20, "DROP TABLE u", "ActionDropTable", None, table="u")])
    cat.applied(cat.pending[(20, "DROP TABLE u")])
    assert ("db", "u") not in cat.defs and cat.defs_ts == 20


def test_control_rows_shapes_first_then_ddl_in_stream_order():
    def row(ts, offset, kind="ddl", shape=False, table_def=None):
        return {"kind": kind, "_shape": shape, "commit_ts": ts, "topic": "t", "partition": 0, "offset": offset,
                "idx": 0, "table_def": table_def, "_truncate": False, "_hash": hash(table_def) if shape else None}

    got = order_control([row(20, 5), row(10, 9), row(30, 1, "insert", True, "A"), row(15, 2, "insert", True, "A"),
                         row(12, 3, "insert", True, "B")])
    assert [(r["kind"], r.get("table_def"), r.get("commit_ts")) for r in got] == [
        ("insert", "B", None), ("insert", "A", None), ("ddl", None, 10), ("ddl", None, 20)]
    assert [r["_hash"] for r in got[:2]] == [hash("B"), hash("A")]  # each shape with its hash (nothing_new)


def test_canal_shapes_keep_values_whole():
    assert shape_type("decimal") == "decimal(65,30)"
    assert shape_type("decimal unsigned") == "decimal(65,30) unsigned"
    assert shape_type("bit") == "bit(64)"
    assert shape_type("varchar(10)") == "varchar(10)"
    t = table_of(orjson.dumps({"schema": "db", "table": "t", "mysqlType": {"id": "int", "v": "decimal"},
                               "pkNames": ["id"]}).decode())
    assert [c.name for c in t.columns] == ["id", "v"] and t.handle_key == ["id"]


def _counts(kind: str = "insert", lo: int | None = 7, hi: int | None = 7, table: str = "t") -> dict:
    return {"kind": kind, "database": "db", "table": table, "shape_lo": lo, "shape_hi": hi}


def test_a_batch_with_only_the_shape_learnt_last_has_nothing_new():
    cat = _catalog()
    assert not cat.nothing_new([_counts()], None)  # a shape not learnt yet
    cat.learn([{**_shape_row(_table("t", "id", "a")), "_hash": 7}])
    assert cat.nothing_new([_counts(), _counts("update", None, None), _counts("watermark", None, None)], None)
    assert not cat.nothing_new([_counts(lo=7, hi=8)], None)  # two shapes in the batch
    assert not cat.nothing_new([_counts(lo=8, hi=8)], None)  # another shape
    assert not cat.nothing_new([_counts(table="u")], None)  # another table, the same hash
    assert not cat.nothing_new([_counts(), _counts("ddl", None, None)], None)
    assert not cat.nothing_new([_counts("bootstrap", None, None)], None)
    assert not cat.nothing_new([_counts()], "op = 'T'")  # truncates to look for: every batch looks


def test_a_shape_learnt_before_the_definition_changed_is_learnt_again():
    cat = _catalog(applied=10)  # the DROP below is learnt at once
    cat.learn([{**_shape_row(_table("t", "id", "a")), "_hash": 7}])
    cat.learn([_ddl_row(5, "DROP TABLE t", "ActionDropTable", None, _table("t", "id", "a"))])
    assert ("db", "t") not in cat.defs
    assert not cat.nothing_new([_counts()], None)  # the same shape again would define the table again
    cat.learn([{**_shape_row(_table("t", "id", "a")), "_hash": 7}])
    assert cat.nothing_new([_counts()], None)


def test_a_stream_whose_tables_follow_their_rows_always_looks():
    cat = TableCatalog(ApplyOptions(watermarks=False, ddl_definitions=False), ConsumerState())
    cat.learn([{**_shape_row(_table("t", "id", "a")), "_hash": 7}])
    assert not cat.nothing_new([_counts()], None)  # a drifting shape is compared with the definition each time
