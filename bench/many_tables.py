"""The same changes over few tables and over many: does the pipeline's cost follow changes or tables?

    .venv/bin/python bench/many_tables.py [--changes 20000] [--tables 4,200] [--batches 4] [--brokers HOST:PORT]
                                          [--verify]

One canal-json topic per run (3 partitions, a watermark every 100 ms of commit time), each table created by a
DDL first, then the changes spread round robin over the tables (inserts, a third of them updates of earlier
keys). `read_changes` + `apply_changes` land it in Delta on local[2] in the same number of micro-batches;
the figure is the seconds of each run and their ratio to the fewest tables' run (issue 19: at most 1.5x).
With --verify, also the seconds of one `verify` of each lake against the upstream state (issue 37: a verify over
1,000 tables in about the time of a few Spark jobs, not several jobs per table).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from changefeed.model import Column, Event, Index, Kind, TableInfo  # noqa: E402
from kafka import broker  # noqa: E402
from spark_pipeline import ours, produce  # noqa: E402

TARGET_RATIO = 1.5


def table(i: int) -> TableInfo:
    return TableInfo("many", f"t{i}", columns=[
        Column("id", "bigint", nullable=False), Column("name", "varchar(32)"), Column("amount", "decimal(12,2)")],
        indexes=[Index("PRIMARY", ["id"], primary=True, unique=True)])


def events(n: int, tables: int) -> list[Event]:
    """DDL creating every table, then `n` changes round robin over them, four per transaction."""
    infos = [table(i) for i in range(tables)]
    out = [Event(Kind.DDL, (1 << 40) + i, table=t, ddl_type="ActionCreateTable",
                 query=f"CREATE TABLE many.{t.table} (id bigint NOT NULL PRIMARY KEY, name varchar(32), "
                       "amount decimal(12,2))") for i, t in enumerate(infos)]
    keys = [0] * tables
    for i in range(n):
        ts = (1 << 40) + (i // 4 + 1) * (1 << 18)
        t = i % tables
        if keys[t] < 3 or i % 3:
            keys[t] += 1
            k = keys[t]
            out.append(Event(Kind.INSERT, ts, table=infos[t], after={"id": k, "name": f"n{k}",
                                                                    "amount": f"{k % 997}.25"}))
        else:
            k = (i * 7919) % keys[t] + 1
            out.append(Event(Kind.UPDATE, ts, table=infos[t], before={"id": k, "name": f"n{k}", "amount": "1.00"},
                             after={"id": k, "name": f"u{i}", "amount": f"{i % 991}.50"}))
    return out


def check(spark, lake: Path, evs: list[Event]) -> None:  # noqa: ANN001 - a SparkSession
    """Every table holds as many rows as keys were inserted into it (a run that lost changes is no figure)."""
    want: dict[str, int] = {}
    for ev in evs:
        if ev.kind is Kind.INSERT and ev.table is not None:
            want[ev.table.table] = want.get(ev.table.table, 0) + 1
    for name, rows in want.items():
        got = spark.read.format("delta").load(str(lake / "many" / name)).count()
        if got != rows:
            raise RuntimeError(f"many.{name}: {got} rows landed, {rows} expected")


def run(n: int, counts: list[int], batches: int, brokers: str | None = None,
        verified: list[tuple[int, float]] | None = None) -> list[tuple[int, float]]:
    from changefeed.spark import spark_session

    out: list[tuple[int, float]] = []
    with tempfile.TemporaryDirectory() as tmp, broker(brokers, Path(tmp)) as where:
        spark = spark_session("local[2]", "changefeed-bench-many-tables")
        spark.sparkContext.setLogLevel("ERROR")
        # an untimed run of the first shape first: the JVM's JIT, Delta's classes and the Python workers are then
        # as warm for the first figure as for the later ones (with a small warm-up only, the first figure, the
        # ratio's base, measured ~1.4x slower alone than after the 1M-change benchmark in `run_all`)
        warm = f"many_warm_{uuid.uuid4().hex[:8]}"
        produce(events(n, counts[0]), where, warm)
        ours(spark, where, warm, Path(tmp) / "warm", (n + counts[0]) // batches + 1)
        for tables in counts:
            topic = f"many_{tables}_{uuid.uuid4().hex[:8]}"
            evs = events(n, tables)
            produce(evs, where, topic)
            lake = Path(tmp) / f"lake_{tables}"
            seconds = ours(spark, where, topic, lake, (n + tables) // batches + 1)
            check(spark, lake, evs)
            out.append((tables, seconds))
            if verified is not None:
                verified.append((tables, timed_verify(spark, lake, evs)))
    return out


def timed_verify(spark, lake: Path, evs: list[Event]) -> float:  # noqa: ANN001 - a SparkSession
    """Seconds of one `verify` of the lake against the events' final state (it must pass: a figure of a verify
    that found differences would be no figure)."""
    from changefeed.spark.verify import verify
    from changefeed.upstream import final_state

    expected = final_state(evs)
    t0 = time.perf_counter()
    rep = verify(spark, str(lake), expected)
    seconds = time.perf_counter() - t0
    if not rep.ok:
        raise RuntimeError(f"verify of {lake} found differences: {[t.name for t in rep.tables if not t.ok][:5]}")
    return seconds


def print_table(n: int, rows: list[tuple[int, float]]) -> None:
    base = rows[0][1]
    print(f"{'tables':>8} {'changes':>9} {'seconds':>9} {'changes/s':>10} {'vs ' + str(rows[0][0]) + ' tables':>14} "
          f"{'target':>8}")
    for tables, seconds in rows:
        print(f"{tables:>8} {n:>9,} {seconds:>9.1f} {n / seconds:>10,.0f} {seconds / base:>13.2f}x "
              f"{'<=' + str(TARGET_RATIO) + 'x':>8}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--changes", type=int, default=20_000)
    ap.add_argument("--tables", default="4,200", help="table counts, the first one the baseline")
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--brokers", help="an existing broker instead of starting one")
    ap.add_argument("--verify", action="store_true", help="also time one verify of each lake")
    args = ap.parse_args()
    counts = [int(x) for x in args.tables.split(",")]
    t0 = time.perf_counter()
    print(f"{args.changes:,} canal-json changes from Kafka into Delta (SCD1) over {counts} tables, "
          f"{args.batches} micro-batches, Spark local[2]")
    verified: list[tuple[int, float]] | None = [] if args.verify else None
    print_table(args.changes, run(args.changes, counts, args.batches, args.brokers, verified))
    if verified:
        print(f"{'tables':>8} {'verify s':>9} {'s/table':>9}")
        for tables, seconds in verified:
            print(f"{tables:>8} {seconds:>9.1f} {seconds / tables:>9.3f}")
    print(f"({time.perf_counter() - t0:.0f} s in all)")


if __name__ == "__main__":
    main()
