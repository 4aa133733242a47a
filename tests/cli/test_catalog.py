"""Tables by name and Iceberg readers, end to end (issue 42): the workload's stream consumed once with `--catalog`
and `--table-format delta+iceberg` over a Hive metastore (embedded Derby in a folder the test names), then a
second Spark session in its own process (tests/cli/catalog_reader.py) lists the catalog, reads every table by
name against the upstream state, and reads each table's Iceberg side with pyiceberg against Spark's read of the
Delta table. Real Spark, Delta, Hive metastore and pyiceberg; nothing mocked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
from typer.testing import CliRunner

from changefeed.cli import app

READER = Path(__file__).with_name("catalog_reader.py")


def cli(*args: str, cwd: Path | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "changefeed.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def test_a_second_session_reads_the_tables_by_name_and_pyiceberg_their_iceberg_side(tmp_path: Path) -> None:
    events, expected = tmp_path / "events.jsonl", tmp_path / "expected.jsonl"
    # the stream is made in this process (no Spark in either command; two Python start-ups less): the consumer
    # and the reading session are the processes under test
    w = CliRunner().invoke(app, ["workload", "-o", str(events), "--transactions", "120", "--expected", str(expected)])
    assert w.exit_code == 0, w.output
    topic = f"file://{tmp_path}/topic?protocol=canal-json&enable-tidb-extension=true"
    w = CliRunner().invoke(app, ["produce", "--sink-uri", topic, "-i", str(events)])
    assert w.exit_code == 0, w.output
    lake, ms, cwd = tmp_path / "lake", tmp_path / "metastore", tmp_path / "cwd"
    cwd.mkdir()
    r = cli("consume", "--from", f"file://{tmp_path}/topic?protocol=canal-json", "--lake", str(lake),
            "--catalog", "spark_catalog", "--database-prefix", "cdc_", "--table-format", "delta+iceberg",
            "--conf", "spark.sql.catalogImplementation=hive",
            "--conf", f"spark.hadoop.javax.jdo.option.ConnectionURL=jdbc:derby:;databaseName={ms}/metastore_db;"
                      "create=true",
            "--conf", f"spark.sql.warehouse.dir={ms}/warehouse", cwd=cwd)
    assert r.returncode == 0, r.stderr
    assert list(cwd.iterdir()) == []  # no spark-warehouse/, metastore_db/ or derby.log where the command ran
    assert (ms / "metastore_db").is_dir()

    got = subprocess.run([sys.executable, str(READER), str(ms), str(lake), str(expected), "cdc_"],
                         capture_output=True, text=True, timeout=900, cwd=cwd)
    assert got.returncode == 0, got.stderr[-3000:]
    out = orjson.loads(got.stdout)
    upstream = sorted(line for line in out["tables"])
    assert upstream == ["app.audit", "app.orders", "app.users"]  # the workload's final tables
    # the catalog names exactly the upstream tables: `events` moved to `audit` (RENAME TABLE), `scratch` gone
    # (DROP TABLE), under the prefixed database
    assert "cdc_app" in out["databases"]
    assert out["catalog"] == {"app": ["audit", "orders", "users"]}
    for name, t in out["tables"].items():  # read by name, equal to upstream (columns after every DDL)
        assert t["columns"] and t["diff"] == [0, 0] and t["rows"] == t["expected"] > 0, (name, t)
    # the Iceberg side: one namespace, the same tables, each equal to Spark's read of the Delta table
    assert out["iceberg_tables"] == {"cdc_app": ["cdc_app.audit", "cdc_app.orders", "cdc_app.users"]}
    for name, t in out["iceberg"].items():
        assert t["static_equal"] and t["catalog_equal"] and t["columns"], (name, t)
        assert t["static_rows"] == t["delta_rows"] == out["tables"][name]["expected"], (name, t)
    for table in ("audit", "orders", "users"):  # where UniForm keeps it
        assert list((lake / "app" / table / "metadata").glob("*.metadata.json")), table
    assert not (lake / "app" / "events").exists() and not (lake / "app" / "scratch").exists()
