"""A Delta feature turned on by the driver inside a DDL's commit (`ddlfeatures`, through `ddldriver.altered` and
`RustLog.alter`) against Delta's own: the same table made twice by Spark's Delta, the DDL applied to one by Delta's
SET TBLPROPERTIES and ALTER (as `table_features.turn_on` and `DdlApplier` ask them) and to the other by the driver;
the protocol and metaData the log ends with compared (Delta's is the golden), both tables read back by Spark's Delta
and by delta-rs, and a later Spark MERGE into the driver's table."""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable

from changefeed.spark.apply.ddldriver import altered, operation
from changefeed.spark.apply.ddlplan import ChangeType, ColumnPlan
from changefeed.spark.apply.log_rs import RustLog

MAPPING = "'delta.columnMapping.mode' = 'name', 'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5'"
WIDENING = "'delta.enableTypeWidening' = 'true'"


def _state(path: Path) -> tuple[dict, dict]:
    """The table's last protocol and metaData actions in its log (feature lists as sets; the ids and times out)."""
    protocol: dict = {}
    meta: dict = {}
    for f in sorted((path / "_delta_log").glob("*.json")):
        for line in f.read_bytes().splitlines():
            a = orjson.loads(line)
            protocol = a.get("protocol", protocol)
            meta = a.get("metaData", meta)
    protocol = {k: set(v) if isinstance(v, list) else v for k, v in protocol.items()}
    schema = orjson.loads(meta["schemaString"])
    return protocol, {"schema": schema, "configuration": meta["configuration"],
                      "partitionColumns": meta["partitionColumns"], "format": meta["format"]}


def _rows(spark, path: Path, order: str) -> list[tuple]:
    return [tuple(r) for r in spark.read.format("delta").load(str(path)).orderBy(order).collect()]


def _rs_rows(path: Path, columns: list[str], order: str) -> list[tuple] | str:
    """The rows as delta-rs reads them (its SQL reader follows column mapping; its plain reader is the one that
    reads type widening), or the error it gives (the table has both)."""
    from deltalake import QueryBuilder

    dt = RsTable(str(path))
    try:
        if dt.metadata().configuration.get("delta.columnMapping.mode") == "name":
            got = pa.table(QueryBuilder().register("t", dt).execute(
                "SELECT " + ", ".join(f'"{c}"' for c in columns) + " FROM t").read_all())
        else:
            got = dt.to_pyarrow_table(columns=columns)
    except Exception as e:  # noqa: BLE001 - compared between the two tables
        return str(e)
    return sorted((tuple(r[c] for c in columns) for r in got.to_pylist()), key=lambda r: r[columns.index(order)])


def _widening(refused: list[tuple] | str) -> bool:
    return isinstance(refused, str) and "typewidening" in refused.lower()


CASES = {
    # RENAME COLUMN on a plain table (protocol 1/2): column mapping
    "rename": ("id BIGINT NOT NULL, note STRING, ratio FLOAT", "(1, 'a', 0.5), (2, NULL, 1.5)",
               [(MAPPING, "RENAME COLUMN note TO remark")], [ColumnPlan(renames={"note": "remark"})], [{}]),
    # a table with a TIMESTAMP_NTZ column (table features already): column mapping listed among them
    "rename_ntz": ("id BIGINT NOT NULL, ts TIMESTAMP_NTZ, note STRING",
                   "(1, TIMESTAMP_NTZ'2020-01-01 10:00:00', 'a'), (2, NULL, 'b')",
                   [(MAPPING, "DROP COLUMN note")], [ColumnPlan(drops=["note"])], [{}]),
    # MODIFY COLUMN decimal(10,2) -> (12,2) on a plain table: type widening
    "widen": ("id BIGINT NOT NULL, amount DECIMAL(10,2) NOT NULL, n INT", "(1, 1.25, 7), (2, 99999999.99, NULL)",
              [(WIDENING, "ALTER COLUMN amount TYPE DECIMAL(12,2)")],
              [ColumnPlan(steps=[ChangeType("amount", None, None)])], [{"amount": "decimal(12,2)"}]),
    # a rename (column mapping, legacy 2/5) then widenings of an int and of a decimal: type widening over it
    "rename_then_widen": ("id BIGINT NOT NULL, amount DECIMAL(10,2), n INT", "(1, 1.25, 7), (2, NULL, 2147483647)",
                          [(MAPPING, "RENAME COLUMN amount TO total"), (WIDENING, "ALTER COLUMN n TYPE BIGINT"),
                           (None, "ALTER COLUMN total TYPE DECIMAL(14,2)")],
                          [ColumnPlan(renames={"amount": "total"}), ColumnPlan(steps=[ChangeType("n", None, None)]),
                           ColumnPlan(steps=[ChangeType("total", None, None)])],
                          [{}, {"n": "long"}, {"total": "decimal(14,2)"}]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_feature_turned_on_by_the_driver_is_what_delta_writes_for_the_same_alter(spark, tmp_path: Path,
                                                                                   case: str) -> None:
    columns, values, alters, plans, desired = CASES[case]
    theirs, ours = tmp_path / "delta", tmp_path / "driver"
    for p in (theirs, ours):
        spark.sql(f"CREATE TABLE delta.`{p}` ({columns}) USING delta")
        spark.sql(f"INSERT INTO delta.`{p}` VALUES {values}")
    for props, alter in alters:
        if props:
            spark.sql(f"ALTER TABLE delta.`{theirs}` SET TBLPROPERTIES ({props})")
        spark.sql(f"ALTER TABLE delta.`{theirs}` {alter}")
    log = RustLog()
    for i, (plan, want) in enumerate(zip(plans, desired, strict=True)):
        before = log.read(str(ours), None)
        assert before.refused is None
        widening = before.configuration.get("delta.enableTypeWidening") == "true"
        alt = altered(before.schema_json, plan, want, before.physical() is not None, auto=True, widening=widening)
        assert alt is not None and bool(alt.features) == (i < 2)  # (the second widening: on already)
        assert log.alter(str(ours), before, {}, [], 10 + i, "app", operation(plan), alt.schema_json,
                         properties=alt.properties, features=alt.features) == before.version + 1
    assert _state(ours) == _state(theirs)  # Delta's own log is the golden
    # the upgrade and the DDL's txn are one commit: a restart (a fresh reader) finds the DDL applied, never half
    assert RustLog().txn_version(str(ours), "app", "changefeed.app.ddlVersion") == 10 + len(plans) - 1
    order = "id"
    assert _rows(spark, ours, order) == _rows(spark, theirs, order)
    names = spark.read.format("delta").load(str(ours)).columns
    rs = _rs_rows(theirs, names, order)
    # delta-rs 1.6 reads no table with type widening, Delta's or ours: refused alike
    assert _rs_rows(ours, names, order) == rs and (rs == _rows(spark, theirs, order) or _widening(rs)), rs
    a, b = RsTable(str(ours)).protocol(), RsTable(str(theirs)).protocol()  # (as delta-rs reads them)
    assert (a.min_reader_version, a.min_writer_version, set(a.reader_features or ()), set(a.writer_features or ())) \
        == (b.min_reader_version, b.min_writer_version, set(b.reader_features or ()), set(b.writer_features or ()))
    # a later MERGE by Spark's Delta into the driver's table: a row updated, one added
    first = names[1] if names[1] != "ts" else names[0]
    for p in (theirs, ours):
        spark.sql(f"MERGE INTO delta.`{p}` t USING (SELECT * FROM delta.`{p}` WHERE id = 1 "
                  f"UNION ALL SELECT 3 AS id, {', '.join(f's.`{c}`' for c in names[1:])} FROM delta.`{p}` s "
                  f"WHERE id = 2) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET t.`{first}` = s.`{first}` "
                  "WHEN NOT MATCHED THEN INSERT *")
    assert _rows(spark, ours, order) == _rows(spark, theirs, order) and len(_rows(spark, ours, order)) == 3
    rs = _rs_rows(ours, names, order)
    assert rs == _rows(spark, theirs, order) or _widening(rs), rs


def test_a_case_not_written_by_the_driver_is_left_to_delta(spark, tmp_path: Path) -> None:
    """A widening Spark's Parquet reader does not make (int -> decimal), a nested column under a rename: None, so
    nothing is committed and Delta's own ALTER applies it; without `auto` (table-features minimal) nothing either."""
    path = tmp_path / "t"
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT NOT NULL, n INT, s STRUCT<a: INT>) USING delta")
    before = RustLog().read(str(path), None)
    widen = ColumnPlan(steps=[ChangeType("n", None, None)])
    assert altered(before.schema_json, widen, {"n": "decimal(12,2)"}, False, auto=True) is None
    assert altered(before.schema_json, widen, {"n": "long"}, False, auto=True) is not None
    assert altered(before.schema_json, widen, {"n": "long"}, False, auto=False) is None
    assert altered(before.schema_json, ColumnPlan(renames={"n": "m"}), {}, False, auto=True) is None


def test_the_protocol_after_a_feature_lists_what_its_legacy_versions_stood_for() -> None:
    """(No Spark.) Beyond the cases compared with Delta above: a legacy protocol with column mapping already moved
    to table features by type widening lists column mapping and what writer 5 stood for; one with writer features
    but no reader ones is left to Delta; a feature already listed is listed once."""
    from changefeed.spark.apply.ddlfeatures import COLUMN_MAPPING, TYPE_WIDENING, on, protocol_with

    legacy = {"minReaderVersion": 2, "minWriterVersion": 5}
    got = protocol_with(legacy, TYPE_WIDENING)
    assert got == {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["columnMapping", "typeWidening"],
                   "writerFeatures": ["appendOnly", "changeDataFeed", "checkConstraints", "columnMapping",
                                      "generatedColumns", "invariants", "typeWidening"]}
    assert on(got, TYPE_WIDENING) and on(got, COLUMN_MAPPING) and on(legacy, COLUMN_MAPPING)
    assert not on(legacy, TYPE_WIDENING) and not on({"minReaderVersion": 1, "minWriterVersion": 2}, COLUMN_MAPPING)
    assert protocol_with(got, TYPE_WIDENING) == got
    assert protocol_with({"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["x"]}, COLUMN_MAPPING) \
        is None
    assert protocol_with({"minReaderVersion": 1, "minWriterVersion": 2}, "deletionVectors") is None
