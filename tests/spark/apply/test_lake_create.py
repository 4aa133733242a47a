"""A table made by Delta's builder after a run was killed while making it: the restart finds the folders Delta had
made (`_delta_log`, `_staged_commits` in it) without a commit, and creates the table (Delta's builder alone fails
there with DELTA_TABLE_NOT_FOUND: tests/spark/test_pipeline.py's kill test met it once in CI)."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import types as T

from changefeed.spark.apply.lake import Lake

# a type the driver's plain log writer does not make: the table takes Delta's builder
SCHEMA = T.StructType([T.StructField("id", T.LongType(), False), T.StructField("at", T.TimestampNTZType())])


def test_a_table_half_made_by_a_killed_run_is_created_on_the_restart(spark, tmp_path: Path) -> None:
    lake = Lake(spark, str(tmp_path / "lake"), "changefeed")
    path = str(tmp_path / "lake" / "app" / "users")
    (Path(path) / "_delta_log" / "_staged_commits").mkdir(parents=True)  # what the killed run left
    lake.create_table(path, lambda: SCHEMA, 7)
    assert lake.exists(path)
    assert spark.read.format("delta").load(path).schema.fieldNames() == ["id", "at"]


def test_a_log_holding_a_file_is_left_as_it_is(spark, tmp_path: Path) -> None:
    """Only empty folders go: a file in the log (not a commit: a table is not there yet) stays, and the builder's own
    error is what the caller gets."""
    lake = Lake(spark, str(tmp_path / "lake"), "changefeed")
    path = str(tmp_path / "lake" / "app" / "users")
    staged = Path(path) / "_delta_log" / "_staged_commits"
    staged.mkdir(parents=True)
    (staged / "someone.json").write_text("{}")
    try:
        lake.create_table(path, lambda: SCHEMA, 7)
    except Exception:  # noqa: BLE001 - Delta's own refusal of the folder
        pass
    assert (staged / "someone.json").read_text() == "{}"
