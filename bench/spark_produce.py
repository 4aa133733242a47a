"""Spark as the producer: `write_changes` (spark/produce.py) beside `changefeed produce` in the same run.

    .venv/bin/python bench/spark_produce.py [--changes 1000000] [--master local[2]] [--protocol canal-json]

Both send the same changes (bench/spark_pipeline.py's five-column table: inserts and updates, four changes a
transaction) in the same protocol to the file transport (3 partitions, TiCDC's default dispatcher), each to a topic
of its own in a temporary folder. `changefeed produce` is the CLI in a process of its own reading event lines (its
whole run, start-up included). `write_changes` reads the same changes as `read_changes` gives them, decoded and
cached before the clock starts (the decode is the consumer's cost, measured by bench/spark_pipeline.py), and is
timed from the call to the last acknowledged message: the survey of definitions and tables, the routing stage,
the shuffle by target partition and the sending tasks. Rows/s is changes sent per wall-clock second.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from changefeed.eventline import EventWriter  # noqa: E402
from spark_pipeline import events  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--changes", type=int, default=1_000_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--protocol", default="canal-json")
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

        t0 = time.monotonic()
        subprocess.run([*cli, "produce", "--sink-uri",
                        f"file://{t}/streams/cli?protocol={args.protocol}{opts}&partition-num=3", "-i", str(lines)],
                       check=True, cwd=root, capture_output=True)
        cli_s = time.monotonic() - t0

        from changefeed.spark import spark_session
        from changefeed.spark.pipeline import read_changes
        from changefeed.spark.produce import write_changes

        spark = spark_session(args.master, "bench-produce")
        changes = read_changes(spark, f"file://{t}/streams/src", "canal-json", {"enable-tidb-extension": "true"},
                               streaming=False, schema_store=str(t / "schemas")).persist()
        n = changes.where("kind IN ('insert', 'update', 'delete')").count()
        t0 = time.monotonic()
        rep = write_changes(changes, f"file://{t}/streams/spark?protocol={args.protocol}{opts}&partition-num=3")
        spark_s = time.monotonic() - t0
        spark.stop()
    print(f"{'producer':<34}{'changes':>10}{'seconds':>10}{'rows/s':>10}")
    print(f"{'changefeed produce (one process)':<34}{args.changes:>10,}{cli_s:>10.1f}{args.changes / cli_s:>10,.0f}")
    print(f"{'write_changes (' + args.master + ')':<34}{n:>10,}{spark_s:>10.1f}{n / spark_s:>10,.0f}")
    print(f"write_changes sent {rep.messages:,} messages to {rep.targets} partitions; "
          f"ratio {(n / spark_s) / (args.changes / cli_s):.2f}x")


if __name__ == "__main__":
    main()
