"""What the driver keeps per table: bytes per table at 1,000 and 10,000 tables (issue 38 item 5).

    .venv/bin/python bench/table_memory.py [--tables 1000,10000] [--per-table 2] [--batches 2]

Each table count runs in a process of its own (a clean resident size), with the session's small-machine
defaults (`spark.driver.memory=1g`): the many-tables workload (`many_tables.events`: a CREATE TABLE per table,
then `per-table` changes for each, round robin) produced to a Kafka topic and consumed by `read_changes` +
`apply_changes` in `batches` micro-batches (the later ones rewrite tables the first created: the kept rows and
the delta-rs table objects are then in use). A small warm-up run on another lake comes first. Read at the end of
the last micro-batch, against the same readings before the measured run:
- the Python driver's resident size (its heap, Arrow buffers, delta-rs's Rust objects) and what `tracemalloc` traces
  (Python objects only; traced from just before the run);
- the JVM heap in use right after a full GC (`jcmd GC.run`, then `jstat -gc`);
- the consumer's own per-table structures, counted: definitions (`TableCatalog`), each table's files
  (`DeltaLogs`), the rows kept for the next rewrite (`driverfiles.Kept`), the delta-rs table objects held open.
Issue 38: 10,000 tables in a 1 GB driver.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kafka import broker  # noqa: E402
from many_tables import check, events  # noqa: E402
from soak import heap_after_gc  # noqa: E402
from spark_pipeline import produce  # noqa: E402


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def trimmed_rss_mb() -> float:
    """The resident size once the allocators gave back what they hold free (glibc's `malloc_trim`, Arrow's pool):
    what is left is in use, not retained from an earlier peak."""
    import ctypes

    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    return rss_mb()


def consume(spark: Any, where: str, topic: str, lake: Path, per_batch: int, at_end: Any = None) -> int:
    """Consume the topic into `lake`; `at_end(applier)` is called at the end of the last micro-batch, with the
    consumer still holding what it keeps. The number of micro-batches."""
    from changefeed.spark.apply import ChangeApplier
    from changefeed.spark.pipeline import apply_changes, read_changes

    appliers: list[ChangeApplier] = []
    orig = ChangeApplier.__init__

    def init(self: ChangeApplier, *a: Any, **k: Any) -> None:
        orig(self, *a, **k)
        appliers.append(self)

    batches = [0]
    changes = read_changes(spark, f"kafka://{where}/{topic}", "canal-json", {"enable-tidb-extension": "true"},
                           schema_store=f"{lake}/_schemas", max_records_per_trigger=per_batch)
    ChangeApplier.__init__ = init  # type: ignore[method-assign]
    try:
        q = apply_changes(changes, str(lake), checkpoint=f"{lake}/_cp",
                          on_batch=lambda rep: batches.__setitem__(0, batches[0] + 1))
    finally:
        ChangeApplier.__init__ = orig  # type: ignore[method-assign]
    q.awaitTermination()
    if at_end is not None:
        at_end(appliers[-1])
    return batches[0]


def structures(a: Any) -> dict[str, Any]:
    """Counts of what the consumer keeps per table."""
    logs = a.store.logs
    rs = logs._rs
    kept = a.writers.multi.kept
    import pyarrow as pa

    kept_held = sum(r[2].get_total_buffer_size() for r in list(kept._rows.values()))
    return {"arrow pool MB": round(pa.total_allocated_bytes() / 2**20, 1),
            "kept rows held MB": round(kept_held / 2**20, 1),
            "definitions": len(a.catalog.defs), "known columns": len(a.catalog.known),
            "table files": len(logs._files), "versions": len(a.store._versions),
            "delta-rs tables open": len(rs._open) if rs is not None else 0,
            "kept rows tables": len(kept._rows), "kept rows MB": round(kept._bytes / 2**20, 1)}


def one(tables: int, per_table: int, batches: int) -> dict[str, Any]:
    """The readings of one table count (in this process)."""
    from changefeed.spark import spark_session

    with tempfile.TemporaryDirectory() as tmp, broker(None, Path(tmp)) as where:
        spark = spark_session("local[2]", "changefeed-bench-table-memory")
        spark.sparkContext.setLogLevel("ERROR")
        jvm = int(spark._jvm.ProcessHandle.current().pid())  # type: ignore[attr-defined]
        warm = f"mem_warm_{uuid.uuid4().hex[:8]}"
        produce(events(400, 20), where, warm)
        consume(spark, where, warm, Path(tmp) / "warm", 220)
        topic = f"mem_{tables}_{uuid.uuid4().hex[:8]}"
        evs = events(tables * per_table, tables)
        produce(evs, where, topic)
        per_batch = (tables * per_table + tables) // batches + 1  # as many_tables.py splits its topic
        gc.collect()
        heap0 = heap_after_gc(jvm)
        rss0 = trimmed_rss_mb()
        tracemalloc.start()
        got: dict[str, Any] = {}

        def at_end(a: Any) -> None:
            gc.collect()
            got["traced_mb"] = tracemalloc.get_traced_memory()[0] / 2**20
            got["rss_mb"] = rss_mb() - rss0
            got["rss_trimmed_mb"] = trimmed_rss_mb() - rss0
            heap = heap_after_gc(jvm)  # (soak.py's reading: the live objects' MB after a full GC, and more)
            got["heap_mb"] = (heap.mb if heap else 0.0) - (heap0.mb if heap0 else 0.0)
            got["heap_total_mb"] = heap.mb if heap else None
            got["rss_total_mb"] = rss_mb()
            got.update(structures(a))

        t0 = time.perf_counter()
        got["micro-batches"] = consume(spark, where, topic, Path(tmp) / "lake", per_batch, at_end)
        got["seconds"] = round(time.perf_counter() - t0, 1)
        tracemalloc.stop()
        check(spark, Path(tmp) / "lake", evs)
        got["tables"] = tables
        return got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", default="1000,10000", help="table counts, each in a process of its own")
    ap.add_argument("--per-table", type=int, default=2, help="changes per table")
    ap.add_argument("--batches", type=int, default=2)
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child process: one table count
    args = ap.parse_args()
    if args.one:
        print("RESULT " + json.dumps(one(args.one, args.per_table, args.batches)), flush=True)
        return
    print(f"driver memory per table: the many-tables workload, {args.per_table} changes per table, "
          f"{args.batches} micro-batches, Spark local[2], spark.driver.memory=1g; each count in its own process")
    print_table(run([int(x) for x in args.tables.split(",")], args.per_table, args.batches))


def run(counts: list[int], per_table: int = 2, batches: int = 2) -> list[dict[str, Any]]:
    """The readings of each table count, each in a process of its own."""
    rows = []
    for n in counts:
        print(f"  [{time.strftime('%H:%M:%S')}] {n} tables (load {os.getloadavg()[0]:.1f})", flush=True)
        out = subprocess.run([sys.executable, __file__, "--one", str(n), "--per-table", str(per_table),
                              "--batches", str(batches)], capture_output=True, text=True, check=False)
        lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
        if out.returncode or not lines:
            raise RuntimeError(f"the run over {n} tables failed: {out.stderr.strip().splitlines()[-1:]}")
        rows.append(json.loads(lines[-1][7:]))
        print("    " + json.dumps(rows[-1]), flush=True)
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'tables':>8} {'run s':>7} {'py RSS +MB':>11} {'trimmed':>8} {'B/table':>8} {'traced MB':>10} "
          f"{'B/table':>8} {'JVM heap +MB':>13} {'B/table':>8} {'heap MB':>8} {'py RSS MB':>10}")
    for r in rows:
        n = r["tables"]
        print(f"{n:>8,} {r['seconds']:>7.1f} {r['rss_mb']:>11.1f} {r['rss_trimmed_mb']:>8.1f} "
              f"{r['rss_trimmed_mb'] * 2**20 / n:>8,.0f} "
              f"{r['traced_mb']:>10.1f} {r['traced_mb'] * 2**20 / n:>8,.0f} {r['heap_mb']:>13.1f} "
              f"{r['heap_mb'] * 2**20 / n:>8,.0f} {r['heap_total_mb'] or 0:>8.0f} {r['rss_total_mb']:>10.0f}")
    print("  (+MB: grown from before the run to the end of its last micro-batch; trimmed: once the allocators gave "
          "back their free memory, B/table of that; heap: in use after a full GC)")


if __name__ == "__main__":
    main()
