"""Delta commits on S3 written as the log's next file by a conditional PUT (`logstore`, `s3http`, through
`RustLog`), against a real S3 API server (S3Proxy), read back by delta-rs, an independent reader of the log (no
Spark here: the consumer on S3 is tests/spark/test_object_storage.py)."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from changefeed.errors import ApplyError
from changefeed.s3http import S3Http, S3Target
from changefeed.spark.apply import driverfiles, logfile
from changefeed.spark.apply.log_rs import RustLog
from changefeed.spark.apply.logstore import S3Files

SCHEMA = ('{"type":"struct","fields":[{"name":"id","type":"long","nullable":false,"metadata":{}},'
          '{"name":"name","type":"string","nullable":true,"metadata":{}}]}')
ROWS = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])


@pytest.fixture
def store(s3_store):
    """The store's options (as `objectstore.storage_options` derives them), a RustLog on it, a fresh table path."""
    options = {k: v for k, v in s3_store.storage_options.items() if k != "AWS_S3_ALLOW_UNSAFE_RENAME"}
    files = S3Files(options)
    path = s3_store.url(f"log-{time.time_ns()}/db/t")
    return options, files, RustLog(lambda p: files), path


def _uri(path: str) -> str:
    return path.replace("s3a://", "s3://", 1)


def _put(files: S3Files, path: str, rows: list[tuple[int, str]], stats: dict[str, str]) -> tuple[str, int, int]:
    table = pa.table({"id": [r[0] for r in rows], "name": [r[1] for r in rows]}, schema=ROWS)
    added, st = driverfiles.put(table, lambda: f"part-00000-{time.time_ns()}-c000.snappy.parquet",
                                lambda n, d: files.put(f"{path}/{n}", d), SCHEMA, {})
    stats.update(st)
    return added[0]


def _rows(path: str, options: dict[str, str]) -> list[tuple[int, str]]:
    t = DeltaTable(_uri(path), storage_options=options).to_pyarrow_table()
    return sorted((r["id"], r["name"]) for r in t.to_pylist())


def test_commits_on_s3_are_conditional_puts_delta_rs_reads_and_a_second_writer_loses(store, s3_store) -> None:
    options, files, log, path = store
    assert log.create(path, SCHEMA, {"changefeed.app.ddlVersion": "5", "delta.checkpointInterval": "3"})
    assert not log.create(path, SCHEMA, {})  # a table is there: not made again
    stats: dict[str, str] = {}
    first = _put(files, path, [(1, "a"), (2, "b")], stats)
    assert log.commit(path, log.read(path, None), [first], 7, "app", stats) == 1
    before = log.read(path, None)
    assert before.version == 1 and set(before.files) == {first[0]}
    second = _put(files, path, [(2, "B"), (3, "c")], stats)
    assert log.commit(path, before, [second], 9, "app", stats) == 2
    third = _put(files, path, [(4, "d")], stats)
    assert log.append(path, log.read(path, None), [third], 11, "app", stats) == 3  # a checkpoint by 3
    assert _rows(path, options) == [(2, "B"), (3, "c"), (4, "d")]
    dt = DeltaTable(_uri(path), storage_options=options)
    assert dt.transaction_version("app") == 11 and dt.version() == 3
    assert dt.metadata().configuration["changefeed.app.ddlVersion"] == "5"
    history = dt.history()
    assert [h["operation"] for h in history] == ["WRITE", "WRITE", "WRITE", "CREATE TABLE"]
    assert all(h.get("engineInfo") == logfile.ENGINE for h in history)
    # the statistics of the files the driver wrote, from their footers, as a reader finds them in the log
    adds = {a["path"]: a for a in pa.table(dt.get_add_actions(flatten=True)).to_pylist()}
    assert adds[third[0]]["num_records"] == 1 and adds[third[0]]["min.id"] == 4
    assert adds[second[0]]["min.id"] == 2 and adds[second[0]]["max.id"] == 3
    log.settle()  # (made in the background; a table's first one up to an interval early: checkpoints.py)
    assert [files.exists(f"{path}/_delta_log/{v:020d}.checkpoint.parquet") for v in (1, 2, 3)].count(True) == 1

    # another writer (delta-rs, its own conditional put) takes version 4 between this one's read and commit
    before = log.read(path, None)
    write_deltalake(_uri(path), pa.table({"id": [9], "name": ["theirs"]}, schema=ROWS), mode="append",
                    storage_options=options)
    mine = _put(files, path, [(1, "mine")], stats)
    with pytest.raises(ApplyError, match="another writer's commit 4 changed the table"):
        log.commit(path, before, [mine], 13, "app", stats)
    assert _rows(path, options) == [(2, "B"), (3, "c"), (4, "d"), (9, "theirs")]
    assert DeltaTable(_uri(path), storage_options=options).transaction_version("app") == 11


def test_the_store_creates_a_version_once_of_writers_racing_for_it(store, s3_store) -> None:
    """Eight threads PUT the same log version at once: exactly one is created, and it is whole."""
    _, files, _, path = store
    target = f"{path}/_delta_log/{1:020d}.json"
    won: list[int] = []
    go = threading.Barrier(8)

    def one(i: int) -> None:
        go.wait()
        if files.put_if_absent(target, b'{"commitInfo":{"writer":%d}}\n' % i):
            won.append(i)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1, won
    assert files.read(target) == b'{"commitInfo":{"writer":%d}}\n' % won[0]
    assert files.read(f"{path}/_delta_log/{2:020d}.json") is None and not files.exists(f"{path}/none")


def test_requests_with_wrong_keys_fail_naming_the_store(s3_store) -> None:
    http = S3Http(S3Target(s3_store.endpoint, "us-east-1", s3_store.ACCESS, "wrong"))
    with pytest.raises(OSError, match=f"{s3_store.endpoint}: PUT lake/x: HTTP 403"):
        http.put_if_absent("lake", "x", b"x")
    assert S3Target.of({"AWS_ENDPOINT_URL": s3_store.endpoint}) is None  # no keys: not signed here
    # a file the driver wrote reads back through pyarrow's own S3 client as the same Parquet
    files = S3Files({**s3_store.storage_options})
    key = f"parquet-{time.time_ns()}"
    added, _ = driverfiles.put(pa.table({"id": [5]}), lambda: "f.parquet",
                               lambda n, d: files.put(f"s3a://lake/{key}/{n}", d), SCHEMA, {})
    from pyarrow import fs

    s3 = fs.S3FileSystem(access_key=s3_store.ACCESS, secret_key=s3_store.SECRET, region="us-east-1",
                         endpoint_override=s3_store.endpoint.split("://", 1)[1], scheme="http")
    assert pq.read_table(f"lake/{key}/f.parquet", filesystem=s3).to_pylist() == [{"id": 5}]
    assert added[0][1] == s3.get_file_info(f"lake/{key}/f.parquet").size
