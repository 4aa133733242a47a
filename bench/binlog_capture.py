"""Rows/s captured from the binlog of a bulk load, beside a raw mysql-replication loop over the same binlog.

    .venv/bin/python bench/binlog_capture.py [--rows 100000] [--port PORT]

Without --port a MariaDB is started with scripts/mariadb on a free port in a temporary folder (and stopped
after). A 10-column table gets `rows` rows in transactions of 1,000 (multi-row INSERTs); then, in the same
run, over the same binlog range:

- mariadb-binlog -v: the server's own mysqlbinlog (C) printing the rows as text (how fast the binlog can be
  streamed and decoded at all),
- raw: mysql-replication's BinLogStreamReader decoding every row event (what `mysqlbinlog -v` does: the
  ceiling for anything built on this reader),
- source: our BinlogSource (transactions, commit ts, datums),
- capture: the whole `changefeed capture` loop: source, canal-json encoder, file transport, checkpoint.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pymysql

from canal_json import print_table
from changefeed.mysql import checkpoint as ckpt
from changefeed.mysql.capture import capture
from changefeed.mysql.source import BinlogSource
from changefeed.mysql.uri import parse_mysql_uri

ROOT = Path(__file__).resolve().parent.parent
TABLE = """CREATE TABLE bench.orders (
  id BIGINT PRIMARY KEY, customer INT NOT NULL, sku VARCHAR(32) NOT NULL, qty SMALLINT, price DECIMAL(10,2),
  discount DOUBLE, placed DATETIME(3), status ENUM('new','paid','shipped'), note TEXT, flags BIT(8)
)"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def server(port: int | None) -> Iterator[int]:
    if port is not None:
        yield port
        return
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="bench-mariadb-") as d:
        # the server on the cores this process is not pinned to (all of them if it is not pinned)
        ours = os.sched_getaffinity(0)
        cores = (set(range(os.cpu_count() or 1)) - ours) or ours
        r = subprocess.run([str(ROOT / "scripts" / "mariadb"), "start", str(port), d], capture_output=True, text=True,
                           preexec_fn=lambda: os.sched_setaffinity(0, cores))
        if r.returncode != 0:
            raise RuntimeError(f"MariaDB did not start: {r.stderr.strip()[-500:]}")
        try:
            yield port
        finally:
            subprocess.run([str(ROOT / "scripts" / "mariadb"), "stop", d], capture_output=True)


def load(port: int, rows: int) -> tuple[ckpt.Position, ckpt.Position]:
    conn = pymysql.connect(host="127.0.0.1", port=port, user="admin", password="admin", autocommit=True)
    with conn.cursor() as c:
        c.execute("DROP DATABASE IF EXISTS bench")
        c.execute("CREATE DATABASE bench")
        c.execute(TABLE)
        c.execute("SHOW MASTER STATUS")
        f0, p0 = c.fetchone()[:2]
        for start in range(0, rows, 1000):
            values = ",".join(
                f"({i},{i % 977},'sku-{i % 5000:05d}',{i % 9 + 1},{i % 10000}.{i % 100:02d},{(i % 7) / 10},"
                f"'2024-03-{i % 28 + 1:02d} 12:{i % 60:02d}:{i % 60:02d}.{i % 1000:03d}',{i % 3 + 1},"
                f"'note {i}',{i % 256})" for i in range(start, min(start + 1000, rows)))
            c.execute("BEGIN")
            c.execute(f"INSERT INTO bench.orders VALUES {values}")
            c.execute("COMMIT")
        c.execute("SHOW MASTER STATUS")
        f1, p1 = c.fetchone()[:2]
    conn.close()
    return ckpt.Position(f0, p0), ckpt.Position(f1, p1)


def raw(port: int, start: ckpt.Position) -> int:
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import WriteRowsEvent

    stream = BinLogStreamReader(
        connection_settings={"host": "127.0.0.1", "port": port, "user": "changefeed", "password": "changefeed"},
        server_id=9001, resume_stream=True, blocking=False, log_file=start.file, log_pos=start.pos,
        only_events=[WriteRowsEvent], enable_logging=False)
    n = 0
    for ev in stream:
        for r in ev.rows:
            n += len(r["values"]) > 0
    stream.close()
    return n


def mysqlbinlog(port: int, start: ckpt.Position, end: ckpt.Position) -> float | None:
    """Seconds `mariadb-binlog -v` (MariaDB's mysqlbinlog, in C) takes to read and print the same range."""
    import shutil

    exe = shutil.which("mariadb-binlog") or shutil.which("mysqlbinlog")
    if exe is None:
        return None
    t = time.perf_counter()
    subprocess.run([exe, "--read-from-remote-server", "--host=127.0.0.1", f"--port={port}", "--user=changefeed",
                    "--password=changefeed", f"--start-position={start.pos}", f"--stop-position={end.pos}", "-v",
                    start.file], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def source(uri: str, start: ckpt.Position, tables: list) -> int:
    src = BinlogSource(parse_mysql_uri(uri), resume=ckpt.Checkpoint(start, 0, tables))
    n = 0
    for tx in src.transactions(follow=False):
        n += len(tx.events)
    src.close()
    return n


def run(rows: int, port: int | None = None) -> list[dict]:
    out = []
    with server(port) as p:
        start, end = load(p, rows)
        size = end.pos - start.pos if end.file == start.file else 0
        uri = f"mysql://changefeed:changefeed@127.0.0.1:{p}/?tables=bench.*&server-id=9002&snapshot=false"
        probe = BinlogSource(parse_mysql_uri(uri))  # the table's definition, as a fresh start reads it
        tables = probe.tracker.tables()
        probe.close()
        t = time.perf_counter()
        n_raw = raw(p, start)
        raw_s = time.perf_counter() - t
        t = time.perf_counter()
        n_src = source(uri, start, tables)
        src_s = time.perf_counter() - t
        tool_s = mysqlbinlog(p, start, end) if end.file == start.file else None
        with tempfile.TemporaryDirectory(prefix="bench-capture-") as d:
            cp = Path(d) / "cp.json"
            ckpt.save(cp, ckpt.Checkpoint(start, 0, tables))
            cap_uri = parse_mysql_uri(uri + f"&checkpoint={cp}")
            t = time.perf_counter()
            rep = capture(cap_uri, f"file://{d}/stream/orders?protocol=canal-json&enable-tidb-extension=true",
                          follow=False)
            cap_s = time.perf_counter() - t
        if not n_raw == n_src == rows or rep.events != rows:
            raise RuntimeError(f"rows differ: loaded {rows}, raw {n_raw}, source {n_src}, capture {rep.events}")
        raw_rate = rows / raw_s
        mb = size / 1e6
        for name, secs in (("binlog source (datums)", src_s), ("binlog capture -> canal-json", cap_s)):
            out.append({"name": name, "rows_per_s": rows / secs, "mb_per_s": mb / secs if mb else 0.0,
                        "baseline_rows_per_s": raw_rate, "target": 0})
        out.append({"name": "binlog raw reader (ceiling)", "rows_per_s": raw_rate, "mb_per_s": mb / raw_s if mb
                    else 0.0, "baseline_rows_per_s": raw_rate, "target": 0})
        if tool_s:
            out.append({"name": "mariadb-binlog -v (C, text)", "rows_per_s": rows / tool_s, "mb_per_s": mb / tool_s,
                        "baseline_rows_per_s": raw_rate, "target": 0})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--port", type=int, help="an already running server (scripts/mariadb start PORT)")
    args = ap.parse_args()
    print(f"binlog capture, {args.rows} rows of a 10-column table in transactions of 1,000 (MariaDB, local), "
          f"{os.cpu_count()} cores")
    print_table(run(args.rows, args.port))
    print("baseline: mysql-replication's BinLogStreamReader decoding the same row events (the reader's ceiling)")


if __name__ == "__main__":
    main()
