"""`verify` over many tables: its seconds and Spark jobs for a lake of N plain tables (issue 37, item 5).

    .venv/bin/python bench/verify_many.py [--tables 200,1000] [--changes 5000] [--work DIR]

Each lake is many_tables.py's workload (`--changes` over N tables of one shape) in its final state, written as
plain Delta tables straight from that state (pyarrow files and a driver-side commit each: no consume, which over
1,000 tables takes many minutes and is measured by many_tables.py), then verified against the same state in one
Spark session, the lakes in the order given. Printed per lake: seconds, Spark jobs, the machine's load.
"""

from __future__ import annotations

import argparse
import decimal
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from changefeed.spark.apply import logfile  # noqa: E402
from changefeed.spark.apply.deltalog import new_file_name  # noqa: E402
from changefeed.upstream import UpstreamState, final_state  # noqa: E402
from many_tables import events  # noqa: E402

SCHEMA = ('{"type":"struct","fields":[{"name":"id","type":"long","nullable":false,"metadata":{}},'
          '{"name":"name","type":"string","nullable":true,"metadata":{}},'
          '{"name":"amount","type":"decimal(12,2)","nullable":true,"metadata":{}}]}')
ARROW = pa.schema([pa.field("id", pa.int64(), False), ("name", pa.string()), ("amount", pa.decimal128(12, 2))])


def lake(tables: int, changes: int, where: Path) -> UpstreamState:
    """The workload's final state, and a lake at `where` holding it (one file and two commits per table)."""
    st = final_state(events(changes, tables))
    for (db, name), ts in st.tables.items():
        folder = where / db / name
        (folder / "_delta_log").mkdir(parents=True)
        rows = list(ts.rows.values())
        data = pa.table({"id": [r["id"] for r in rows], "name": [r["name"] for r in rows],
                         "amount": [None if r["amount"] is None else decimal.Decimal(r["amount"]) for r in rows]},
                        schema=ARROW)
        f = new_file_name()
        pq.write_table(data, folder / f)
        log = folder / "_delta_log"
        (log / f"{0:020d}.json").write_bytes(logfile.creation(SCHEMA, {}, int(time.time() * 1000)))
        (log / f"{1:020d}.json").write_bytes(logfile.write({}, [(f, os.path.getsize(folder / f), 0)], "bench", 1,
                                                           int(time.time() * 1000), "Append"))
    return st


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", default="200,1000")
    ap.add_argument("--changes", type=int, default=5000)
    ap.add_argument("--work", type=Path, default=None)
    args = ap.parse_args()
    from changefeed.spark import spark_session
    from changefeed.spark.verify import verify

    with tempfile.TemporaryDirectory(prefix="changefeed-verify-") as tmp:
        work = args.work or Path(tmp)
        spark = spark_session("local[2]", "changefeed-bench-verify")
        spark.sparkContext.setLogLevel("ERROR")
        sc = spark.sparkContext
        print(f"verify of lakes of N plain tables ({args.changes:,} changes), Spark local[2]")
        for n in (int(x) for x in args.tables.split(",")):
            where = work / f"lake_{n}"
            expected = lake(n, args.changes, where)
            group = f"verify-{n}"
            sc.setJobGroup(group, group)
            t0 = time.perf_counter()
            rep = verify(spark, str(where), expected)
            seconds = time.perf_counter() - t0
            jobs = len(sc.statusTracker().getJobIdsForGroup(group))
            if not rep.ok:
                raise SystemExit(f"verify of {where} found differences: {[t.name for t in rep.tables if not t.ok][:5]}")
            print(f"{n:>6} tables: {seconds:6.1f} s, {jobs} Spark jobs, load average {os.getloadavg()[0]:.1f}",
                  flush=True)


if __name__ == "__main__":
    main()
