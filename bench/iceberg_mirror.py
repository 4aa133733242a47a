"""What the Iceberg side (`--table-format delta+iceberg`) costs per Delta commit: the sync of one table after each
commit, as the consumer runs it after a micro-batch (spark/apply/iceberg.py), without Spark.

    .venv/bin/python bench/iceberg_mirror.py [--commits 200] [--rows 1000] [--every 10]

One Delta table (delta-rs), `--commits` commits: appends of `--rows` rows, and every `--every`th an overwrite of
the whole table (every file removed, one added: the most removals a commit can make). The figure: milliseconds of
each sync (median, p90, max), at the start and at the end of the run (the Iceberg metadata grows with the
commits), and beside it the Delta write itself (delta-rs) for scale.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from changefeed.spark.apply.iceberg import IcebergMirror, SyncReport  # noqa: E402


def rows(n: int, start: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array([f"n{i}" for i in ids]),
                     "amount": pa.array([i / 100 for i in ids], pa.float64())})


def ms(xs: list[float]) -> str:
    xs = sorted(xs)
    return (f"median {statistics.median(xs) * 1000:.1f} ms, p90 {xs[int(len(xs) * 0.9)] * 1000:.1f} ms, "
            f"max {xs[-1] * 1000:.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--commits", type=int, default=200)
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--every", type=int, default=10)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        lake = Path(d)
        path = str(lake / "app" / "t")
        (lake / "_changefeed").mkdir()
        mirror = IcebergMirror(str(lake / "_changefeed"))
        write_deltalake(path, rows(a.rows, 0))
        mirror.sync(path, ("app", "t"))  # the first: imports and the catalog's tables
        syncs: list[float] = []
        writes: list[float] = []
        rep = SyncReport()
        for i in range(1, a.commits + 1):
            t0 = time.perf_counter()
            if i % a.every == 0:
                dt = DeltaTable(path)
                keep = dt.to_pyarrow_table().slice(0, max(1, dt.to_pyarrow_table().num_rows * 9 // 10))
                write_deltalake(path, keep, mode="overwrite")
            else:
                write_deltalake(path, rows(a.rows, i * a.rows), mode="append")
            writes.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            mirror.sync(path, ("app", "t"), rep)
            syncs.append(time.perf_counter() - t0)
        n = max(1, len(syncs) // 10)
        print(f"{a.commits} commits of {a.rows} rows (an overwrite every {a.every}): {rep.added} files added, "
              f"{rep.removed} removed on the Iceberg side")
        print(f"sync per commit, first {n}: {ms(syncs[:n])}")
        print(f"sync per commit, last {n}: {ms(syncs[-n:])}")
        print(f"sync per commit, all: {ms(syncs)}; the Delta write itself: {ms(writes)}")


if __name__ == "__main__":
    main()
