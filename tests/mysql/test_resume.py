"""Resuming: the position is kept only once the transport acknowledged what came before it, so a capture
killed at any moment and started again loses nothing (it may send some changes twice: at-least-once)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from changefeed.model import Kind
from changefeed.mysql import checkpoint as ckpt
from changefeed.mysql.source import BinlogSource
from changefeed.mysql.uri import parse_mysql_uri
from changefeed.spark.verify import events_from_stream
from changefeed.upstream import final_state


def test_restart_from_a_checkpoint_reads_with_the_definitions_of_that_position(mariadb, tmp_path: Path) -> None:
    db = mariadb.fresh_db("resume_schema_db")
    mariadb.run("CREATE TABLE t (id INT PRIMARY KEY, a INT, b VARCHAR(5))", db=db)
    uri = parse_mysql_uri(mariadb.uri(f"{db}.*", snapshot="false"))
    src = BinlogSource(uri)
    mariadb.run(*[f"INSERT INTO t VALUES ({i}, {i * 10}, 'r{i}')" for i in range(1, 7)],
                "ALTER TABLE t DROP COLUMN a", "INSERT INTO t VALUES (7, 'r7')", db=db)
    path = tmp_path / "cp.json"
    row_txs = []
    for tx in src.transactions(follow=False):
        if tx.events and tx.events[0].kind is Kind.INSERT:
            row_txs.append(tx)
            if len(row_txs) == 3:  # acknowledged up to the third insert; what follows died with the capture
                ckpt.save(path, src.checkpoint(tx))
    src.close()
    assert [tx.events[0].after["id"] for tx in row_txs] == [1, 2, 3, 4, 5, 6, 7]
    resumed = BinlogSource(uri, resume=ckpt.load(path))
    again = [tx for tx in resumed.transactions(follow=False) if tx.events]
    resumed.close()
    got = [(e.kind, e.after["id"] if e.after else None) for tx in again for e in tx.events]
    assert got == [(Kind.INSERT, 4), (Kind.INSERT, 5), (Kind.INSERT, 6), (Kind.DDL, None), (Kind.INSERT, 7)]
    # the rows before the DROP COLUMN are read with the definition of their moment, though the table has changed
    assert again[0].events[0].after == {"id": 4, "a": 40, "b": "r4"}
    assert again[-1].events[0].after == {"id": 7, "b": "r7"}
    # the same transactions get the same commit ts again (a consumer sees a redelivery, not new changes)
    first = {tx.events[0].after["id"]: tx.commit_ts for tx in row_txs}
    assert [tx.commit_ts for tx in again if tx.events[0].kind is Kind.INSERT] == [first[4], first[5], first[6],
                                                                                first[7]]


def _capture(uri: str, sink: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "changefeed.cli", "capture", "--source", uri, "--sink-uri", sink,
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_a_capture_killed_mid_stream_and_restarted_loses_nothing(mariadb, tmp_path: Path) -> None:
    db = mariadb.fresh_db("resume_kill_db")
    mariadb.run("CREATE TABLE t (id INT PRIMARY KEY, v INT, note VARCHAR(20))", "INSERT INTO t VALUES (0, 0, 'before')",
                db=db)
    cp = tmp_path / "capture.checkpoint.json"
    uri = mariadb.uri(f"{db}.*", checkpoint=cp, flush_interval_ms=20)
    sink = f"file://{tmp_path / 'stream'}/changes?protocol=canal-json&enable-tidb-extension=true&partition-num=2"
    n = 600
    proc = _capture(uri, sink, "--follow")
    try:
        deadline = time.time() + 60
        while not cp.exists():  # the snapshot is out and acknowledged
            assert proc.poll() is None, proc.communicate()[1].decode()
            assert time.time() < deadline, "no checkpoint within 60 s"
            time.sleep(0.05)
        written = threading.Event()

        def writer() -> None:
            conn = mariadb.admin(db)
            with conn.cursor() as cur:
                for i in range(1, n + 1):
                    cur.execute(f"INSERT INTO t VALUES ({i}, {i}, 'new')")
                    if i % 3 == 0:
                        cur.execute(f"UPDATE t SET v = v + 1000 WHERE id = {i - 1}")
                    if i % 200 == 0:  # the server moves on to a new binlog file
                        cur.execute("FLUSH BINARY LOGS")
                    if i % 50 == 0:  # a transaction of several changes
                        cur.execute("BEGIN")
                        cur.execute(f"DELETE FROM t WHERE id = {i - 2}")
                        cur.execute(f"INSERT INTO t VALUES ({-i}, 1, 'tx')")
                        cur.execute("COMMIT")
            conn.close()
            written.set()

        w = threading.Thread(target=writer)
        w.start()
        first = ckpt.load(cp)
        while True:  # kill it once the checkpoint has moved on at least once while changes are coming in
            cur = ckpt.load(cp)
            if cur is not None and first is not None and cur.position.key() > first.position.key():
                break
            assert not written.is_set() or proc.poll() is None
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        killed_at = ckpt.load(cp)
        w.join()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert killed_at is not None
    conn = mariadb.admin()
    with conn.cursor() as c:
        c.execute("SHOW MASTER STATUS")
        file, pos = c.fetchone()[:2]
    conn.close()
    assert killed_at.position.key() < ckpt.Position(file, pos).key(), "killed before the changes were all read"
    again = _capture(uri, sink, "--no-follow")
    out, errs = again.communicate(timeout=300)
    assert again.returncode == 0, errs.decode()
    assert "resuming from" in errs.decode()
    events = events_from_stream(sink.split("?")[0], "canal-json", {"enable-tidb-extension": "true"})
    inserted = {e.after["id"] for e in events if e.kind is Kind.INSERT}
    want = set(range(0, n + 1)) | {-i for i in range(50, n + 1, 50)}
    assert inserted >= want, f"lost inserts: {sorted(want - inserted)[:10]}"
    # the stream's final state is the table's
    state = final_state(events)
    conn = mariadb.admin(db)
    with conn.cursor() as c:
        c.execute("SELECT id, v, note FROM t ORDER BY id")
        live = [tuple(r) for r in c.fetchall()]
    conn.close()
    st = state.tables[(db, "t")]
    assert sorted((r["id"], r["v"], r["note"]) for r in st.rows.values()) == live


def test_an_xa_transaction_prepared_before_the_checkpoint_commits_after_a_restart(mariadb, tmp_path: Path) -> None:
    """The checkpoint keeps the rows of the XA transactions prepared before its position and not yet ended
    there: their XA COMMIT, read after a restart, brings them out (its rows lie before the position)."""
    db = mariadb.fresh_db("resume_xa_db")
    mariadb.run("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(5))", db=db)
    uri = parse_mysql_uri(mariadb.uri(f"{db}.*", snapshot="false"))
    src = BinlogSource(uri)
    mariadb.run("XA START 'p1'", "INSERT INTO t VALUES (1, 'xa')", "XA END 'p1'", "XA PREPARE 'p1'", db=db)
    mariadb.run("INSERT INTO t VALUES (2, 'b')", db=db)
    path = tmp_path / "cp.json"
    for tx in src.transactions(follow=False):
        if tx.events:
            ckpt.save(path, src.checkpoint(tx))  # acknowledged up to the row 2: p1 prepared, not committed
    src.close()
    mariadb.run("XA COMMIT 'p1'", db=db)
    resumed = BinlogSource(uri, resume=ckpt.load(path))
    again = [tx for tx in resumed.transactions(follow=False) if tx.events]
    resumed.close()
    assert [[(e.kind, e.after) for e in tx.events] for tx in again] == [[(Kind.INSERT, {"id": 1, "v": "xa"})]]
