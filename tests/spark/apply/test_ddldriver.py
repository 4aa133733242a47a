"""A DDL the driver commits itself (`ddldriver`): the new schema and the held rows after it, as values (no Spark)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson
import pyarrow as pa

from changefeed.spark.apply.ddldriver import altered, operation, rows_after
from changefeed.spark.apply.ddlplan import AddColumn, ChangeType, ColumnPlan, DropNotNull

MAPPED = {"delta.columnMapping.id": 2, "delta.columnMapping.physicalName": "col-9f"}


def new_schema(schema_json: str, plan: ColumnPlan, desired: dict[str, Any], mapped: bool) -> str | None:
    """`altered`'s schema where the DDL needs no feature turned on (None: it does, or the log cannot express it)."""
    a = altered(schema_json, plan, desired, mapped)
    return None if a is None else a.schema_json


def _schema(*fields: dict) -> str:
    return orjson.dumps({"type": "struct", "fields": list(fields)}).decode()


def _f(name: str, t: str = "integer", nullable: bool = True, meta: dict | None = None) -> dict:
    return {"name": name, "type": t, "nullable": nullable, "metadata": meta or {}}


def _fields(schema_json: str | None) -> list[tuple[str, str, bool]]:
    assert schema_json is not None
    return [(f["name"], f["type"], f["nullable"]) for f in orjson.loads(schema_json)["fields"]]


def test_a_column_added_lands_where_deltas_alter_puts_it_nullable_the_others_untouched() -> None:
    have = _schema(_f("id", "long", False), _f("amount", "decimal(10,2)", False, {"delta.typeChanges": []}))
    plan = ColumnPlan(steps=[AddColumn("coupon", "string", "amount"), AddColumn("first", "int", None)],
                      fills={"coupon": "NONE"})
    got = new_schema(have, plan, {"coupon": "string", "first": "integer"}, mapped=False)
    assert _fields(got) == [("first", "integer", True), ("id", "long", False), ("amount", "decimal(10,2)", False),
                            ("coupon", "string", True)]
    assert orjson.loads(got)["fields"][2]["metadata"] == {"delta.typeChanges": []}  # (kept as it was)
    assert operation(plan) == "ADD COLUMNS"
    # after a column the table does not have: not made here
    assert new_schema(have, ColumnPlan(steps=[AddColumn("c", "int", "nope")]), {"c": "integer"}, False) is None


def test_renames_and_drops_only_under_column_mapping_where_they_change_the_log_alone() -> None:
    have = _schema(_f("id", "long", False, MAPPED), _f("note", "string", meta=MAPPED),
                   _f("ratio", "float", meta=MAPPED))
    plan = ColumnPlan(renames={"note": "remark"}, drops=["ratio"])
    got = new_schema(have, plan, {}, mapped=True)
    assert _fields(got) == [("id", "long", False), ("remark", "string", True)]
    assert orjson.loads(got)["fields"][1]["metadata"] == MAPPED  # the files still name it by its physical name
    assert operation(plan) == "RENAME COLUMN" and operation(ColumnPlan(drops=["x"])) == "DROP COLUMNS"
    assert new_schema(have, plan, {}, mapped=False) is None  # the files name columns by their names
    # a column added under column mapping needs an id and a physical name: Delta's ALTER gives them
    assert new_schema(have, ColumnPlan(steps=[AddColumn("c", "int", "id")]), {"c": "integer"}, mapped=True) is None


def test_a_type_change_is_left_to_delta_and_a_dropped_not_null_is_a_nullable_field() -> None:
    have = _schema(_f("id", "long", False), _f("amount", "decimal(10,2)", False))
    assert new_schema(have, ColumnPlan(steps=[ChangeType("amount", None, None)]), {}, mapped=False) is None
    got = new_schema(have, ColumnPlan(steps=[DropNotNull("amount")]), {}, mapped=False)
    assert _fields(got) == [("id", "long", False), ("amount", "decimal(10,2)", True)]
    assert operation(ColumnPlan(steps=[DropNotNull("amount")])) == "CHANGE COLUMN"
    assert operation(ColumnPlan()) == "SET TRANSACTION"


def test_the_held_rows_follow_the_new_schema_filled_renamed_dropped() -> None:
    held = pa.Table.from_arrays([pa.array([1, 2], pa.int64()), pa.array(["a", None]), pa.array([0.5, 1.5])],
                                schema=pa.schema([pa.field("id", pa.int64(), False), pa.field("note", pa.string()),
                                                  pa.field("ratio", pa.float64())]))
    after = _schema(_f("id", "long", False), _f("remark", "string"), _f("coupon", "string"), _f("extra", "integer"))
    got = rows_after(held, after, {"note": "remark"}, {"coupon": pa.array(["NONE", "NONE"])},
                     {"coupon": pa.string(), "extra": pa.int32()})
    assert got is not None and got.column_names == ["id", "remark", "coupon", "extra"]
    assert got.to_pylist() == [{"id": 1, "remark": "a", "coupon": "NONE", "extra": None},
                               {"id": 2, "remark": None, "coupon": "NONE", "extra": None}]
    assert not got.schema.field("id").nullable and got.schema.field("extra").type == pa.int32()
    # a new column whose Arrow type is not known: not held after the DDL
    assert rows_after(held, after, {"note": "remark"}, {}, {"coupon": pa.string()}) is None


def test_a_widening_under_auto_turns_type_widening_on_once_and_the_held_rows_are_cast() -> None:
    have = _schema(_f("id", "long", False), _f("amount", "decimal(10,2)", False), _f("n", "integer"))
    plan = ColumnPlan(steps=[ChangeType("amount", None, None), ChangeType("n", None, None)])
    want = {"amount": "decimal(12,2)", "n": "long"}
    got = altered(have, plan, want, mapped=False, auto=True)
    assert got is not None and got.features == ("typeWidening",)
    assert got.properties == {"delta.enableTypeWidening": "true"}
    assert _fields(got.schema_json) == [("id", "long", False), ("amount", "decimal(12,2)", False), ("n", "long", True)]
    meta = [f["metadata"] for f in orjson.loads(got.schema_json)["fields"]]
    assert meta[1] == {"delta.typeChanges": [{"toType": "decimal(12,2)", "fromType": "decimal(10,2)"}]}
    on = altered(got.schema_json, ColumnPlan(steps=[ChangeType("amount", None, None)]), {"amount": "decimal(14,2)"},
                 mapped=False, widening=True)  # on already: no feature, the change appended
    assert on is not None and on.features == () and on.properties == {}
    assert len(orjson.loads(on.schema_json)["fields"][1]["metadata"]["delta.typeChanges"]) == 2
    # a narrowing, or a scale changed: not a widening made here
    assert altered(have, ColumnPlan(steps=[ChangeType("amount", None, None)]), {"amount": "decimal(12,3)"},
                   mapped=False, auto=True) is None
    held = pa.Table.from_arrays([pa.array([1], pa.int64()), pa.array([Decimal("1.25")], pa.decimal128(10, 2)),
                                 pa.array([7], pa.int32())], names=["id", "amount", "n"])
    rows = rows_after(held, got.schema_json, {}, {}, {"amount": pa.decimal128(12, 2), "n": pa.int64()})
    assert rows is not None and rows.schema.field("amount").type == pa.decimal128(12, 2)
    assert rows.schema.field("n").type == pa.int64() and rows.to_pylist() == [{"id": 1, "amount": Decimal("1.25"),
                                                                             "n": 7}]


def test_a_rename_under_auto_turns_column_mapping_on_each_field_its_own_name_in_the_files() -> None:
    have = _schema(_f("id", "long", False), _f("note", "string"), _f("ratio", "float"))
    got = altered(have, ColumnPlan(renames={"note": "remark"}, drops=["ratio"]), {}, mapped=False, auto=True)
    assert got is not None and got.features == ("columnMapping",)
    assert got.properties == {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "3"}
    assert [(f["name"], f["metadata"]) for f in orjson.loads(got.schema_json)["fields"]] == [
        ("id", {"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "id"}),
        ("remark", {"delta.columnMapping.id": 2, "delta.columnMapping.physicalName": "note"})]
    assert altered(have, ColumnPlan(renames={"note": "remark"}), {}, mapped=False) is None  # (minimal)
