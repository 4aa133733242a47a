"""A second Spark session, in its own process, as a user of the consumer's catalog would start one: Hive support
over the same Derby metastore. It lists the catalog, reads every table by name and compares it with the upstream
state of the workload's `--expected` file, and reads each table's Iceberg side with pyiceberg (StaticTable from its
latest metadata file, and through the lake's SQL catalog) and compares it with what Spark reads of the Delta table.
Prints one JSON object (tests/cli/test_catalog.py asserts on it).

    python tests/cli/catalog_reader.py <metastore folder> <lake> <expected file> <database prefix>
"""

from __future__ import annotations

import datetime as dt
import glob
import os
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson


def norm(v: Any) -> Any:
    """One spelling of a value on both sides: Spark gives naive UTC datetimes (session time zone UTC) and
    bytearrays, pyiceberg aware datetimes and bytes."""
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(v, bytearray | memoryview):
        return bytes(v)
    if isinstance(v, Decimal):
        return str(v)
    return v


def rows(records: list[dict[str, Any]]) -> list[str]:
    return sorted(repr(sorted((k, norm(v)) for k, v in r.items())) for r in records)


def main(ms: str, lake: str, expected: str, prefix: str) -> dict[str, Any]:
    from pyiceberg.table import StaticTable

    from changefeed.spark import spark_session
    from changefeed.spark.apply.iceberg import open_catalog
    from changefeed.spark.layout import LakeLayout
    from changefeed.spark.verify import events_from_lines, expected_frame
    from changefeed.upstream import final_state

    spark = spark_session(conf={
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={ms}/metastore_db;create=true",
        "spark.sql.warehouse.dir": f"{ms}/warehouse"})
    spark.sparkContext._jvm.java.lang.System.setProperty(  # type: ignore[union-attr]
        "derby.stream.error.file", f"{ms}/reader-derby.log")
    state = final_state(events_from_lines(Path(expected)))
    out: dict[str, Any] = {"databases": sorted(r[0] for r in spark.sql("SHOW DATABASES").collect()), "tables": {},
                           "iceberg": {}}
    dbs = sorted({db for db, _ in state.tables})
    out["catalog"] = {db: sorted(r["tableName"] for r in spark.sql(f"SHOW TABLES IN `{prefix}{db}`").collect())
                      for db in dbs}
    for (db, name), st in sorted(state.tables.items()):
        exp = expected_frame(spark, st)
        got = spark.table(f"`{prefix}{db}`.`{name}`")
        same_columns = sorted(got.columns) == sorted(exp.columns)
        diff = None
        if same_columns:
            got = got.select(*[got[f"`{f.name}`"].cast(f.dataType).alias(f.name) for f in exp.schema.fields])
            diff = [exp.exceptAll(got).count(), got.exceptAll(exp).count()]
        out["tables"][f"{db}.{name}"] = {"rows": got.count(), "expected": len(st.rows), "columns": same_columns,
                                         "diff": diff}
    catalog = open_catalog(LakeLayout(lake).meta)
    out["iceberg_namespaces"] = sorted(".".join(n) for n in catalog.list_namespaces())
    out["iceberg_tables"] = {ns: sorted(".".join(t) for t in catalog.list_tables(ns))
                             for ns in out["iceberg_namespaces"]}
    for (db, name), _ in sorted(state.tables.items()):
        path = LakeLayout(lake).table(db, name)
        delta = spark.read.format("delta").load(path)
        want = rows([r.asDict() for r in delta.collect()])
        latest = max(glob.glob(os.path.join(path, "metadata", "*.metadata.json")),
                     key=lambda p: int(os.path.basename(p).split("-")[0]))  # 00001-<uuid>.metadata.json
        static = StaticTable.from_metadata(latest).scan().to_arrow()
        named = catalog.load_table((f"{prefix}{db}", name)).scan().to_arrow()
        out["iceberg"][f"{db}.{name}"] = {
            "delta_rows": len(want), "static_rows": static.num_rows,
            "static_equal": rows(static.to_pylist()) == want, "catalog_equal": rows(named.to_pylist()) == want,
            "columns": list(static.column_names) == list(delta.columns)}
    spark.stop()
    return out


if __name__ == "__main__":
    print(orjson.dumps(main(*sys.argv[1:5])).decode())
