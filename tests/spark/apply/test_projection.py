"""`Projection.memo`: what is built from a table definition is reused only while the definition, and the past
definition of each column it lacks, are the same objects."""

from __future__ import annotations

from changefeed.model import Column, Index, TableInfo
from changefeed.spark.apply import ApplyOptions, ConsumerState
from changefeed.spark.apply.catalog import TableCatalog
from changefeed.spark.apply.projection import Projection


def _table(*cols: Column) -> TableInfo:
    return TableInfo("shop", "t", columns=[Column("id", "bigint", nullable=False), *cols],
                     indexes=[Index("PRIMARY", ["id"], primary=True)])


def _proj() -> tuple[Projection, TableCatalog]:
    o = ApplyOptions()
    cat = TableCatalog(o, ConsumerState())
    return Projection(o, cat), cat


def test_the_same_definition_and_columns_build_once() -> None:
    proj, cat = _proj()
    t = _table(Column("name", "varchar(8)"))
    cat.set_def(("shop", "t"), t)
    built: list[int] = []

    def build() -> object:
        built.append(1)
        return object()

    a = proj.memo(t, ["id", "name"], build, "k")
    b = proj.memo(t, ["id", "name"], build, "k")
    assert a is b and len(built) == 1
    c = proj.memo(t, ["id"], build, "k")  # other columns: another entry
    assert c is not a and len(built) == 2


def test_a_new_definition_builds_again() -> None:
    proj, cat = _proj()
    t1 = _table(Column("name", "varchar(8)"))
    t2 = _table(Column("name", "varchar(16)"))  # a DDL's definition: a new object, though alike
    a = proj.memo(t1, ["id", "name"], object, "k")
    b = proj.memo(t2, ["id", "name"], object, "k")
    assert a is not b
    assert proj.memo(t1, ["id", "name"], object, "k") is a


def test_a_lacking_column_whose_past_definition_changed_builds_again() -> None:
    # the lake still holds `qty`, the definition dropped it: its type comes from the catalog's past columns
    proj, cat = _proj()
    cat.set_def(("shop", "t"), _table(Column("qty", "int")))
    now = _table()
    cat.set_def(("shop", "t"), now)
    a = proj.memo(now, ["id", "qty"], object, "k")
    assert proj.memo(now, ["id", "qty"], object, "k") is a
    cat.set_def(("shop", "t"), _table(Column("qty", "bigint")))  # the name came back with another type...
    cat.set_def(("shop", "t"), now)  # ...and went again: `qty` is read as a bigint now
    assert proj.memo(now, ["id", "qty"], object, "k") is not a
