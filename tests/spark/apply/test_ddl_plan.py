"""DDL applied to the lake, as a plan of values (no Spark): Scenario / Steps over table definitions."""

from __future__ import annotations

from changefeed.model import Column, Index, TableInfo
from changefeed.spark.apply import ApplyOptions, ConsumerState
from changefeed.spark.apply.catalog import TableCatalog
from changefeed.spark.apply.ddlplan import AddColumn, ChangeType, Ddl, DropNotNull, complete, plan_columns, renamed_from
from changefeed.spark.apply.projection import Projection


def _t(*cols: tuple[str, str] | tuple[str, str, dict], name: str = "t") -> TableInfo:
    columns = [Column(c[0], c[1], primary_key=c[0] == "id", **(c[2] if len(c) > 2 else {})) for c in cols]
    return TableInfo("db", name, columns=columns, indexes=[Index("PRIMARY", ["id"], primary=True, unique=True)])


def _plan(before: TableInfo, after: TableInfo, ddl_type: str, lake: TableInfo | None = None, *, scd_type: int = 1):
    proj = Projection(ApplyOptions(scd_type=scd_type), TableCatalog(ApplyOptions(), ConsumerState()))
    current = {f.name: f for f in proj.schema(lake or before).fields}
    desired = list(proj.schema(after).fields)
    d = Ddl(10, "ALTER TABLE t ...", ddl_type, "db", "t", after, before)
    return plan_columns(d, {n: f for n, f in current.items() if not n.startswith("__")},
                        [f for f in desired if not f.name.startswith("__")])


def test_rename_column_keeps_its_values():
    p = _plan(_t(("id", "int"), ("a", "int")), _t(("id", "int"), ("b", "int")), "ActionRenameColumn")
    assert p.renames == {"a": "b"} and p.drops == [] and p.steps == [] and p.fills == {}


def test_the_same_change_by_another_ddl_is_a_drop_and_an_add():
    p = _plan(_t(("id", "int"), ("a", "int")), _t(("id", "int"), ("b", "int")), "ActionAddColumn")
    assert p.renames == {} and p.drops == ["a"]
    assert p.steps == [AddColumn("b", "int", "id")]


def test_drop_column():
    p = _plan(_t(("id", "int"), ("a", "int"), ("b", "int")), _t(("id", "int"), ("b", "int")), "ActionDropColumn")
    assert p.drops == ["a"] and p.renames == {} and p.steps == []


def test_add_column_in_place_with_its_default_for_older_rows():
    before = _t(("id", "int"), ("b", "int"))
    after = _t(("a", "int", {"default": "7"}), ("id", "int"), ("c", "varchar(10)"), ("b", "int"))
    p = _plan(before, after, "ActionAddColumn")
    assert p.steps == [AddColumn("a", "int", None), AddColumn("c", "string", "id")]
    assert p.fills == {"a": "7"}  # c has no default: older rows hold NULL


def test_widening_and_nullability():
    before = _t(("id", "int"), ("a", "int", {"nullable": False}))
    after = _t(("id", "int"), ("a", "bigint", {"nullable": True}))
    p = _plan(before, after, "ActionModifyColumn")
    assert p.renames == {} and p.drops == []
    assert [type(s) for s in p.steps] == [ChangeType, DropNotNull]
    assert p.steps[0].have.simpleString() == "int" and p.steps[0].want.simpleString() == "bigint"


def test_a_rename_the_lake_already_holds_is_not_done_again():
    before = _t(("id", "int"), ("a", "int"))
    after = _t(("id", "int"), ("b", "int"))
    p = _plan(before, after, "ActionRenameColumn", lake=after)  # replayed after a crash
    assert p.renames == {} and p.drops == [] and p.steps == []


def test_renamed_from_reads_the_old_name():
    assert renamed_from("RENAME TABLE `a`.`b` TO c") == ("a", "b")
    assert renamed_from("alter table t rename to u") == (None, "t")
    assert renamed_from("rename table `we``ird` to x") == (None, "we`ird")
    assert renamed_from("CREATE TABLE t (id INT)") is None


def test_complete_takes_the_definition_before_from_the_catalog():
    held = _t(("id", "int"), name="t")
    d = Ddl(5, "RENAME TABLE db.t TO db.u", "ActionRenameTable", "db", "u", _t(("id", "int"), name="u"), None)
    complete(d, {("db", "t"): held}, True)
    assert d.before is held


def test_a_copy_without_its_definition_is_completed_from_the_table_held():
    """A canal-json DDL copy decoded where its decoder never saw the table's CREATE (after a query resumed in a
    broker outage, seen once in CI): the statement applied to the definition the consumer holds."""
    held = _t(("id", "int"), ("status", "varchar(16)"))
    q = "ALTER TABLE `db`.`t` ADD COLUMN `coupon` varchar(20) NOT NULL DEFAULT 'NONE'"
    d = Ddl(10, q, "ActionAddColumn", "db", "t", TableInfo("db", "t"), None)
    complete(d, {("db", "t"): held}, ddl_definitions=True)
    assert d.after is not None and [c.name for c in d.after.columns] == ["id", "status", "coupon"]
    assert d.after.by_name["coupon"].default == "NONE" and d.before is held
    unknown = Ddl(10, q.replace("`t`", "`u`"), "ActionAddColumn", "db", "u", TableInfo("db", "u"), None)
    complete(unknown, {("db", "t"): held}, ddl_definitions=True)
    assert unknown.after is not None and unknown.after.columns == []  # ddl.py names it: nothing to apply it to
