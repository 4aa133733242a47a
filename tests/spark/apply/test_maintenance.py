"""A consumer's tables stay bounded over hundreds of micro-batches (`maintenance`, `log_rs`): log files by
checkpoints every 10 commits and expired-log cleanup, the changelog's appended files by compaction, the files
rewrites and MERGEs leave behind by VACUUM (only when asked), a MERGE-written table's small files by Delta's auto
compaction; and nothing is lost on the way (Spark and delta-rs read every row)."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from changefeed.spark.apply import maintenance
from changefeed.spark.apply.deltalog import new_file_name
from changefeed.spark.apply.lake import Lake
from changefeed.spark.apply.log_rs import CHECKPOINT_INTERVAL, RustLog

from ...conftest import produce_events

SCHEMA = orjson.dumps({"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "_batch", "type": "long", "nullable": True, "metadata": {}}]}).decode()
EXPIRE_NOW = {"delta.logRetentionDuration": "interval 0 seconds"}


def _file(folder: str, rows: list[int], batch: int) -> tuple[str, int, int]:
    name = new_file_name()
    pq.write_table(pa.table({"id": pa.array(rows, pa.int64()), "_batch": pa.array([batch] * len(rows), pa.int64())}),
                   os.path.join(folder, name))
    st = os.stat(os.path.join(folder, name))
    return name, st.st_size, int(st.st_mtime * 1000)


def _log_files(path: str) -> list[str]:
    return [n for n in os.listdir(os.path.join(path, "_delta_log")) if not n.startswith(".")]


def _data_files(path: str) -> list[str]:
    return [n for n in os.listdir(path) if n.endswith(".parquet")]


def test_the_log_is_checkpointed_every_10_commits_and_expired_files_go_unless_cleanup_is_off(tmp_path: Path) -> None:
    assert CHECKPOINT_INTERVAL == 10
    log = RustLog()
    bounded, kept = str(tmp_path / "bounded"), str(tmp_path / "kept")
    log.create(bounded, SCHEMA, EXPIRE_NOW)
    log.create(kept, SCHEMA, {**EXPIRE_NOW, "delta.enableExpiredLogCleanup": "false"})
    most = 0
    for b in range(1, 206):
        for path in (bounded, kept):
            log.append(path, log.read(path, None), [_file(path, [b], b)], b, "app")
        log.settle()  # (checkpoints are made in the background)
        most = max(most, len(_log_files(bounded)))
    # at most a checkpoint interval of commits beside the last checkpoint (and its pointer)
    assert most <= CHECKPOINT_INTERVAL + 3, sorted(_log_files(bounded))
    assert len([n for n in _log_files(kept) if n.endswith(".json")]) == 206  # cleanup off: every commit stays
    for path in (bounded, kept):
        dt = DeltaTable(path)
        assert dt.version() == 205 and dt.transaction_version("app") == 205
        assert sorted(r["id"] for r in dt.to_pyarrow_table().to_pylist()) == list(range(1, 206))


def test_hundreds_of_micro_batches_leave_bounded_files_and_every_row(spark, tmp_path: Path, monkeypatch) -> None:
    from pyspark.sql import functions as F

    monkeypatch.setattr(maintenance, "VACUUM_EVERY_S", 0.0)  # each batch: the test's batches take milliseconds
    lake = Lake(spark, str(tmp_path / "lake"), "app")
    upkeep = maintenance.Maintenance(lake, vacuum_retention_hours=0, compact=True)
    changelog = lake.layout.changelog
    table = lake.path("db", "t")  # rewritten whole each batch, as `multiwrite` writes a small table
    for path in (changelog, table):
        assert lake.logs.create(path, SCHEMA, EXPIRE_NOW)
    worst = {"changelog data": 0, "changelog log": 0, "table data": 0, "table log": 0}
    for b in range(1, 241):
        lake.logs.append(changelog, [_file(changelog, [b], b)], b, "app")
        lake.committed(changelog, b)
        lake.logs.commit(table, lake.logs.files(table), [_file(table, list(range(b)), b)], b, "app")
        lake.committed(table, b)
        upkeep.after_batch(changelog, lake.known_tables())
        lake.logs.settle()  # (checkpoints are made in the background)
        for what, path in (("changelog", changelog), ("table", table)):
            worst[f"{what} data"] = max(worst[f"{what} data"], len(_data_files(path)))
            worst[f"{what} log"] = max(worst[f"{what} log"], len(_log_files(path)))
    # bounded: the changelog compacted at 50 files, the table's replaced files vacuumed, logs cleaned up after
    # each checkpoint (vacuum and compaction commits included)
    assert worst["changelog data"] <= maintenance.COMPACT_MIN_FILES + 1, worst
    assert worst["table data"] <= 2, worst
    assert worst["changelog log"] <= 3 * CHECKPOINT_INTERVAL and worst["table log"] <= 3 * CHECKPOINT_INTERVAL, worst
    assert len(DeltaTable(changelog).file_uris()) < maintenance.COMPACT_MIN_FILES  # compacted (240 appends)
    # nothing lost: every batch's changelog row, the table's last rewrite; in Spark and in delta-rs
    assert sorted(r["id"] for r in DeltaTable(changelog).to_pyarrow_table().to_pylist()) == list(range(1, 241))
    logged = spark.read.format("delta").load(changelog)
    assert logged.count() == 240 and logged.where(F.col("_batch") >= 231).count() == 10
    assert sorted(r.id for r in spark.read.format("delta").load(table).collect()) == list(range(240))
    assert DeltaTable(table).transaction_version("app") == 240

    # a MERGE-written table: Delta's auto compaction (turned on by the consumer) keeps its small files few
    merged = lake.path("db", "m")
    spark.range(0).selectExpr("id", "id AS v").write.format("delta").save(merged)
    with lake.session_conf("spark.databricks.delta.autoCompact.minNumFiles", "2"):
        for b in range(4):  # (each MERGE adds a file or two: 5-8 files without compaction)
            spark.createDataFrame([(b, b), (b + 100, b)], "id long, v long").createOrReplaceTempView("src")
            spark.sql(f"MERGE INTO delta.`{merged}` t USING src s ON t.id = s.id "
                      "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    from delta.tables import DeltaTable as SparkDelta

    assert spark.conf.get(maintenance.AUTO_COMPACT) == "true"
    detail = SparkDelta.forPath(spark, merged).detail().collect()[0]
    assert detail["numFiles"] <= 3, detail["numFiles"]
    assert spark.read.format("delta").load(merged).count() == 8


def test_no_vacuum_unless_asked(spark, tmp_path: Path) -> None:
    lake = Lake(spark, str(tmp_path / "lake"), "app")
    upkeep = maintenance.Maintenance(lake)  # the default: no retention
    table = lake.path("db", "t")
    lake.logs.create(table, SCHEMA, {})
    for b in range(1, 4):
        lake.logs.commit(table, lake.logs.files(table), [_file(table, [b], b)], b, "app")
        lake.committed(table, b)
        assert upkeep.after_batch(lake.layout.changelog, lake.known_tables()) == []
    assert len(_data_files(table)) == 3  # the replaced files stay until the user (or --vacuum-retention) vacuums


def test_a_users_compaction_loop_beside_a_streaming_consume_loses_and_doubles_nothing(spark, kafka_broker: str,
                                                                                      tmp_path: Path) -> None:
    """Another writer (delta-rs, as a user's OPTIMIZE would) compacts the tables and the changelog over and over
    while the consumer applies a Kafka stream in many micro-batches: its commits come between the consumer's
    reads and commits, which re-plan on the new version (rewrites), go on top (appends) or run again (MERGEs);
    the stream never stops, and the lake ends equal to upstream."""
    import threading
    import time

    from changefeed.spark.pipeline import apply_changes, read_changes
    from changefeed.upstream import final_state
    from changefeed.workload import generate

    from ..test_pipeline import lake_equals

    events = list(generate(seed=5, transactions=100))
    topic = f"upkeep-{os.getpid()}-{int(time.time())}"
    uri = f"kafka://{kafka_broker}/{topic}?protocol=canal-json&enable-tidb-extension=true&partition-num=3"
    produce_events(events, uri, tmp_path)
    lake = tmp_path / "lake"
    stop = threading.Event()
    compactions = [0]

    def compact_loop() -> None:
        while not stop.is_set():
            tables = [lake / "_changefeed" / "changelog", *[t for d in lake.glob("*") if not d.name.startswith("_")
                                                            for t in d.glob("*")]]
            for table in [t for t in tables if (t / "_delta_log").is_dir()]:
                try:
                    if DeltaTable(str(table)).optimize.compact()["numFilesRemoved"]:
                        compactions[0] += 1
                except Exception:  # noqa: BLE001 - a feature delta-rs lacks, a lost race: the next table
                    pass
            stop.wait(0.05)

    other = threading.Thread(target=compact_loop, daemon=True)
    other.start()
    try:
        changes = read_changes(spark, f"kafka://{kafka_broker}/{topic}", "canal-json",
                               {"enable-tidb-extension": "true"}, schema_store=str(lake / "_schemas"),
                               max_records_per_trigger=60)
        q = apply_changes(changes, str(lake), checkpoint=str(lake / "_cp"))
        q.awaitTermination()
        assert q.exception() is None
        batches = len(q.recentProgress)
    finally:
        stop.set()
        other.join()
    assert batches >= 3 and compactions[0] > 0, (batches, compactions)
    lake_equals(spark, lake, final_state(events))


USER_MAINTENANCE = '''
import json, sys, time
from pathlib import Path
from changefeed.spark import spark_session

lake, out, stop = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
PACE = 4.0  # seconds between operations once each kind got in (and a DELETE removed rows)
s = spark_session("local[1]", "a-users-maintenance")
s.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
done = {"optimize": 0, "zorder": 0, "vacuum": 0, "delete": 0, "deleted_rows": 0, "failed": 0}
out.with_name("ready").write_text("1")
while not stop.exists():
    for t in sorted(p for p in lake.glob("*/*") if (p / "_delta_log").is_dir() and not p.parent.name.startswith("_")):
        name = "delta.`%s`" % t
        try:
            cols = s.read.format("delta").load(str(t)).columns
        except Exception:  # its _delta_log/ made, its first commit not yet written: not a table yet, as in Delta
            continue
        key = "id" if "id" in cols else cols[0]
        for op, sql in (("optimize", f"OPTIMIZE {name}"), ("zorder", f"OPTIMIZE {name} ZORDER BY ({key})"),
                        ("vacuum", f"VACUUM {name} RETAIN 1 HOURS"),
                        ("delete", f"DELETE FROM {name} WHERE __END_AT IS NOT NULL")):
            if stop.exists():
                break
            try:
                got = s.sql(sql).collect()
                done[op] += 1
                if op == "delete" and got:
                    done["deleted_rows"] += int(got[0][0])
            except Exception as e:  # a conflict with the consumer's commit: the user's operation lost, as in Delta
                done["failed"] += 1
                print(op, t, str(e).splitlines()[0][:300], file=sys.stderr)
            out.with_suffix(".tmp").write_text(json.dumps(done))
            out.with_suffix(".tmp").rename(out)
            if all(done[k] for k in ("optimize", "zorder", "vacuum", "delete", "deleted_rows")):
                time.sleep(PACE)  # each got in: keep at it, paced, not starving the consumer of the CPU
    time.sleep(0.5)
'''


def test_a_users_optimize_zorder_vacuum_and_delete_in_another_session_beside_a_streaming_consume(
        spark, kafka_broker: str, tmp_path: Path) -> None:
    """A second Spark session (another process, as a user's job) runs OPTIMIZE, ZORDER, VACUUM and a DELETE of
    closed SCD2 versions (rows the stream never changes again) over and over on the consumer's tables while the
    consumer applies a Kafka stream in many micro-batches: the consumer never fails, each operation gets in, and
    the lake ends equal to upstream (the open versions; the history lost only what the DELETE removed)."""
    import subprocess
    import sys
    import time

    from changefeed.spark.pipeline import apply_changes, read_changes
    from changefeed.upstream import final_state
    from changefeed.workload import generate

    from ..test_pipeline import lake_equals

    events = list(generate(seed=29, transactions=120))
    topic = f"usermaint-{os.getpid()}-{int(time.time())}"
    uri = f"kafka://{kafka_broker}/{topic}?protocol=canal-json&enable-tidb-extension=true&partition-num=3"
    produce_events(events, uri, tmp_path)
    lake, out, stop = tmp_path / "lake", tmp_path / "done.json", tmp_path / "stop"
    (tmp_path / "user.py").write_text(USER_MAINTENANCE)
    log = open(tmp_path / "user.log", "w")
    user = subprocess.Popen([sys.executable, str(tmp_path / "user.py"), str(lake), str(out), str(stop)],
                            cwd=tmp_path, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 300
        while not (tmp_path / "ready").exists():  # its Spark is up before the stream starts
            assert user.poll() is None, (tmp_path / "user.log").read_text()
            assert time.monotonic() < deadline, "the user's session did not start"
            time.sleep(0.5)
        changes = read_changes(spark, f"kafka://{kafka_broker}/{topic}", "canal-json",
                               {"enable-tidb-extension": "true"}, schema_store=str(lake / "_schemas"),
                               max_records_per_trigger=60)
        q = apply_changes(changes, str(lake), checkpoint=str(lake / "_cp"), stored_as_scd_type=2,
                          trigger="processing-time=1 second")

        def finished() -> bool:  # every operation got in once (a DELETE removed rows), and the stream is all applied
            last = q.lastProgress
            got = orjson.loads(out.read_bytes()) if out.exists() else {}
            return (all(got.get(op, 0) > 0 for op in ("optimize", "zorder", "vacuum", "delete", "deleted_rows"))
                    and last is not None and last["numInputRows"] == 0 and not q.status["isDataAvailable"])

        deadline = time.monotonic() + 900
        while not finished():
            assert q.isActive, q.exception()  # the consumer never fails
            assert user.poll() is None, (tmp_path / "user.log").read_text()[-3000:]
            assert time.monotonic() < deadline, ((tmp_path / "user.log").read_text()[-3000:], q.lastProgress)
            time.sleep(1)
        batches = len([p for p in q.recentProgress if p["numInputRows"]])
        q.stop()
        assert q.exception() is None
    finally:
        stop.write_text("1")
        try:
            user.wait(300)
        finally:
            if user.poll() is None:
                user.kill()
            log.close()
    done = orjson.loads(out.read_bytes())
    assert batches >= 5, batches
    assert all(done[op] > 0 for op in ("optimize", "zorder", "vacuum", "delete")), (
        done, (tmp_path / "user.log").read_text()[-3000:])
    assert done["deleted_rows"] > 0, done
    lake_equals(spark, lake, final_state(events))  # the open versions: every row upstream holds, once
    for t in (lake / "app").iterdir():  # no key with two open versions (a change applied twice would leave one)
        df = spark.read.format("delta").load(str(t)).where("__END_AT IS NULL")
        key = "id" if "id" in df.columns else df.columns[0]
        assert df.groupBy(key).count().where("count > 1").count() == 0, t
