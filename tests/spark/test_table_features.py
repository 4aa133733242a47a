"""The lake read by engines other than Spark: delta-rs (`deltalake`) and Polars. A table carries a Delta
feature only once a DDL needs it (auto), or never (minimal: the DDL rewrites the table); every table without
a reader-locking feature must read the same rows in delta-rs and Polars as in Spark, which equal upstream."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from changefeed.spark.apply import read_progress
from changefeed.spark.table_features import table_properties
from changefeed.upstream import final_state
from changefeed.workload import generate

from .test_pipeline import consume, lake_equals, produce

# the DDL that need column mapping (a column renamed or dropped) or type widening (a type changed)
RESHAPING = ("ActionRenameColumn", "ActionDropColumn", "ActionDropColumns", "ActionModifyColumn",
             "ActionMultiSchemaChange")
LOCKING = {"delta.columnMapping.mode": "name", "delta.enableTypeWidening": "true"}


def _value(v: Any) -> Any:
    if isinstance(v, bytearray | memoryview):
        return bytes(v)
    if isinstance(v, datetime):
        return v.replace(tzinfo=None)
    if isinstance(v, Decimal):
        return v.normalize()
    return v


def _rows(records: list[dict[str, Any]]) -> list[tuple]:
    return sorted((tuple(sorted((k, _value(v)) for k, v in r.items())) for r in records), key=repr)


def spark_rows(spark, path: Path) -> list[tuple]:
    return _rows([r.asDict() for r in spark.read.format("delta").load(str(path)).collect()])


def delta_rs_rows(path: Path) -> list[tuple]:
    return _rows(DeltaTable(str(path)).to_pyarrow_table().to_pylist())


def polars_rows(path: Path) -> list[tuple]:
    import polars as pl

    return _rows(pl.read_delta(str(path)).to_dicts())


def tables(lake: Path) -> list[Path]:
    return sorted(p.parent for p in lake.glob("*/*/_delta_log") if not p.parent.parent.name.startswith("_"))


def reshaped_tables(events) -> set[str]:
    return {f"{(e.pre_table or e.table).schema}.{(e.pre_table or e.table).table}" for e in events
            if e.ddl_type in RESHAPING}


@pytest.mark.parametrize("mode", ["auto", "minimal"])
def test_tables_carry_only_the_features_their_ddl_need(spark, tmp_path: Path, mode: str) -> None:
    events = list(generate(seed=11, transactions=60))
    live, lake = tmp_path / "live", tmp_path / "lake"
    produce(tmp_path, f"file://{live}/t?protocol=canal-json&enable-tidb-extension=true&partition-num=3", events)
    consume(spark, live, lake, "canal-json", {"enable-tidb-extension": "true"}, table_features=mode)
    lake_equals(spark, lake, final_state(events))

    reshaped = reshaped_tables(events)
    assert reshaped, "the workload renames and drops columns: the test needs such a table"
    upgrades = [u for rec in read_progress(spark, str(lake)) for u in rec.get("upgrades", [])]
    plain = 0
    for path in tables(lake):
        name = f"{path.parent.name}.{path.name}"
        props = table_properties(spark, str(path))
        locked = sorted(k for k, v in LOCKING.items() if props.get(k, "").lower() == v)
        if locked:
            # auto only, and only where a DDL asked for it; the progress says which DDL turned it on
            assert mode == "auto", f"{name} carries {locked} with table-features=minimal"
            assert name in reshaped, f"{name} carries {locked} but no DDL reshaped it"
            assert any(u["table"] == name for u in upgrades), (name, upgrades)
            with pytest.raises(Exception, match="columnMapping|typeWidening"):
                DeltaTable(str(path)).to_pyarrow_table()
            if "delta.enableTypeWidening" not in locked:  # delta-rs reads column mapping through DataFusion
                got = QueryBuilder().register("t", DeltaTable(str(path))).execute("select * from t").read_all()
                assert _rows(pa.table(got).to_pylist()) == spark_rows(spark, path), name
            continue
        plain += 1
        want = spark_rows(spark, path)
        assert delta_rs_rows(path) == want, f"{name}: delta-rs reads other rows than Spark"
        assert polars_rows(path) == want, f"{name}: Polars reads other rows than Spark"
    assert plain >= 1
    if mode == "minimal":
        assert plain == len(tables(lake)) and not upgrades
