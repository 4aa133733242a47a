"""The Iceberg mirror of a Delta table (spark/apply/iceberg.py), without Spark: Delta tables written by delta-rs,
their Iceberg side read by pyiceberg (StaticTable from the latest metadata file, and the lake's SQL catalog) and
compared with delta-rs's own read of the Delta table, after appends, an overwrite, a new column, a restart, a
RENAME TABLE and a DROP TABLE."""

from __future__ import annotations

import datetime as dt
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from changefeed.errors import ApplyError
from changefeed.spark.apply.iceberg import DELTA_VERSION, IcebergMirror
from changefeed.spark.apply.iceberg_schema import columns, evolvable, iceberg_type
from changefeed.spark.apply.names import Naming, TableNames


def batch(ids: list[int]) -> pa.Table:
    n = len(ids)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "small": pa.array([i % 100 for i in ids], pa.int16()),
        "amount": pa.array([Decimal(i) / 100 for i in ids], pa.decimal128(12, 2)),
        "day": pa.array([dt.date(2024, 1, 1 + i % 28) for i in ids], pa.date32()),
        "at": pa.array([dt.datetime(2024, 1, 1, 0, 0, i % 60, tzinfo=dt.UTC) for i in ids], pa.timestamp("us", "UTC")),
        "raw": pa.array([bytes([i % 256, 0, 255]) for i in ids], pa.binary()),
        "name": pa.array([f"n{i}" if i % 3 else None for i in ids], pa.string()),
        "ok": pa.array([i % 2 == 0 for i in ids], pa.bool_()),
        "score": pa.array([i / 7 for i in ids], pa.float64()),
    }).slice(0, n)


def norm(records: list[dict[str, Any]]) -> list[str]:
    return sorted(repr(sorted(r.items())) for r in records)


def latest_metadata(table: Path) -> str:
    files = sorted(table.glob("metadata/*.metadata.json"), key=lambda p: int(p.name.split("-")[0]))
    return str(files[-1])


def iceberg_rows(table: Path) -> list[str]:
    from pyiceberg.table import StaticTable

    return norm(StaticTable.from_metadata(latest_metadata(table)).scan().to_arrow().to_pylist())


def delta_rows(table: Path) -> list[str]:
    return norm(DeltaTable(str(table)).to_pyarrow_table().to_pylist())


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    (tmp_path / "lake" / "_changefeed").mkdir(parents=True)
    return tmp_path / "lake"


def names_of(lake: Path, mirror: IcebergMirror) -> TableNames:
    return TableNames(str(lake), Naming(None, "cdc_"), mirror)


def test_the_iceberg_side_follows_appends_overwrites_new_columns_and_a_restart(lake: Path) -> None:
    t = lake / "app" / "t"
    write_deltalake(str(t), batch([1, 2, 3]))
    mirror = IcebergMirror(str(lake / "_changefeed"))
    names = names_of(lake, mirror)
    names.sync([str(t)], rep := _report())
    assert iceberg_rows(t) == delta_rows(t) and len(delta_rows(t)) == 3
    write_deltalake(str(t), batch([4, 5]), mode="append")
    assert mirror.behind(str(t))
    names.sync([str(t)], rep)
    assert iceberg_rows(t) == delta_rows(t) and len(delta_rows(t)) == 5
    write_deltalake(str(t), batch([7, 8]), mode="overwrite")  # every earlier file removed
    names.sync([str(t)], rep)
    assert iceberg_rows(t) == delta_rows(t) and len(delta_rows(t)) == 2
    assert rep.tables == 3 and rep.removed >= 2
    extra = batch([9]).append_column("note", pa.array(["new"], pa.string()))
    write_deltalake(str(t), extra, mode="append", schema_mode="merge")  # a new column: old files hold none
    names.sync([str(t)], rep)
    assert iceberg_rows(t) == delta_rows(t) and "note" in iceberg_rows(t)[0]
    assert not mirror.behind(str(t))

    # a restart: a new mirror resumes from the Delta version its last snapshot recorded, adding only what is new
    write_deltalake(str(t), batch([10]).append_column("note", pa.array(["x"], pa.string())), mode="append")
    again = IcebergMirror(str(lake / "_changefeed"))
    rep2 = _report()
    names_of(lake, again).sync([str(t)], rep2)
    assert iceberg_rows(t) == delta_rows(t)
    assert (rep2.tables, rep2.added, rep2.removed) == (1, 1, 0)
    ice = again.catalog.load_table(("cdc_app", "t"))
    assert ice.current_snapshot().summary[DELTA_VERSION] == str(DeltaTable(str(t)).version())


def test_a_renamed_table_gets_iceberg_metadata_at_its_new_place_and_a_dropped_one_leaves_the_catalog(
        lake: Path) -> None:
    src, dst = lake / "app" / "events", lake / "app" / "audit"
    write_deltalake(str(src), batch([1, 2]))
    mirror = IcebergMirror(str(lake / "_changefeed"))
    names = names_of(lake, mirror)
    names.sync([str(src)], _report())
    names.moving(None, str(src))  # type: ignore[arg-type]  # (no Spark catalog: Naming(None))
    shutil.move(src, dst)
    names.moved(None, str(dst))  # type: ignore[arg-type]
    names.sync([str(dst)], _report())
    assert iceberg_rows(dst) == delta_rows(dst) and len(delta_rows(dst)) == 2
    assert [t[1] for t in mirror.catalog.list_tables("cdc_app")] == ["audit"]
    assert mirror.catalog.load_table(("cdc_app", "audit")).location() == f"file://{dst}"
    names.dropping(None, str(dst))  # type: ignore[arg-type]
    assert mirror.catalog.list_tables("cdc_app") == []


def test_a_catalog_table_elsewhere_is_not_replaced(lake: Path) -> None:
    a, b = lake / "app" / "t", lake / "other" / "t"
    write_deltalake(str(a), batch([1]))
    write_deltalake(str(b), batch([2]))
    mirror = IcebergMirror(str(lake / "_changefeed"))
    mirror.sync(str(a), ("ns", "t"))
    with pytest.raises(ApplyError, match="not replaced"):
        mirror.sync(str(b), ("ns", "t"))


def test_types_and_what_is_refused() -> None:
    from pyiceberg import types as it

    schema = {"fields": [{"name": "a", "type": "byte"}, {"name": "b", "type": "timestamp_ntz"},
                         {"name": "c", "type": "decimal(38,10)"}, {"name": "d", "type": "timestamp"}]}
    assert columns(schema, "app.t") == [("a", it.IntegerType()), ("b", it.TimestampType()),
                                        ("c", it.DecimalType(38, 10)), ("d", it.TimestamptzType())]
    with pytest.raises(ApplyError, match="variant"):
        iceberg_type("variant", "app.t.doc")
    mapped = {"fields": [{"name": "x", "type": "long", "metadata": {"delta.columnMapping.physicalName": "col-1"}}]}
    with pytest.raises(ApplyError, match="column mapping"):
        columns(mapped, "app.t")
    from changefeed.spark.apply.iceberg_schema import new_schema

    s = new_schema([("a", it.IntegerType()), ("p", it.DecimalType(10, 2))])
    assert evolvable(s, [("a", it.LongType()), ("p", it.DecimalType(12, 2)), ("n", it.StringType())])
    assert not evolvable(s, [("a", it.StringType())])
    assert not evolvable(s, [("p", it.DecimalType(12, 3))])


def _report() -> Any:
    from changefeed.spark.apply.iceberg import SyncReport

    return SyncReport()


def test_iceberg_metadata_removed_behind_its_back_is_made_anew(lake: Path) -> None:
    """A VACUUM of the Delta table (by a user) removes the files its log does not know, Iceberg's among them: the
    mirror makes the Iceberg side anew rather than fail on every batch."""
    t = lake / "app" / "t"
    write_deltalake(str(t), batch([1, 2]))
    IcebergMirror(str(lake / "_changefeed")).sync(str(t), ("app", "t"))
    shutil.rmtree(t / "metadata")
    write_deltalake(str(t), batch([3]), mode="append")
    again = IcebergMirror(str(lake / "_changefeed"))
    again.sync(str(t), ("app", "t"))
    assert iceberg_rows(t) == delta_rows(t) and len(delta_rows(t)) == 3
    assert again.catalog.load_table(("app", "t")).scan().to_arrow().num_rows == 3
    shutil.rmtree(t / "metadata")  # and under a running mirror, which holds the table it last committed
    write_deltalake(str(t), batch([4]), mode="append")
    again.sync(str(t), ("app", "t"))
    assert iceberg_rows(t) == delta_rows(t) and len(delta_rows(t)) == 4
