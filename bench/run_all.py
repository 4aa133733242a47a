"""Run every benchmark and print one table (rows/s, MB/s, baseline in the same run, target)."""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import binlog_capture  # noqa: E402
import canal_json  # noqa: E402
import creation  # noqa: E402
import debezium  # noqa: E402
import kafka  # noqa: E402
import many_tables  # noqa: E402
import simple  # noqa: E402
import spark_pipeline  # noqa: E402
import table_memory  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--no-kafka", action="store_true", help="leave out the benchmarks that start a Kafka broker")
    ap.add_argument("--no-mysql", action="store_true", help="leave out the binlog benchmark (starts a MariaDB)")
    ap.add_argument("--spark-changes", type=int, default=1_000_000, help="changes for the Spark pipeline benchmark")
    ap.add_argument("--many-changes", type=int, default=20_000, help="changes for the many-tables benchmark")
    ap.add_argument("--many-tables", default="4,200", help="table counts of the many-tables benchmark (0: leave out)")
    ap.add_argument("--creation-tables", type=int, default=1000,
                    help="tables of the first micro-batch that creates them, beside 4 (0: leave out)")
    ap.add_argument("--memory-tables", default="1000,10000",
                    help="table counts of the driver's memory per table (0: leave out)")
    ap.add_argument("--fresh-transactions", type=int, default=6000,
                    help="transactions of the freshness benchmark (`changefeed run --rate`; 0: leave out)")
    ap.add_argument("--fresh-rate", type=int, default=250, help="events/s the freshness benchmark's source sends")
    ap.add_argument("--no-s3", action="store_true",
                    help="leave out the S3 lake beside the local one in the many-tables and freshness benchmarks")
    ap.add_argument("--soak-minutes", type=float, default=10.0,
                    help="minutes of the soak benchmark (`changefeed run --rate 250`; 0: leave out)")
    args = ap.parse_args()
    print(f"{time.strftime('%Y-%m-%d')}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, one core used, {args.rows} rows")
    results = canal_json.run(args.rows) + simple.run(args.rows) + debezium.run(max(args.rows // 5, 1000))
    if not args.no_mysql:
        try:
            results += binlog_capture.run(args.rows)
        except RuntimeError as e:
            print(f"binlog benchmark left out: {e}")
    if not args.no_kafka:
        try:
            results += kafka.run(args.rows)
        except RuntimeError as e:
            print(f"kafka benchmark left out: {e}")
        # Spark's local[2] uses both cores: the one-core pinning of the codec benchmarks is lifted for it
        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
        results += spark_pipeline.run(args.spark_changes, 4)
    canal_json.print_table(results)
    if spark_pipeline.PHASES:
        print("Kafka->Delta, ours, seconds per step over its micro-batches: "
              + ", ".join(f"{k} {v:.1f}" for k, v in spark_pipeline.PHASES.items()))
    counts = [int(x) for x in args.many_tables.split(",") if int(x) > 0]
    if not args.no_kafka and counts:
        print(f"the same {args.many_changes:,} changes over {counts} tables (cost follows changes, not tables):")
        many_tables.print_table(args.many_changes, many_tables.run(args.many_changes, counts, 4,
                                                                         s3=not args.no_s3))
    if not args.no_kafka and args.creation_tables > 0:
        print(f"a database's first micro-batch: {args.creation_tables:,} new tables beside 4, the same changes:")
        creation.print_table(creation.run(args.creation_tables, 4000))
    memory = [int(x) for x in args.memory_tables.split(",") if int(x) > 0]
    if not args.no_kafka and memory:
        print(f"the driver's memory per table ({memory} tables, each in a process of its own):")
        table_memory.print_table(table_memory.run(memory))
    if args.fresh_transactions > 0:
        # in a process of its own, as a user runs `changefeed run`: in this one, after the Spark benchmarks above,
        # the same run measured a median lag of 20.5 s against 5.5 s alone (one JVM's heap and caches
        # carried over from a million changes and two hundred tables)
        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
        subprocess.run([sys.executable, str(Path(__file__).parent / "freshness.py"), "--transactions",
                        str(args.fresh_transactions), "--rate", str(args.fresh_rate),
                        *([] if args.no_s3 else ["--s3"])], check=True)
    if args.soak_minutes > 0:  # a long run: lag, memory, files and log entries per table, first tenth vs last
        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
        subprocess.run([sys.executable, str(Path(__file__).parent / "soak.py"), "--minutes", str(args.soak_minutes),
                        "--rate", "250"], check=True)
    print("baselines: encode = stdlib json / fastavro's own union resolution, building each message from scratch;")
    print("           decode = stdlib json.loads / fastavro schemaless_reader, without typed conversion;")
    print("           debezium = per-row values and schema with stdlib json (its decode rows have the same baseline)")
    print("           binlog = mysql-replication's raw BinLogStreamReader over the same binlog (the reader's ceiling)")
    print("           kafka = a bare confluent-kafka producer sending the same values pre-encoded (the ceiling)")
    print("           Kafka->Delta = a pickled Python UDF with json.loads and a plain MERGE per micro-batch, "
          "same topic and batches;")
    print("           and from_json with the table's columns, the last change per key by a window, one MERGE per "
          "micro-batch, all on the JVM")


if __name__ == "__main__":
    main()
