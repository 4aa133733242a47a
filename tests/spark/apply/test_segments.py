"""Which DDL cut a table's window (its earlier rows written first), which leave the rows for one later write,
and which make them moot (no Spark: the rule over table definitions)."""

from __future__ import annotations

from changefeed.model import Column, Index, TableInfo
from changefeed.spark.apply.ddlplan import Ddl
from changefeed.spark.apply.segments import DISCARD, KEEP, WRITE, before_ddl, ddl_groups

T = ("db", "t")


def _t(*cols: str, pk: str | None = "id", unique: list[str] | None = None) -> TableInfo:
    columns = [Column(c, "int", primary_key=c == pk, nullable=c != pk) for c in cols]
    indexes = [Index("PRIMARY", [pk], primary=True, unique=True)] if pk else []
    if unique:
        indexes.append(Index("uk", unique, unique=True))
        columns = [Column(c.name, c.mysql_type, nullable=c.name not in unique and c.nullable,
                          primary_key=c.primary_key, unique_key=c.name in unique) for c in columns]
    return TableInfo("db", "t", columns=columns, indexes=indexes)


def _ddl(kind: str, before: TableInfo | None, after: TableInfo | None, ts: int = 10) -> Ddl:
    return Ddl(ts, f"-- {kind}", kind, "db", "t", after, before)


def test_an_index_that_leaves_columns_and_key_alone_does_not_cut():
    b = _t("id", "a")
    a = TableInfo("db", "t", columns=b.columns, indexes=[*b.indexes, Index("ia", ["a"])])
    assert before_ddl(_ddl("ActionAddIndex", b, a), T, [], 1, None) == KEEP
    assert before_ddl(_ddl("ActionDropIndex", a, b), T, [], 2, None) == KEEP


def test_a_unique_index_that_becomes_the_key_cuts():
    b = _t("id", "a", pk=None)  # no key: every column is
    a = _t("id", "a", pk=None, unique=["id"])  # a NOT NULL unique index becomes the handle key
    assert before_ddl(_ddl("ActionAddIndex", b, a), T, [], 1, None) == WRITE


def test_columns_added_renamed_or_changed_cut():
    b = _t("id", "a")
    assert before_ddl(_ddl("ActionAddColumn", b, _t("id", "a", "c")), T, [], 1, None) == WRITE
    assert before_ddl(_ddl("ActionRenameColumn", b, _t("id", "c")), T, [], 1, None) == WRITE
    widened = TableInfo("db", "t", columns=[b.columns[0], Column("a", "bigint")], indexes=b.indexes)
    assert before_ddl(_ddl("ActionModifyColumn", b, widened), T, [], 1, None) == WRITE


def test_a_dropped_column_cuts_only_when_a_later_ddl_could_bring_it_back():
    b, a = _t("id", "a", "c"), _t("id", "a")
    assert before_ddl(_ddl("ActionDropColumn", b, a), T, [], 1, None) == KEEP
    readd = _ddl("ActionAddColumn", a, b, ts=20)
    assert before_ddl(_ddl("ActionDropColumn", b, a), T, [readd], 1, None) == WRITE


def test_a_later_ddl_at_the_same_commit_ts_always_cuts():
    b = _t("id", "a")
    a = TableInfo("db", "t", columns=b.columns, indexes=[*b.indexes, Index("ia", ["a"])])
    assert before_ddl(_ddl("ActionAddIndex", b, a), T, [_ddl("ActionDropIndex", a, b)], 1, None) == WRITE


def test_drop_and_truncate_make_earlier_rows_moot_but_truncate_keeps_scd2_history():
    b = _t("id", "a")
    assert before_ddl(_ddl("ActionDropTable", b, None), T, [], 1, None) == DISCARD
    assert before_ddl(_ddl("ActionDropTable", b, None), T, [], 2, None) == DISCARD
    assert before_ddl(_ddl("ActionTruncateTable", b, b), T, [], 1, None) == DISCARD
    assert before_ddl(_ddl("ActionTruncateTable", b, b), T, [], 2, None) == WRITE


def test_user_keys_decide_the_key():
    b = _t("id", "a", pk=None)
    a = _t("id", "a", pk=None, unique=["id"])
    assert before_ddl(_ddl("ActionAddIndex", b, a), T, [], 1, ["id"]) == WRITE  # unique_key flag changed: cut
    c = TableInfo("db", "t", columns=b.columns, indexes=[Index("ia", ["a"])])
    assert before_ddl(_ddl("ActionAddIndex", b, c), T, [], 1, ["id"]) == KEEP


def test_unknown_definitions_cut():
    assert before_ddl(_ddl("ActionAddIndex", None, _t("id")), T, [], 1, None) == WRITE
    assert before_ddl(_ddl("ActionAddIndex", _t("id"), None), T, [], 1, None) == WRITE


def _on(table: str, kind: str = "ActionAddColumn", ts: int = 10, db: str = "db") -> Ddl:
    t = TableInfo(db, table, columns=[Column("id", "int")])
    return Ddl(ts, f"-- {kind} {table}", kind, db, table, t, t)


def test_ddl_of_different_tables_go_together_until_a_table_comes_again():
    ddls = [_on("a", ts=1), _on("b", ts=2), _on("c", ts=3), _on("a", ts=4), _on("b", ts=5)]
    assert ddl_groups(ddls) == [[0, 1, 2], [3, 4]]


def test_a_rename_or_a_schema_ddl_stands_alone():
    ren = Ddl(3, "RENAME TABLE db.a TO db.z", "ActionRenameTable", "db", "z",
              TableInfo("db", "z", columns=[Column("id", "int")]), TableInfo("db", "a", columns=[Column("id", "int")]))
    drop_db = Ddl(5, "DROP DATABASE db", "ActionDropSchema", "db", None, None, None)
    ddls = [_on("a", ts=1), _on("b", ts=2), ren, _on("c", ts=4), drop_db, _on("d", ts=6), _on("e", ts=7)]
    assert ddl_groups(ddls) == [[0, 1], [2], [3], [4], [5, 6]]


def test_the_same_table_name_in_two_databases_is_two_tables():
    assert ddl_groups([_on("a", ts=1), _on("a", ts=2, db="other")]) == [[0, 1]]


def test_later_ddls_of_a_table_are_those_after_the_step_that_touch_it():
    from changefeed.spark.apply.segments import _later_ddls, touches

    def ddl(db: str, tbl: str, ts: int, kind: str = "ActionAddColumn") -> Ddl:
        return Ddl(ts, f"-- {kind} {db}.{tbl}", kind, db, tbl, None, None)

    ddls = [ddl("db", "a", 1), ddl("db", "b", 2), ddl("db", "a", 3), ddl("db", "", 4, "ActionDropSchema"),
            ddl("other", "a", 5), ddl("db", "c", 6)]
    tables = {("db", "a"): 1, ("db", "b"): 1, ("other", "a"): 1}  # db.c has no rows: touched by none
    later = _later_ddls(ddls, tables)
    for step in range(len(ddls)):
        for table in tables:
            # the definition: every later DDL asked whether it touches the table
            assert later(table, step) == [x for x in ddls[step + 1:] if table in touches(x, tables)]
    assert later(("db", "a"), 0) == [ddls[2], ddls[3]]
    assert later(("other", "a"), 0) == [ddls[4]]
    assert later(("db", "c"), 0) == []
