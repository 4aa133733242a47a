"""Delta commits written as the log's files (`logfile`, through `RustLog`), read back by delta-rs, an independent
reader of the log (no Spark here; the Spark-side reads are in test_multiwrite and test_pipeline)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from changefeed.errors import ApplyError
from changefeed.spark.apply import logfile
from changefeed.spark.apply.log_rs import RustLog

SCHEMA = ('{"type":"struct","fields":[{"name":"id","type":"long","nullable":false,"metadata":{}},'
          '{"name":"name","type":"string","nullable":true,"metadata":{}}]}')
ROWS = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])


def _file(table: Path, name: str, rows: list[tuple[int, str]]) -> tuple[str, int, int]:
    pq.write_table(pa.table({"id": [r[0] for r in rows], "name": [r[1] for r in rows]}, schema=ROWS),
                   table / name)
    st = os.stat(table / name)
    return name, st.st_size, int(st.st_mtime * 1000)


def _rows(path: Path) -> list[tuple[int, str]]:
    return sorted((r["id"], r["name"]) for r in DeltaTable(str(path)).to_pyarrow_table().to_pylist())


def test_a_created_table_rewritten_and_appended_reads_back_in_delta_rs(tmp_path: Path) -> None:
    log, path = RustLog(), tmp_path / "t"
    assert log.create(str(path), SCHEMA, {"changefeed.app.ddlVersion": "5"})
    assert not log.create(str(path), SCHEMA, {})  # a table is there: not made again
    dt = DeltaTable(str(path))
    assert dt.version() == 0 and dt.metadata().configuration == {"changefeed.app.ddlVersion": "5"}
    assert [f.name for f in dt.schema().fields] == ["id", "name"]
    p = dt.protocol()
    assert (p.min_reader_version, p.min_writer_version) == (1, 2)

    first = _file(path, "part-00000-a-c000.snappy.parquet", [(1, "a"), (2, "b")])
    assert log.commit(str(path), log.read(str(path), None), [first], 7, "app") == 1
    before = log.read(str(path), None)
    assert before.version == 1 and set(before.files) == {first[0]}
    second = _file(path, "part-00000-b-c000.snappy.parquet", [(2, "B"), (3, "c")])
    assert log.commit(str(path), before, [second], 9, "app") == 2
    assert _rows(path) == [(2, "B"), (3, "c")]  # the first file removed, the second added
    third = _file(path, "part-00000-c-c000.snappy.parquet", [(4, "d")])
    assert log.append(str(path), log.read(str(path), None), [third], 11, "app") == 3
    assert _rows(path) == [(2, "B"), (3, "c"), (4, "d")]
    dt = DeltaTable(str(path))
    assert dt.transaction_version("app") == 11
    history = dt.history()
    assert [h["operation"] for h in history] == ["WRITE", "WRITE", "WRITE", "CREATE TABLE"]
    assert history[0]["operationParameters"]["mode"] == "Append"
    assert history[1]["operationParameters"]["mode"] == "Overwrite"
    assert all(h.get("engineInfo") == logfile.ENGINE for h in history)
    assert not [n for n in os.listdir(path / "_delta_log") if n.endswith(".tmp")]


def test_a_rewrite_over_a_version_another_writer_moved_on_from_is_refused(tmp_path: Path) -> None:
    log, path = RustLog(), tmp_path / "t"
    log.create(str(path), SCHEMA, {})
    before = log.read(str(path), None)
    write_deltalake(str(path), pa.table({"id": [9], "name": ["theirs"]}, schema=ROWS), mode="append")
    mine = _file(path, "part-00000-m-c000.snappy.parquet", [(1, "mine")])
    with pytest.raises(ApplyError, match="another writer's commit 1 changed the table"):
        log.commit(str(path), before, [mine], 3, "app")
    assert _rows(path) == [(9, "theirs")] and DeltaTable(str(path)).transaction_version("app") is None
    # an append over it goes on top of the other writer's commit (delta-rs reads it first)
    assert log.append(str(path), before, [mine], 3, "app") == 2
    assert _rows(path) == [(1, "mine"), (9, "theirs")]


def test_a_checkpoint_follows_at_the_tables_interval_off_the_commits_path(tmp_path: Path) -> None:
    log, path = RustLog(), tmp_path / "t"
    log.create(str(path), SCHEMA, {"delta.checkpointInterval": "3"})
    for i in range(8):
        added = _file(path, f"part-0000{i}-x-c000.snappy.parquet", [(i, str(i))])
        log.commit(str(path), log.read(str(path), None), [added], i, "app")
    log.settle()
    made = sorted(int(n[:20]) for n in os.listdir(path / "_delta_log") if n.endswith(".checkpoint.parquet"))
    # the first no later than Delta's rule would make it, then one every interval
    gaps = [b - a for a, b in zip(made, made[1:], strict=False)]
    assert made and made[0] <= 3 and made[-1] > 8 - 3 and set(gaps) <= {3}, made
    assert _rows(path) == [(7, "7")] and DeltaTable(str(path)).version() == 8


def test_names_a_uri_would_escape_go_through_delta_rs(tmp_path: Path) -> None:
    assert logfile.plain(["part-00000-0a1b-c000.snappy.parquet"])
    assert not logfile.plain(["a b.parquet"]) and not logfile.plain(["x%20.parquet"])
    assert not logfile.plain(["d=1/part.parquet"])
    log, path = RustLog(), tmp_path / "t"
    log.create(str(path), SCHEMA, {})
    odd = _file(path, "part 00000.parquet", [(1, "a")])
    assert log.commit(str(path), log.read(str(path), None), [odd], 1, "app") == 1
    assert _rows(path) == [(1, "a")]
    assert DeltaTable(str(path)).history()[0]["engineInfo"] != logfile.ENGINE  # delta-rs made it


def test_a_version_already_there_is_left_as_it_is(tmp_path: Path) -> None:
    target = tmp_path / "00000000000000000001.json"
    target.write_bytes(b"theirs\n")
    assert not logfile.put_if_absent(str(target), b"ours\n")
    assert target.read_bytes() == b"theirs\n" and os.listdir(tmp_path) == [target.name]
    fresh = tmp_path / "00000000000000000002.json"
    assert logfile.put_if_absent(str(fresh), b"ours\n") and fresh.read_bytes() == b"ours\n"


def test_a_file_system_without_hard_links_is_committed_to_by_delta_rs(tmp_path: Path, monkeypatch) -> None:
    def no_links(src: str, dst: str) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    log, path = RustLog(), tmp_path / "t"
    assert log.create(str(path), SCHEMA, {}) and not log.direct
    first = _file(path, "part-00000-a-c000.snappy.parquet", [(1, "a")])
    log.direct = True  # as another table's first commit would find it
    assert log.commit(str(path), log.read(str(path), None), [first], 1, "app") == 1 and not log.direct
    log.direct = True
    second = _file(path, "part-00000-b-c000.snappy.parquet", [(2, "b")])
    assert log.append(str(path), log.read(str(path), None), [second], 2, "app") == 2 and not log.direct
    assert _rows(path) == [(1, "a"), (2, "b")]
    dt = DeltaTable(str(path))
    assert dt.transaction_version("app") == 2
    assert all(h.get("engineInfo") != logfile.ENGINE for h in dt.history())
    assert not [n for n in os.listdir(path / "_delta_log") if n.endswith(".tmp")]


def test_a_files_path_is_kept_as_the_log_holds_it(tmp_path: Path) -> None:
    from urllib.parse import quote

    log, path = RustLog(), tmp_path / "t"
    log.create(str(path), SCHEMA, {})
    odd = _file(path, "x%41 y.parquet", [(1, "a")])  # written by delta-rs (not a plain name)
    log.append(str(path), log.read(str(path), None), [odd], 1, "app")
    before = log.read(str(path), None)
    assert set(before.files) == {quote(odd[0])}  # encoded once, as in the log: not x%252541%2520y.parquet
    new = _file(path, "part-00000-n-c000.snappy.parquet", [(2, "b")])
    assert log.commit(str(path), before, [new], 2, "app") == 2
    assert _rows(path) == [(2, "b")]


def test_a_commit_file_another_writer_replaced_is_noticed(tmp_path: Path) -> None:
    log, path = RustLog(), tmp_path / "t"
    log.create(str(path), SCHEMA, {})
    mine = _file(path, "part-00000-m-c000.snappy.parquet", [(1, "mine")])
    before = log.read(str(path), None)
    assert log.commit(str(path), before, [mine], 1, "app") == 1
    kept = log.read(str(path), before)  # (a newer read: kept is what DeltaLogs holds)
    log.read(str(path), kept)  # unchanged: nothing to say
    # what Hadoop's local rename does to an existing file: replaced by another writer's version 1
    theirs = path / "_delta_log" / ".theirs.json"
    theirs.write_bytes((path / "_delta_log" / f"{1:020d}.json").read_bytes().replace(b'"app"', b'"other-app"'))
    os.replace(theirs, path / "_delta_log" / f"{1:020d}.json")
    with pytest.raises(ApplyError, match="commit 1 was replaced by another writer"):
        log.read(str(path), kept)
    assert log.read(str(path), None).version == 1  # then read anew


def test_a_rewrite_goes_on_top_of_a_compaction_or_vacuum_that_came_between(tmp_path: Path) -> None:
    log, path = RustLog(), tmp_path / "t"
    log.create(str(path), SCHEMA, {})
    for i in range(3):
        log.append(str(path), log.read(str(path), None), [_file(path, f"part-0000{i}-a-c000.snappy.parquet",
                                                                 [(i, "old")])], i, "app")
    before = log.read(str(path), None)
    # the user's OPTIMIZE and VACUUM commit between the consumer's read and its commit: no row changed
    DeltaTable(str(path)).optimize.compact()
    DeltaTable(str(path)).vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False)
    assert DeltaTable(str(path)).version() > before.version + 1
    mine = _file(path, "part-00000-m-c000.snappy.parquet", [(0, "new"), (1, "new"), (2, "new")])
    committed = log.commit(str(path), before, [mine], 9, "app")
    assert committed == DeltaTable(str(path)).version() > before.version + 1
    assert _rows(path) == [(0, "new"), (1, "new"), (2, "new")]  # the compacted file replaced too: no row twice
    assert DeltaTable(str(path)).transaction_version("app") == 9
    # a DELETE between read and commit changed rows the rewrite read: refused (the restart re-applies on top)
    before = log.read(str(path), None)
    DeltaTable(str(path)).delete("id = 1")
    with pytest.raises(ApplyError, match="changed the table"):
        log.commit(str(path), before, [_file(path, "part-00000-z-c000.snappy.parquet", [(5, "z")])], 10, "app")
    assert _rows(path) == [(0, "new"), (2, "new")]


def test_a_created_tables_files_are_what_reading_its_log_gives(tmp_path: Path) -> None:
    log, path = RustLog(), tmp_path / "t"
    spark_json = ('{"fields":[{"metadata":{},"name":"id","nullable":false,"type":"long"},'
                  '{"metadata":{},"name":"name","nullable":true,"type":"string"}],"type":"struct"}')  # Spark's order
    conf = {"changefeed.app.ddlVersion": "5"}
    assert log.create(str(path), spark_json, conf)
    assert log.created(spark_json, conf) == RustLog().read(str(path), None)  # schema text included: grouped by it


def test_tables_kept_open_are_bounded_least_recently_used_first(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(RustLog, "KEEP", 2)
    log = RustLog()
    paths = [str(tmp_path / f"t{i}") for i in range(3)]
    for p in paths:
        log.create(p, SCHEMA, {})
    log.txn_version(paths[0], "app", "p")
    log.txn_version(paths[1], "app", "p")
    log.txn_version(paths[0], "app", "p")  # used again: the least recently used is now t1
    log.txn_version(paths[2], "app", "p")
    assert list(log._open) == [paths[0], paths[2]]
    first = _file(Path(paths[1]), "part-00000-a-c000.snappy.parquet", [(1, "a")])
    assert log.commit(paths[1], log.read(paths[1], None), [first], 3, "app") == 1  # a closed table opens again
    assert log.txn_version(paths[1], "app", "p") == 3 and len(log._open) == 2


def test_many_tables_created_then_rewritten_at_once_read_back_and_what_another_writer_made_is_left(
        tmp_path: Path) -> None:
    log = RustLog()
    paths = [str(tmp_path / f"t{i}") for i in range(5)]
    assert log.create(paths[4], SCHEMA, {"mine": "no"})  # made before (another writer's)
    before = (Path(paths[4]) / "_delta_log" / "00000000000000000000.json").read_bytes()
    made = log.create_many([(p, SCHEMA, {"delta.checkpointInterval": "1"} if i == 3 else
                             {"changefeed.app.ddlVersion": str(i)}) for i, p in enumerate(paths)])
    assert made == [True, True, True, True, False]
    assert (Path(paths[4]) / "_delta_log" / "00000000000000000000.json").read_bytes() == before  # left as it was
    for i, p in enumerate(paths):
        dt = DeltaTable(p)
        assert dt.version() == 0 and [f.name for f in dt.schema().fields] == ["id", "name"]
        assert dt.metadata().configuration == ({"mine": "no"} if i == 4 else {"delta.checkpointInterval": "1"}
                                               if i == 3 else {"changefeed.app.ddlVersion": str(i)})
        assert not [n for n in os.listdir(Path(p) / "_delta_log") if n.endswith(".tmp")]
    paths = paths[:4]
    befores = [log.read(p, None) for p in paths]
    write_deltalake(paths[1], pa.table({"id": [9], "name": ["theirs"]}, schema=ROWS), mode="append")  # version 1
    added = [[_file(Path(p), f"part-00000-{i}-c000.snappy.parquet", [(i, f"n{i}")])] for i, p in enumerate(paths)]
    got = log.commit_all([(p, b, a, 10 + i, "app", None) for i, (p, b, a) in enumerate(zip(paths, befores, added,
                                                                                            strict=True))])
    assert got == [1, None, 1, 1]  # t1's version 1 is the other writer's: left to its own commit
    for i in (0, 2, 3):
        dt = DeltaTable(paths[i])
        assert dt.version() == 1 and dt.transaction_version("app") == 10 + i and _rows(Path(paths[i])) == [(i, f"n{i}")]
        assert dt.history()[0]["operationParameters"]["mode"] == "Overwrite"
        assert not [n for n in os.listdir(Path(paths[i]) / "_delta_log") if n.endswith(".tmp")]
    log.settle()
    assert f"{1:020d}.checkpoint.parquet" in os.listdir(Path(paths[3]) / "_delta_log")  # at its interval
    assert _rows(Path(paths[1])) == [(9, "theirs")] and DeltaTable(paths[1]).transaction_version("app") is None
    # a later commit of a table committed at once notices when its file was replaced (it is noted as ours)
    (Path(paths[0]) / "_delta_log" / f"{1:020d}.json").unlink()
    (Path(paths[0]) / "_delta_log" / f"{1:020d}.json").write_bytes(b'{"commitInfo":{}}\n')
    with pytest.raises(ApplyError, match="was replaced"):
        log.read(paths[0], None)


def test_tables_made_by_their_first_commit_read_back_and_the_rest_made_on_demand(tmp_path: Path) -> None:
    """A database's new tables (`defer_many`): version 0 holds the creation and the first rows (Delta's CREATE TABLE
    AS SELECT), one log file per table; one not committed is made by `materialize`; one another writer made first
    is refused at its commit (its version 0 stands), and a replay finds each committed table complete."""
    log = RustLog()
    paths = [str(tmp_path / f"t{i}") for i in range(4)]
    conf = [{"changefeed.app.ddlVersion": str(5 + i)} for i in range(4)]
    befores = log.defer_many([(p, SCHEMA, c) for p, c in zip(paths, conf, strict=True)])
    assert [b.version for b in befores] == [-1] * 4 and all(b.refused is None and not b.files for b in befores)
    assert all(log.creating(p) and not os.listdir(Path(p) / "_delta_log") for p in paths)  # nothing written yet
    assert log.read(paths[0], befores[0]) is befores[0]
    assert log.txn_version(paths[0], "app", "changefeed.app.ddlVersion") == 5  # the DDL, as its commit will say
    write_deltalake(paths[3], pa.table({"id": [9], "name": ["theirs"]}, schema=ROWS))  # another writer's, first
    added = [[_file(Path(p), f"part-00000-{i}-c000.snappy.parquet", [(i, f"n{i}")])] for i, p in enumerate(paths)]
    got = log.commit_all([(paths[i], befores[i], added[i], 10 + i, "app", None) for i in (0, 1, 3)])
    assert got == [0, 0, None]
    for i in (0, 1):
        dt = DeltaTable(paths[i])
        assert dt.version() == 0 and _rows(Path(paths[i])) == [(i, f"n{i}")]
        assert dt.transaction_version("app") == 10 + i and dt.metadata().configuration == conf[i]
        assert dt.history()[0]["operation"] == "CREATE TABLE AS SELECT"
        assert os.listdir(Path(paths[i]) / "_delta_log") == [f"{0:020d}.json"]  # one log file
        assert not log.creating(paths[i]) and log.txn_version(paths[i], "app", "changefeed.app.ddlVersion") == 10 + i
    with pytest.raises(ApplyError, match="changed the table"):  # its own commit, on top of the other writer's
        log.commit(paths[3], befores[3], added[3], 13, "app")
    assert _rows(Path(paths[3])) == [(9, "theirs")] and not log.creating(paths[3])
    log.materialize()  # t2 took no commit: made as `create_many` makes it
    dt = DeltaTable(paths[2])
    assert dt.version() == 0 and dt.metadata().configuration == conf[2] and _rows(Path(paths[2])) == []
    assert not log.creating(paths[2])
    log.materialize()  # nothing left: nothing more written
    assert os.listdir(Path(paths[2]) / "_delta_log") == [f"{0:020d}.json"]
