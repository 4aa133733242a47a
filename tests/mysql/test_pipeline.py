"""From SQL on a live MariaDB through `changefeed run --source mysql://` to Delta tables, then
`changefeed verify --against mysql://` comparing the lake with the live tables."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from changefeed.cli import app
from changefeed.job import Hooks, RunOptions, default_sink, run
from changefeed.model import Kind
from changefeed.mysql.source import live_state
from changefeed.mysql.uri import parse_mysql_uri
from changefeed.spark.verify import events_from_stream

from .test_types import DDL, ROW


class _WriteOnce(Hooks):
    """Writes the SQL changes when the source has produced its first event (its snapshot taken), in the
    producer's thread, so they are committed before the source reads on: they reach the lake through the
    binlog, not the snapshot."""

    def __init__(self, write: Callable[[], None]) -> None:
        self.write: Callable[[], None] | None = write

    def produced(self, events: int) -> None:
        if self.write is not None:
            write, self.write = self.write, None
            write()


def test_run_from_mysql_to_delta_and_verify_against_the_live_tables(mariadb, spark, tmp_path: Path) -> None:
    db = mariadb.fresh_db("pipeline_db")
    mariadb.run("SET time_zone = '+00:00'", DDL, ROW.format(id=1), "INSERT INTO types (id) VALUES (2)",
                "CREATE TABLE orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, customer VARCHAR(20) NOT NULL, "
                "amount DECIMAL(10,2), placed DATETIME(3))",
                *[f"INSERT INTO orders (customer, amount, placed) VALUES ('c{i % 7}', {i}.25, "
                  f"'2024-01-01 00:00:{i % 60:02d}.5')" for i in range(60)],
                db=db)

    def writes() -> None:
        mariadb.run(
            "SET time_zone = '+00:00'", ROW.format(id=3),
            "UPDATE types SET vc = 'updated', e = 'small', s = 'b,c', j = '{\"z\": true}' WHERE id = 1",
            "DELETE FROM types WHERE id = 2",
            "BEGIN", "INSERT INTO orders (customer, amount) VALUES ('multi', 1.00)",
            "UPDATE types SET i = 42 WHERE id = 3", "COMMIT",
            "ALTER TABLE orders ADD COLUMN status ENUM('new','paid') NOT NULL DEFAULT 'new'",
            "UPDATE orders SET status = 'paid', amount = amount + 1 WHERE id % 5 = 0",
            "DELETE FROM orders WHERE id % 11 = 0",
            "CREATE TABLE later (k INT PRIMARY KEY, v BLOB)", "INSERT INTO later VALUES (1, x'00ff'), (2, NULL)",
            db=db)

    hooks = _WriteOnce(writes)
    opts = RunOptions(source=mariadb.uri(f"{db}.*"), work=tmp_path / "run")
    rep = run(spark, opts, hooks)
    assert hooks.write is None, "the changes were written while the source was running"
    # ... and came through the binlog: updates, deletes and DDL in the stream (a snapshot has inserts only)
    stream = events_from_stream(default_sink(opts).split("?")[0], opts.protocol, opts.options)
    assert {Kind.UPDATE, Kind.DELETE} <= {e.kind for e in stream}
    assert {"ActionAddColumn", "ActionCreateTable"} <= {e.ddl_type for e in stream if e.kind is Kind.DDL}
    v = rep.verification
    assert v is not None
    assert v.ok, [(t.name, t.problem, t.samples) for t in v.tables if not t.ok]
    assert sorted(t.name for t in v.tables) == [f"{db}.later", f"{db}.orders", f"{db}.types"]
    counts = {t.name: t.actual for t in v.tables}
    assert counts == {f"{db}.later": 2, f"{db}.orders": 61 - len([i for i in range(1, 62) if i % 11 == 0]),
                      f"{db}.types": 2}
    # the lake holds the values the SQL wrote (not only what the capture read)
    row = spark.read.format("delta").load(f"{opts.lake}/{db}/types").where("id = 1").collect()[0]
    assert (row["vc"], row["e"], row["s"], row["ti"], int(row["biu"]), row["j"]) == (
        "updated", "small", "b,c", -128, 18446744073709551615, '{"z": true}')
    paid = spark.read.format("delta").load(f"{opts.lake}/{db}/orders").where("status = 'paid'").count()
    assert paid == len([i for i in range(1, 62) if i % 5 == 0 and i % 11 != 0])
    # and the CLI's verify, against the live tables, agrees
    r = CliRunner().invoke(app, ["verify", "--lake", str(opts.lake), "--against", mariadb.uri(f"{db}.*")])
    assert r.exit_code == 0, r.output
    # the expected side is the live tables as they are when verify runs: a change the lake has not seen is there
    mariadb.run("INSERT INTO later VALUES (3, x'01')", db=db)
    state, _ = live_state(parse_mysql_uri(mariadb.uri(f"{db}.*")))
    assert sorted(r["k"] for r in state.tables[(db, "later")].rows.values()) == [1, 2, 3]
