"""The table model's keys: which columns TiCDC takes for the primary key and for the handle key."""

from __future__ import annotations

from changefeed.config import build_config
from changefeed.debezium.ddl import table_change
from changefeed.model import Column, Event, Index, Kind, TableInfo
from changefeed.simple.schema import table_schema


def _table(indexes: list[Index], nullable: bool = False) -> TableInfo:
    return TableInfo("db", "t", [Column("a", "int", nullable=nullable), Column("b", "int", nullable=nullable),
                                 Column("c", "int", nullable=nullable)], indexes, table_id=1, version=1)


def test_handle_key_is_the_unique_not_null_index_with_the_fewest_columns():
    # tiflow cdc/model/schema_storage.go findHandleIndex: fewest columns, the lowest index id of a tie
    t = _table([Index("uk_ab", ["a", "b"], unique=True), Index("uk_c", ["c"], unique=True)])
    assert t.handle_key == ["c"]
    # TiDB's GetPrimaryKey: the first such index stands for the primary key
    assert t.primary_columns == ["a", "b"] and t.pk_names == [] and not t.explicit_pk


def test_handle_key_tie_goes_to_the_earlier_index_and_a_primary_key_wins():
    t = _table([Index("uk_b", ["b"], unique=True), Index("uk_a", ["a"], unique=True)])
    assert t.handle_key == ["b"]
    t = _table([Index("uk_c", ["c"], unique=True), Index("PRIMARY", ["a", "b"], primary=True, unique=True)])
    assert t.handle_key == ["a", "b"] and t.explicit_pk


def test_a_unique_index_with_a_nullable_column_is_no_handle():
    t = _table([Index("uk_a", ["a"], unique=True)], nullable=True)
    assert t.handle_key == [] and t.pk_names == []


def test_primary_key_columns_in_the_index_order_where_ticdc_names_them_so():
    # GetPrimaryKeyColumnNames lists the index's columns: the simple protocol's synthetic `primary` index and
    # debezium's primaryKeyColumnNames; the PRI flags (canal-json pkNames) stay in table order
    implicit = _table([Index("uk_ba", ["b", "a"], unique=True)])
    assert implicit.pk_names == [] and implicit.primary_columns == ["b", "a"]
    primary = [i for i in table_schema(implicit)["indexes"] if i["name"] == "primary"]
    assert [i["columns"] for i in primary] == [["b", "a"]]
    explicit = _table([Index("PRIMARY", ["b", "a"], primary=True, unique=True)])
    assert explicit.pk_names == ["a", "b"] and explicit.primary_columns == ["b", "a"]
    ev = Event(Kind.DDL, 1 << 20, table=explicit, query="CREATE TABLE t (a int NOT NULL, b int NOT NULL, "
               "c int NOT NULL, PRIMARY KEY (b, a))", ddl_type="ActionCreateTable")
    assert table_change(ev)[0]["table"]["primaryKeyColumnNames"] == ["b", "a"]


def test_avro_key_of_the_handle_index():
    from changefeed.avro.schema import key_schema

    t = _table([Index("uk_ab", ["a", "b"], unique=True), Index("uk_c", ["c"], unique=True)])
    key = key_schema(t, build_config("avro", {}))
    assert key is not None and [f["name"] for f in key["fields"]] == ["c"]
