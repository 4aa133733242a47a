"""The same changes over few tables and over many: does the pipeline's cost follow changes or tables?

    .venv/bin/python bench/many_tables.py [--changes 20000] [--tables 4,200] [--batches 4] [--brokers HOST:PORT] [--s3]
                                          [--verify]

One canal-json topic per run (3 partitions, a watermark every 100 ms of commit time), each table created by a
DDL first, then the changes spread round robin over the tables (inserts, a third of them updates of earlier
keys). `read_changes` + `apply_changes` land it in Delta on local[2] in the same number of micro-batches;
the figure is the seconds of each run and their ratio to the fewest tables' run (issue 19: at most 1.5x). With
--s3 each topic is also consumed into a lake on S3 (S3Proxy on 127.0.0.1, started here) right after the local one,
in the same session: the S3 lake's seconds and their ratio to the local lake's (issue 36: at most 1.5x).
With --verify, also the seconds of one `verify` of each local lake against the upstream state (issue 37: a verify
over 1,000 tables in about the time of a few Spark jobs, not several jobs per table).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from contextlib import nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from changefeed.model import Column, Event, Index, Kind, TableInfo  # noqa: E402
from kafka import broker  # noqa: E402
from s3lake import s3_lake  # noqa: E402
from spark_pipeline import PHASES, ours, produce  # noqa: E402

TARGET_RATIO = 1.5
S3_RATIO = 1.5  # issue 36: the S3 lake within 1.5x of the local one


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


def say(what: str) -> None:
    """A progress line (a run over 1,000 tables takes minutes: what it is doing, since when)."""
    print(f"  [{time.strftime('%H:%M:%S')}] {what}", flush=True)


def check(spark, lake: Path | str, evs: list[Event]) -> None:  # noqa: ANN001 - a SparkSession
    """Every table holds as many rows as keys were inserted into it (a run that lost changes is no figure).

    On a local lake each table's rows are counted from its current files' Parquet footers (delta-rs lists them):
    a Spark read of each of 1,000 tables rebuilt each one's snapshot with jobs of its own, minutes before verify
    even started. On S3, Spark's."""
    want: dict[str, int] = {}
    for ev in evs:
        if ev.kind is Kind.INSERT and ev.table is not None:
            want[ev.table.table] = want.get(ev.table.table, 0) + 1
    local = not str(lake).startswith("s3a://")
    for name, rows in want.items():
        if local:
            import pyarrow.parquet as pq
            from deltalake import DeltaTable

            got = sum(pq.read_metadata(f.removeprefix("file://")).num_rows
                      for f in DeltaTable(f"{lake}/many/{name}").file_uris())
        else:
            got = spark.read.format("delta").load(f"{lake}/many/{name}").count()
        if got != rows:
            raise RuntimeError(f"many.{name}: {got} rows landed, {rows} expected")


def _timed(spark, where: str, topic: str, lake: Path | str, per_batch: int,  # noqa: ANN001 - a SparkSession
           evs: list[Event]) -> tuple[float, dict[str, float]]:
    """Seconds of one run into `lake`, checked, and the seconds of each step its micro-batches recorded."""
    before = dict(PHASES)
    say(f"consuming {topic} into {lake}")
    seconds = ours(spark, where, topic, lake, per_batch)
    say(f"consumed in {seconds:.1f} s; checking the tables' row counts")
    check(spark, lake, evs)
    return seconds, {k: v - before.get(k, 0.0) for k, v in PHASES.items()}


def run(n: int, counts: list[int], batches: int, brokers: str | None = None,
        s3: bool = False, verified: list[tuple[int, float]] | None = None) -> list[tuple[int, float, float | None]]:
    """(tables, seconds on a local lake, seconds on an S3 lake or None) per table count; with `s3`, each topic is
    consumed into a local lake and then into an S3 one (S3Proxy on this machine) back to back, by one session."""
    from changefeed.spark import spark_session

    out: list[tuple[int, float, float | None]] = []
    with tempfile.TemporaryDirectory() as tmp, broker(brokers, Path(tmp)) as where, \
            (s3_lake(Path(tmp) / "s3") if s3 else nullcontext()) as store:
        spark = spark_session("local[2]", "changefeed-bench-many-tables", conf=store.conf() if store else None)
        spark.sparkContext.setLogLevel("ERROR")
        # an untimed run of the first shape first: the JVM's JIT, Delta's classes and the Python workers are then
        # as warm for the first figure as for the later ones (with a small warm-up only, the first figure, the
        # ratio's base, measured ~1.4x slower alone than after the 1M-change benchmark in `run_all`); on S3 too
        # (S3A's client and its connection pool)
        warm = f"many_warm_{uuid.uuid4().hex[:8]}"
        say(f"warming up on {counts[0]} tables")
        produce(events(n, counts[0]), where, warm)
        ours(spark, where, warm, Path(tmp) / "warm", (n + counts[0]) // batches + 1)
        if store is not None:
            ours(spark, where, warm, store.url(warm), (n + counts[0]) // batches + 1)
        for tables in counts:
            topic = f"many_{tables}_{uuid.uuid4().hex[:8]}"
            evs = events(n, tables)
            say(f"{tables} tables: producing {len(evs):,} events")
            produce(evs, where, topic)
            per_batch = (n + tables) // batches + 1
            local, lp = _timed(spark, where, topic, Path(tmp) / f"lake_{tables}", per_batch, evs)
            if verified is not None:
                say(f"{tables} tables: verifying")
                verified.append((tables, timed_verify(spark, Path(tmp) / f"lake_{tables}", evs)))
                say(f"{tables} tables: verified in {verified[-1][1]:.1f} s")
            remote = None
            if store is not None:
                remote, rp = _timed(spark, where, topic, store.url(topic), per_batch, evs)
                STEPS[tables] = (lp, rp)
            out.append((tables, local, remote))
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


STEPS: dict[int, tuple[dict[str, float], dict[str, float]]] = {}  # per table count: local's and S3's steps


def print_table(n: int, rows: list[tuple[int, float, float | None]]) -> None:
    base = rows[0][1]
    s3 = any(r is not None for _, _, r in rows)
    print(f"{'tables':>8} {'changes':>9} {'seconds':>9} {'changes/s':>10} {'vs ' + str(rows[0][0]) + ' tables':>14} "
          f"{'target':>8}" + (f" {'S3 lake s':>10} {'S3/local':>9} {'target':>8}" if s3 else ""))
    for tables, seconds, remote in rows:
        line = (f"{tables:>8} {n:>9,} {seconds:>9.1f} {n / seconds:>10,.0f} {seconds / base:>13.2f}x "
                f"{'<=' + str(TARGET_RATIO) + 'x':>8}")
        if remote is not None:
            line += f" {remote:>10.1f} {remote / seconds:>8.2f}x {'<=' + str(S3_RATIO) + 'x':>8}"
        print(line)
    for tables, (lp, rp) in STEPS.items():
        steps = sorted(set(lp) | set(rp), key=lambda k: -rp.get(k, 0.0))
        print(f"  {tables} tables, seconds per step summed over the micro-batches, local / S3: "
              + ", ".join(f"{k} {lp.get(k, 0.0):.1f}/{rp.get(k, 0.0):.1f}" for k in steps))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--changes", type=int, default=20_000)
    ap.add_argument("--tables", default="4,200", help="table counts, the first one the baseline")
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--brokers", help="an existing broker instead of starting one")
    ap.add_argument("--s3", action="store_true", help="each run on a local lake and on an S3 lake (S3Proxy)")
    ap.add_argument("--verify", action="store_true", help="also time one verify of each lake")
    args = ap.parse_args()
    counts = [int(x) for x in args.tables.split(",")]
    t0 = time.perf_counter()
    print(f"{args.changes:,} canal-json changes from Kafka into Delta (SCD1) over {counts} tables, "
          f"{args.batches} micro-batches, Spark local[2]")
    verified: list[tuple[int, float]] | None = [] if args.verify else None
    print_table(args.changes, run(args.changes, counts, args.batches, args.brokers, args.s3, verified))
    if verified:
        print(f"{'tables':>8} {'verify s':>9} {'s/table':>9}")
        for tables, seconds in verified:
            print(f"{tables:>8} {seconds:>9.1f} {seconds / tables:>9.3f}")
    print(f"({time.perf_counter() - t0:.0f} s in all)")


if __name__ == "__main__":
    main()
