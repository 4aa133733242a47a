"""The lake on an S3 API (S3Proxy started by scripts/s3, real S3A, real Delta, real delta-rs): the consumer killed
mid-stream twice and restarted lands every table equal to upstream; delta-rs reads the tables Spark wrote;
a store that cannot be reached is one line naming it."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote

import orjson
import pytest

from changefeed.errors import StorageError
from changefeed.spark.apply import logfile
from changefeed.spark.objectstore import check_store
from changefeed.spark.verify import verify
from changefeed.upstream import final_state
from changefeed.workload import generate

from ..conftest import ROOT, produce_events

CLI = [sys.executable, "-m", "changefeed.cli"]


def _commits(s3_store, lake_key: str) -> int:
    """Delta commits and progress records in the lake (tables, changelog, dead letters), read over the S3 API:
    it grows with every commit the consumer makes inside a micro-batch, not only at its end."""
    import re

    from pyarrow import fs

    s3 = fs.S3FileSystem(access_key=s3_store.ACCESS, secret_key=s3_store.SECRET, region="us-east-1",
                         endpoint_override=s3_store.endpoint.split("://", 1)[1], scheme="http")
    infos = s3.get_file_info(fs.FileSelector(f"{s3_store.BUCKET}/{lake_key}", recursive=True, allow_not_found=True))
    return sum(1 for i in infos if re.fullmatch(r"\d{20}\.json|batch-\d+\.json", i.base_name))


def _engines(s3_store, lake_key: str) -> dict[str, set[str]]:
    """The engines that made the commits of the lake's tables and of the consumer's changelog (`commitInfo`'s
    engineInfo), per "tables" and "changelog", read over the S3 API."""
    from pyarrow import fs

    s3 = fs.S3FileSystem(access_key=s3_store.ACCESS, secret_key=s3_store.SECRET, region="us-east-1",
                         endpoint_override=s3_store.endpoint.split("://", 1)[1], scheme="http")
    root = f"{s3_store.BUCKET}/{lake_key}"
    out: dict[str, set[str]] = {"tables": set(), "changelog": set()}
    for info in s3.get_file_info(fs.FileSelector(root, recursive=True)):
        rel = info.path[len(root) + 1:]
        if "/_delta_log/" not in rel or not info.base_name.endswith(".json"):
            continue
        kind = "changelog" if rel.startswith("_changefeed/changelog/") else "tables"
        if rel.startswith("_changefeed/") and kind == "tables":
            continue
        with s3.open_input_stream(info.path) as f:
            for line in f.read().splitlines():
                info_ = orjson.loads(line).get("commitInfo")
                if info_ is not None:
                    out[kind].add(str(info_.get("engineInfo", "")).split(" ")[0])
    return out


def _adds(s3_store, lake_key: str) -> list[tuple[str, dict, int]]:
    """Every add action in the Delta logs of the lake's tables (not the consumer's own logs under _changefeed),
    read over the S3 API, with the row count of the file it adds, read from the file's footer."""
    import pyarrow.parquet as pq
    from pyarrow import fs

    s3 = fs.S3FileSystem(access_key=s3_store.ACCESS, secret_key=s3_store.SECRET, region="us-east-1",
                         endpoint_override=s3_store.endpoint.split("://", 1)[1], scheme="http")
    root = f"{s3_store.BUCKET}/{lake_key}"
    out = []
    for info in s3.get_file_info(fs.FileSelector(root, recursive=True)):
        rel = info.path[len(root) + 1:]
        if rel.startswith("_changefeed/") or "/_delta_log/" not in rel or not info.base_name.endswith(".json"):
            continue
        table = info.path.split("/_delta_log/")[0]
        with s3.open_input_stream(info.path) as f:
            for line in f.read().splitlines():
                add = orjson.loads(line).get("add")
                if add is not None:
                    rows = pq.read_metadata(f"{table}/{unquote(add['path'])}", filesystem=s3).num_rows
                    out.append((info.path, add, rows))
    return out


def test_consumer_killed_twice_on_s3_lands_every_table_and_delta_rs_reads_it(spark, s3_store,
                                                                             tmp_path: Path) -> None:
    from deltalake import DeltaTable

    for k, v in s3_store.conf().items():  # the test's own session reads the lake too (to compare with delta-rs)
        spark._jsc.hadoopConfiguration().set(k.removeprefix("spark.hadoop."), v)

    events = list(generate(seed=31, transactions=80))
    folder = tmp_path / "stream"
    uri = f"file://{folder}/t?protocol=canal-json&enable-tidb-extension=true&partition-num=2"
    produce_events(events, uri, tmp_path)
    key = f"kill-{time.time_ns()}"
    lake = s3_store.url(key) + "/"  # a trailing / is the same lake
    consume = [*CLI, "consume", "--from", f"file://{folder}/t?protocol=canal-json&enable-tidb-extension=true",
               "--lake", lake, "--max-records-per-trigger", "60", "--table-features", "minimal",  # delta-rs reads it
               *s3_store.conf_args()]
    # each time once the lake has moved on: inside a micro-batch, between its commits. Two kills at two points (at
    # the first commit; later, a second consumer refused meanwhile) check that a restart resumes what a kill cut
    # short, and again after a restart, exactly once; a third (the test killed three times until 2026-11-28) cost
    # a JVM launch and a first micro-batch more, and checked the same thing at another instant
    for kill in range(2):
        before = _commits(s3_store, key)
        proc = subprocess.Popen([*consume, "--trigger", "processing-time=1 second"], cwd=ROOT, env=s3_store.env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        try:
            while _commits(s3_store, key) <= before:
                assert proc.poll() is None, proc.stdout.read().decode()[-3000:]  # type: ignore[union-attr]
                assert time.monotonic() < deadline, f"kill {kill + 1}: no new commit on S3 within 300 s"
                time.sleep(0.2)
            time.sleep(0.5 * kill)  # at a different point each time
            if kill == 1:  # a second consumer pointed at the same lake (its own checkpoint) while this one runs
                second = subprocess.run([*consume, "--checkpoint", str(tmp_path / "cp2")], cwd=ROOT,
                                        env=s3_store.env, capture_output=True, text=True, timeout=300)
                assert second.returncode == 1, second.stderr[-3000:]
                errors = [ln for ln in second.stderr.splitlines() if ln.startswith("error:")]
                assert len(errors) == 1 and "Traceback" not in second.stderr, second.stderr[-3000:]
                assert f"the lake {lake.rstrip('/')} is in use by another consumer (pid {proc.pid} " in errors[0], \
                    errors[0]
                assert proc.poll() is None, "the first consumer stopped when the second was refused"
                # refused before its query started (`claim_lake`): the query writes its checkpoint's metadata first
                assert not (tmp_path / "cp2" / "metadata").exists()
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    done = subprocess.run(consume, cwd=ROOT, env=s3_store.env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    # verified in this process (its session has the store's settings): a CLI verify would start a JVM for it
    state = final_state(events)
    rep = verify(spark, s3_store.url(key), state)
    assert rep.ok, [(t.name, t.expected, t.actual, t.missing, t.extra, t.problem) for t in rep.tables if not t.ok]

    # every file added to a table carries Delta's statistics, its row count that of the file (the commits the
    # driver makes for files a shared job wrote, as well as Delta's own MERGE)
    adds = _adds(s3_store, key)
    assert adds, "no file was added to any table"
    for where, add, rows in adds:
        assert "stats" in add and orjson.loads(add["stats"])["numRecords"] == rows, (where, add.get("stats"), rows)

    # small tables' rewrites and the changelog's appends were committed by the driver's conditional PUT of the log's
    # next file (logstore), beside Delta's own commits (tables created by Delta, MERGE of others)
    engines = _engines(s3_store, key)
    assert logfile.ENGINE in engines["tables"] and logfile.ENGINE in engines["changelog"], engines

    # delta-rs, with storage_options only, reads what Spark's S3A wrote: the same rows as upstream's final state
    assert state.tables, "the workload made no tables"
    for (db, table), t in state.tables.items():
        dt = DeltaTable(f"s3://{s3_store.BUCKET}/{key}/{db}/{table}", storage_options=s3_store.storage_options)
        got = dt.to_pyarrow_table()
        assert got.num_rows == len(t.rows), f"{db}.{table}: delta-rs read {got.num_rows} rows, upstream {len(t.rows)}"
        pk = (t.table.handle_key or [])[:1]
        if pk:
            assert sorted(str(v) for v in got.column(pk[0]).to_pylist()) == sorted(
                str(r[pk[0]]) for r in t.rows.values()), f"{db}.{table}: keys differ"
        spark_rows = spark.read.format("delta").load(s3_store.url(f"{key}/{db}/{table}")).count()
        assert spark_rows == got.num_rows, f"{db}.{table}: Spark read {spark_rows} rows, delta-rs {got.num_rows}"


def test_a_store_that_cannot_be_reached_is_one_line_naming_it(spark, s3_store, tmp_path: Path) -> None:
    """Bad credentials (the CLI, a real JVM of its own) and a wrong endpoint (the session's S3A, one attempt):
    each one line that names the store, no traceback."""
    (tmp_path / "x").write_text("")
    bad = subprocess.run([*CLI, "verify", "--lake", s3_store.url("nothing-here"), "--against", str(tmp_path / "x"),
                          *s3_store.conf_args(**{"spark.hadoop.fs.s3a.secret.key": "wrong"})],
                         cwd=ROOT, env=s3_store.env, capture_output=True, text=True)
    assert bad.returncode == 1
    errors = [line for line in bad.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in bad.stderr, bad.stderr[-2000:]
    assert "s3a://lake" in errors[0], errors[0]

    # a wrong endpoint (S3A's own retries would take minutes) and one that accepts but never answers: each at once
    # or within the connect timeout, one line
    conf = spark._jsc.hadoopConfiguration()
    from tests.conftest import _free_port

    port = _free_port()
    for k, v in {"endpoint": f"http://127.0.0.1:{port}", "path.style.access": "true", "access.key": "k",
                 "secret.key": "s", "endpoint.region": "us-east-1", "connection.ssl.enabled": "false"}.items():
        conf.set(f"fs.s3a.bucket.nowhere.{k}", v)
    started = time.monotonic()
    with pytest.raises(StorageError) as e:
        check_store(spark, "s3a://nowhere/lake", timeout=20)
    assert str(e.value).startswith(f"cannot reach s3a://nowhere at 127.0.0.1:{port} (--lake s3a://nowhere/lake): "
                                   "ConnectionRefusedError"), str(e.value)
    assert "\n" not in str(e.value) and time.monotonic() - started < 10

    silent = socket.create_server(("127.0.0.1", 0), backlog=64)  # accepts (the kernel's backlog), answers nothing
    try:
        conf.set("fs.s3a.bucket.silent.endpoint", f"http://127.0.0.1:{silent.getsockname()[1]}")
        for k in ("path.style.access", "access.key", "secret.key", "endpoint.region", "connection.ssl.enabled"):
            conf.set(f"fs.s3a.bucket.silent.{k}", conf.get(f"fs.s3a.bucket.nowhere.{k}"))
        started = time.monotonic()
        with pytest.raises(StorageError) as e:
            check_store(spark, "s3a://silent/lake", timeout=3)
        assert str(e.value) == ("cannot reach s3a://silent (--lake s3a://silent/lake): no answer within 3 s "
                                "(--connect-timeout sets the wait)")
        assert time.monotonic() - started < 15
    finally:
        silent.close()


def test_a_file_uri_lake_is_the_same_lake_as_its_path(spark, tmp_path: Path) -> None:
    """`--lake file:///abs` as a user copies it: was DELTA_AMBIGUOUS_PATHS_IN_CREATE_TABLE on the first batch."""
    from changefeed.spark.pipeline import apply_changes, read_changes
    from changefeed.spark.verify import verify

    events = list(generate(seed=5, transactions=20))
    uri = f"file://{tmp_path}/s/t?protocol=canal-json&enable-tidb-extension=true&partition-num=1"
    produce_events(events, uri, tmp_path)
    lake = f"file://{tmp_path}/lake/"
    changes = read_changes(spark, f"file://{tmp_path}/s/t", "canal-json", {"enable-tidb-extension": "true"},
                           schema_store=str(tmp_path / "lake/_schemas"))
    apply_changes(changes, lake, checkpoint=f"file://{tmp_path}/cp").awaitTermination()
    rep = verify(spark, str(tmp_path / "lake"), final_state(events))
    assert rep.ok, [(t.name, t.expected, t.actual, t.problem) for t in rep.tables if not t.ok]


def test_an_owner_claim_on_s3_is_created_once_by_the_store(spark, s3_store) -> None:
    """The conditional PUT the lake's owner claims are made with (`put_if_absent`, S3A's own client): the store
    creates the key for the first writer and answers the second with 412, keeping the first one's bytes."""
    from pyarrow import fs

    from changefeed.spark.objectstore import put_if_absent

    for k, v in s3_store.conf().items():
        spark._jsc.hadoopConfiguration().set(k.removeprefix("spark.hadoop."), v)
    key = f"claims-{time.time_ns()}/00000000000000000000.json"
    assert put_if_absent(spark, s3_store.url(key), b'{"token": "first"}') is True
    assert put_if_absent(spark, s3_store.url(key), b'{"token": "second"}') is False
    s3 = fs.S3FileSystem(access_key=s3_store.ACCESS, secret_key=s3_store.SECRET, region="us-east-1",
                         endpoint_override=s3_store.endpoint.split("://", 1)[1], scheme="http")
    with s3.open_input_stream(f"{s3_store.BUCKET}/{key}") as f:
        assert f.read() == b'{"token": "first"}'


def test_a_store_without_conditional_writes_still_creates_a_claim_once(spark, s3_store, tmp_path: Path) -> None:
    """S3Proxy's jclouds `transient` backend refuses `If-None-Match` (HTTP 501): the claim is then made with Hadoop's
    create-unless-there (look, then write), which still refuses a key that is there."""
    import os
    import socket

    from pyarrow import fs

    from changefeed.spark.objectstore import put_if_absent
    from tests.conftest import _free_port

    port = _free_port()
    log = open(tmp_path / "server.log", "ab")  # noqa: SIM115 - the server's whole life
    proc = subprocess.Popen([str(ROOT / "scripts" / "s3"), "run", str(port), str(tmp_path / "s3")], stdout=log,
                            stderr=log, env=dict(os.environ, S3_PROVIDER="transient"))
    try:
        s3 = fs.S3FileSystem(access_key=s3_store.ACCESS, secret_key=s3_store.SECRET, region="us-east-1",
                             endpoint_override=f"127.0.0.1:{port}", scheme="http", allow_bucket_creation=True)
        deadline = time.monotonic() + 120
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    pass
                s3.create_dir("legacy")
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()
                time.sleep(0.3)
        conf = spark._jsc.hadoopConfiguration()
        for k, v in s3_store.conf(**{"spark.hadoop.fs.s3a.endpoint": f"http://127.0.0.1:{port}"}).items():
            conf.set(k.removeprefix("spark.hadoop.").replace("fs.s3a.", "fs.s3a.bucket.legacy.", 1), v)
        assert put_if_absent(spark, "s3a://legacy/claims/0.json", b'{"token": "first"}') is True
        assert put_if_absent(spark, "s3a://legacy/claims/0.json", b'{"token": "second"}') is False
        with s3.open_input_stream("legacy/claims/0.json") as f:
            assert f.read() == b'{"token": "first"}'
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
