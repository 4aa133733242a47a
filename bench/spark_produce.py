"""Spark as the producer: `write_changes` (spark/produce.py) beside `changefeed produce` in the same run.

    .venv/bin/python bench/spark_produce.py [--changes 1000000] [--master local[2]] [--protocol canal-json]
    .venv/bin/python bench/spark_produce.py --cluster 2      # write_changes on a standalone cluster it starts

Both send the same changes (bench/spark_pipeline.py's five-column table: inserts and updates, four changes a
transaction) in the same protocol to the file transport (3 partitions, TiCDC's default dispatcher), each to a topic
of its own in a temporary folder. `changefeed produce` is the CLI in a process of its own reading event lines (its
whole run, start-up included). `write_changes` reads the same changes as `read_changes` gives them, decoded and
cached before the clock starts (the decode is the consumer's cost, measured by bench/spark_pipeline.py), and is
timed from the call to the last acknowledged message: the survey of definitions and tables, the routing stage,
the shuffle by target partition and the sending tasks. Rows/s is changes sent per wall-clock second.

`--cluster N` starts Spark's standalone cluster (scripts/spark-cluster: a master and N one-core workers on
127.0.0.1, in a folder of its own) for the `write_changes` side, and stops it after. The load average
(`os.getloadavg`, 1 minute) when each side starts and ends is printed: the machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from changefeed.eventline import EventWriter  # noqa: E402
from spark_pipeline import events  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--changes", type=int, default=1_000_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--protocol", default="canal-json")
    ap.add_argument("--cluster", type=int, default=0, help="workers of a standalone cluster to run write_changes on")
    args = ap.parse_args()
    opts = "&enable-tidb-extension=true" if args.protocol == "canal-json" else ""
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="bench-produce-") as tmp:
        t = Path(tmp)
        evs = events(args.changes)
        w = EventWriter()
        lines = t / "events.jsonl"
        with open(lines, "wb") as f:
            for e in evs:
                f.write(w.line(e) + b"\n")
        del evs
        # the source the Spark side reads: the same changes as canal-json (what a consumer decodes)
        src = f"file://{t}/streams/src?protocol=canal-json&enable-tidb-extension=true&partition-num=3"
        cli = [sys.executable, "-m", "changefeed.cli"]
        subprocess.run([*cli, "produce", "--sink-uri", src, "-i", str(lines)], check=True, cwd=root,
                       capture_output=True)

        loads = [os.getloadavg()[0]]
        t0 = time.monotonic()
        subprocess.run([*cli, "produce", "--sink-uri",
                        f"file://{t}/streams/cli?protocol={args.protocol}{opts}&partition-num=3", "-i", str(lines)],
                       check=True, cwd=root, capture_output=True)
        cli_s = time.monotonic() - t0
        loads.append(os.getloadavg()[0])

        from changefeed.spark import spark_session

        master = args.master
        script = root / "scripts" / "spark-cluster"
        env = dict(os.environ, SPARK_CLUSTER_DIR=str(t / "cluster"))
        if args.cluster:
            up = subprocess.run([str(script), "start", str(args.cluster), "1"], check=True, env=env,
                                capture_output=True, text=True)
            master = next(w for w in up.stdout.split() if w.startswith("spark://"))
        try:
            spark = spark_session(master, "bench-produce")
            n, spark_s, rep, load0 = spark_side(spark, t, args.protocol, opts)
            loads += [load0, os.getloadavg()[0]]
            spark.stop()
        finally:
            if args.cluster:
                subprocess.run([str(script), "stop"], env=env, capture_output=True)
    where = f"{args.cluster} workers x 1 core" if args.cluster else master
    print(f"{'producer':<40}{'changes':>10}{'seconds':>10}{'rows/s':>10}   load (1-min) at start-end")
    print(f"{'changefeed produce (one process)':<40}{args.changes:>10,}{cli_s:>10.1f}{args.changes / cli_s:>10,.0f}"
          f"   {loads[0]:.1f}-{loads[1]:.1f}")
    print(f"{'write_changes (' + where + ')':<40}{n:>10,}{spark_s:>10.1f}{n / spark_s:>10,.0f}"
          f"   {loads[2]:.1f}-{loads[3]:.1f}")
    print(f"write_changes sent {rep.messages:,} messages to {rep.targets} partitions; "
          f"ratio {(n / spark_s) / (args.changes / cli_s):.2f}x")


def spark_side(spark: Any, t: Path, protocol: str, opts: str) -> tuple[int, float, Any, float]:
    """The changes decoded and cached, then `write_changes` timed: (changes, seconds, report, load at start)."""
    from changefeed.spark.pipeline import read_changes
    from changefeed.spark.produce import write_changes

    changes = read_changes(spark, f"file://{t}/streams/src", "canal-json", {"enable-tidb-extension": "true"},
                           streaming=False, schema_store=str(t / "schemas")).persist()
    n = changes.where("kind IN ('insert', 'update', 'delete')").count()
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    rep = write_changes(changes, f"file://{t}/streams/spark?protocol={protocol}{opts}&partition-num=3")
    return n, time.monotonic() - t0, rep, load


if __name__ == "__main__":
    main()
