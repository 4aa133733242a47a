"""A database's first micro-batch creating its tables: 1,000 tables against 4, the same changes, one micro-batch each.

    .venv/bin/python bench/creation.py [--tables 1000] [--changes 4000] [--brokers HOST:PORT]

The many-tables workload (`many_tables.events`: a CREATE TABLE per table, then the changes round robin over them)
is produced to a topic per table count and consumed by `read_changes` + `apply_changes` in ONE micro-batch (every
table created, then written, in it). The figure is that batch's seconds with `tables` tables beside the same with 4
(the same changes: the difference is what creating and first writing the extra tables costs), and the seconds the
batch spent in its CREATE TABLE (`ddl create` below: the calls of `Lake.create_table` timed). Issue 38 item 4: the
first micro-batch of 1,000 tables in <= 3 s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kafka import broker  # noqa: E402
from many_tables import check, events  # noqa: E402
from spark_pipeline import produce  # noqa: E402

TARGET_SECONDS = 3.0


def first_batch(spark: Any, where: str, topic: str, lake: Path, messages: int) -> tuple[float, dict[str, float],
                                                                                          float]:
    """The seconds of the one micro-batch consuming the topic, its phases, and the seconds of its creations."""
    from changefeed.spark.apply.lake import Lake
    from changefeed.spark.pipeline import apply_changes, read_changes

    reports: list[Any] = []
    created = [0.0]
    orig, orig_many = Lake.create_table, Lake.create_tables
    depth = threading.local()  # (create_tables calls create_table for some: timed once)

    def timer(fn: Any) -> Any:
        def timed(self: Lake, *a: Any, **k: Any) -> None:
            outer = not getattr(depth, "on", False)
            depth.on = True
            t0 = time.perf_counter()
            try:
                fn(self, *a, **k)
            finally:
                depth.on = not outer
                if outer:
                    created[0] += time.perf_counter() - t0
        return timed

    changes = read_changes(spark, f"kafka://{where}/{topic}", "canal-json", {"enable-tidb-extension": "true"},
                           schema_store=f"{lake}/_schemas", max_records_per_trigger=messages)
    Lake.create_table, Lake.create_tables = timer(orig), timer(orig_many)  # type: ignore[method-assign]
    try:
        q = apply_changes(changes, str(lake), checkpoint=f"{lake}/_cp", on_batch=reports.append)
        q.awaitTermination()
    finally:
        Lake.create_table, Lake.create_tables = orig, orig_many  # type: ignore[method-assign]
    applied = [r for r in reports if r.rows_in]
    if len(applied) != 1:
        raise RuntimeError(f"{len(reports)} micro-batches ({len(applied)} with changes): the topic was to be one")
    rep = applied[0]
    return rep.seconds, dict(rep.phases), created[0]


def run(tables: int, changes: int, brokers: str | None = None) -> list[tuple[int, float, dict[str, float], float]]:
    from changefeed.spark import spark_session

    out = []
    with tempfile.TemporaryDirectory() as tmp, broker(brokers, Path(tmp)) as where:
        spark = spark_session("local[2]", "changefeed-bench-creation")
        spark.sparkContext.setLogLevel("ERROR")
        for label, n in (("warm-up", 4), ("warm-up", 100), ("timed", 4), ("timed", tables), ("timed", 4),
                         ("timed", tables)):
            topic = f"create_{n}_{uuid.uuid4().hex[:8]}"
            evs = events(changes, n)
            produce(evs, where, topic)
            lake = Path(tmp) / f"lake_{label}_{n}_{len(out)}_{uuid.uuid4().hex[:4]}"
            seconds, phases, created = first_batch(spark, where, topic, lake, len(evs) * 4)
            check(spark, lake, evs)
            print(f"  [{time.strftime('%H:%M:%S')}] {label} {n} tables: {seconds:.2f} s (creations {created:.2f} s; "
                  + ", ".join(f"{k} {v:.2f}" for k, v in phases.items()) + ")", flush=True)
            if label == "timed":
                out.append((n, seconds, phases, created))
    return out


def print_table(rows: list[tuple[int, float, dict[str, float], float]]) -> None:
    """The best of each table count's runs, beside the 4 tables' (the same changes)."""
    by: dict[int, list[tuple[float, float]]] = {}
    for n, s, _, c in rows:
        by.setdefault(n, []).append((s, c))
    base = min(s for s, _ in by[4])
    print(f"{'tables':>8} {'first batch s':>14} {'creations s':>12} {'vs 4 tables':>12} {'target':>8}")
    for n, runs in by.items():
        s, c = min(runs)
        print(f"{n:>8,} {s:>14.2f} {c:>12.2f} {s / base:>11.2f}x {'<=' + str(TARGET_SECONDS) + ' s':>8}")
    print("  (creations s: the batch's calls creating tables, summed over its writer threads)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", type=int, default=1000)
    ap.add_argument("--changes", type=int, default=4000)
    ap.add_argument("--brokers", help="an existing broker instead of starting one")
    args = ap.parse_args()
    print(f"the first micro-batch of a database: {args.changes:,} changes over 4 and over {args.tables:,} new tables, "
          "one micro-batch each, Spark local[2]")
    print_table(run(args.tables, args.changes, args.brokers))


if __name__ == "__main__":
    main()
