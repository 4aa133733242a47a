"""The Spark pipeline end to end: a stream written by our encoders, read by Spark, applied to Delta, and the
tables compared with the upstream state computed in plain Python (upstream.py) from the same events.

Streams arrive out of order across partitions (one partition far ahead of another), with duplicated
delivery, and the consumer is restarted between micro-batches (every `apply_changes` call starts from what
the lake recorded); a separate test kills a consumer process mid-stream.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import orjson
import pytest

from changefeed.codecs import make_encoder
from changefeed.model import Column, Event, Index, Kind, TableInfo
from changefeed.produce import Producer
from changefeed.sinkconfig import resolve
from changefeed.spark.apply import read_progress
from changefeed.spark.layout import LakeLayout, schema_store
from changefeed.spark.pipeline import apply_changes, read_changes
from changefeed.spark.verify import verify
from changefeed.transport.files import FileProducer
from changefeed.upstream import final_state
from changefeed.workload import generate

from ..conftest import ROOT, produce_events

DISPATCH = """
[sink]
dispatchers = [{matcher = ['*.*'], partition = "index-value"}]
"""


def produce(tmp: Path, uri: str, events: list[Event]) -> None:
    toml = tmp / "cf.toml"
    toml.write_text(DISPATCH)
    sink, cfg, router = resolve(uri, toml)
    router.canal_ddl_to_partition_zero = False
    transport = FileProducer(sink.folder, sink.partition_num)
    p = Producer(make_encoder(cfg), router, transport, watermark_interval_ms=0)
    for ev in events:
        p.send(ev)
    p.close()
    transport.close()


def copy_records(src: Path, dst: Path, topic: str, upto: dict[int, float],
                 replay: dict[int, tuple[int, int]] | None = None) -> None:
    """Deliver each partition's staged records up to a fraction of them, then, optionally, a range of records
    again (as a producer retrying after a failure would)."""
    (dst / topic).mkdir(parents=True, exist_ok=True)
    (dst / topic / "meta.json").write_bytes((src / topic / "meta.json").read_bytes())
    for p, frac in upto.items():
        staged = (src / topic / f"partition-{p}.jsonl").read_bytes().splitlines()
        mark = dst / topic / f".delivered-{p}"
        done = int(mark.read_text()) if mark.exists() else 0
        n = max(done, int(len(staged) * frac))
        target = dst / topic / f"partition-{p}.jsonl"
        off = len(target.read_bytes().splitlines()) if target.exists() else 0
        batch = staged[done:n] + (staged[replay[p][0]:replay[p][1]] if replay and p in replay else [])
        with open(target, "ab") as f:
            for x in batch:
                rec = orjson.loads(x)
                rec["offset"] = off
                off += 1
                f.write(orjson.dumps(rec) + b"\n")
        mark.write_text(str(n))


def lake_equals(spark, lake: Path, expected) -> None:
    rep = verify(spark, str(lake), expected)
    bad = [t for t in rep.tables if not t.ok]
    for t in bad:
        t.samples.sort(key=lambda x: x.split(":", 1)[1])
    assert not bad, "\n".join(f"{t.name}: expected {t.expected} rows, lake {t.actual}, missing {t.missing}, "
                              f"extra {t.extra}, {t.problem or ''} {t.samples[:3]}" for t in bad)


def consume(spark, folder: Path, lake: Path, protocol: str, options: dict[str, str], **kw):
    changes = read_changes(spark, f"file://{folder}/t", protocol, options, schema_store=str(lake / "_schemas"))
    q = apply_changes(changes, str(lake), checkpoint=str(lake / "_cp"), **kw)
    q.awaitTermination()
    assert q.exception() is None


PROTOCOLS = [
    ("canal-json", "&enable-tidb-extension=true", {"enable-tidb-extension": "true"}),
    ("simple", "", {}),
]


@pytest.mark.parametrize(("protocol", "uri_opts", "options"), PROTOCOLS, ids=[p[0] for p in PROTOCOLS])
def test_stream_to_delta_in_order_exactly_once(spark, tmp_path: Path, protocol: str, uri_opts: str,
                                               options: dict[str, str]) -> None:
    events = list(generate(seed=11, transactions=120))
    staged, live, lake = tmp_path / "staged", tmp_path / "live", tmp_path / "lake"
    produce(tmp_path, f"file://{staged}/t?protocol={protocol}{uri_opts}&partition-num=3", events)

    # partition 0 delivered in full, 1 in part, 2 not at all: nothing past partition 2's watermark may show
    copy_records(staged, live, "t", {0: 1.0, 1: 0.5, 2: 0.0})
    consume(spark, live, lake, protocol, options)
    # every table is exactly upstream's state at one commit ts (none yet: partition 2 sent no watermark)
    lake_equals(spark, lake, final_state(events, upto=0))

    copy_records(staged, live, "t", {0: 1.0, 1: 0.8, 2: 0.6})
    consume(spark, live, lake, protocol, options)
    applied = read_progress(spark, str(lake), last=True)[0]["applied_ts"]
    assert 0 < applied < max(e.commit_ts for e in events)
    lake_equals(spark, lake, final_state(events, upto=applied))

    # the rest, then partition 1's first half delivered a second time (at-least-once)
    copy_records(staged, live, "t", {0: 1.0, 1: 1.0, 2: 1.0}, replay={1: (0, 40)})
    consume(spark, live, lake, protocol, options)
    lake_equals(spark, lake, final_state(events))
    assert spark.read.format("delta").load(str(lake / "_changefeed/dead_letters")).count() == 0
    # the ADD COLUMN ... NOT NULL DEFAULT: one commit by the driver, its schema and the filled rows together
    # (`ddldriver`), no ALTER and UPDATE of Delta's; the CREATE INDEX after it a commit of the txn alone, the
    # TRUNCATE one removing every file
    ops = [(c["commitInfo"]["operation"], c["commitInfo"]["engineInfo"].startswith("changefeed"),
            "metaData" in c, "add" in c, "remove" in c) for c in _commits(lake / "app" / "orders")]
    assert ("ADD COLUMNS", True, True, True, True) in ops, ops
    assert ("SET TRANSACTION", True, False, False, False) in ops and ("DELETE", True, False, False, True) in ops, ops
    assert not any(op in ("ADD COLUMNS", "UPDATE", "DELETE") for op, mine, *_ in ops if not mine), ops


def _commits(table: Path) -> list[dict]:
    """A table's commits in its log (those still there), each as its actions by kind (the last of each kind)."""
    out = []
    for f in sorted((table / "_delta_log").glob("*.json")):
        out.append({next(iter(a)): next(iter(a.values())) for a in map(orjson.loads, f.read_bytes().splitlines())})
    return out


def test_the_minimal_changelog_holds_what_a_restart_reads(spark, tmp_path: Path) -> None:
    """The default changelog keeps only the rows a batch left for a later window (past its applied watermark) and
    the control rows; a consumer restarted from it ends where upstream is. "full" keeps every change."""
    events = list(generate(seed=13, transactions=80))
    staged = tmp_path / "staged"
    produce(tmp_path, f"file://{staged}/t?protocol=canal-json&enable-tidb-extension=true&partition-num=3", events)
    options = {"enable-tidb-extension": "true"}
    changes = sum(1 for e in events if e.kind in (Kind.INSERT, Kind.UPDATE, Kind.DELETE))
    kept: dict[str, int] = {}
    for mode in ("minimal", "full"):
        lake, live = tmp_path / mode, tmp_path / f"live-{mode}"
        copy_records(staged, live, "t", {0: 1.0, 1: 0.7, 2: 0.4})
        consume(spark, live, lake, "canal-json", options, changelog=mode)  # rows past the watermark: pending
        copy_records(staged, live, "t", {0: 1.0, 1: 1.0, 2: 1.0})
        consume(spark, live, lake, "canal-json", options, changelog=mode)  # a new consumer: they come from the log
        lake_equals(spark, lake, final_state(events))
        applied = {r["batch_id"]: r["applied_ts"] for r in read_progress(spark, str(lake))}
        log = spark.read.format("delta").load(str(lake / "_changefeed" / "changelog")).where(
            "kind IN ('insert', 'update', 'delete')").select("_batch", "commit_ts", "table_def").collect()
        kept[mode] = len(log)
        from delta.tables import DeltaTable

        # on a local lake the appends are driver-side commits of Spark-written Parquet, written as the log's files
        # (as Delta's own appends, the txn of each batch in the log)
        history = DeltaTable.forPath(spark, str(lake / "_changefeed" / "changelog")).history().collect()
        appends = [r for r in history if r["operation"] != "CREATE TABLE"]
        assert appends and all((r["engineInfo"] or "").startswith("changefeed") for r in appends), history
        if mode == "minimal":
            assert all(r["table_def"] is not None or r["commit_ts"] > applied[r["_batch"]] for r in log)
    # every change (TiCDC's canal-json splits an update of the key into a delete and an insert: a few more rows)
    assert kept["full"] >= changes > kept["minimal"] > 0, kept


def test_a_replay_that_sees_another_partition_still_applies_what_its_changelog_left_out(spark, tmp_path: Path,
                                                                                       monkeypatch) -> None:
    """Minimal changelog: a batch's first attempt appends the rows past its cutoff (the global watermark over the
    topic's 3 partitions) and dies before any table write. Its replay reads the partition count anew and sees a
    4th partition with no watermark yet: on its own it would apply nothing and hold the batch in memory only, so
    the rows up to the first cutoff (in no changelog) would be gone once the consumer stopped. It applies up to
    the recorded cutoff, and a restarted consumer ends where upstream is."""
    from changefeed.spark.apply.backlog import Backlog

    events = list(generate(seed=17, transactions=80))
    staged, live, lake = tmp_path / "staged", tmp_path / "live", tmp_path / "lake"
    produce(tmp_path, f"file://{staged}/t?protocol=canal-json&enable-tidb-extension=true&partition-num=3", events)
    options = {"enable-tidb-extension": "true"}
    copy_records(staged, live, "t", {0: 1.0, 1: 0.7, 2: 0.4})

    def killed(*_: object, **__: object) -> None:
        raise RuntimeError("killed after the changelog append, before the tables")

    with monkeypatch.context() as m:
        m.setattr(Backlog, "watermarked", killed)
        with pytest.raises(Exception, match="killed"):
            consume(spark, live, lake, "canal-json", options, partitions={"t": 3})
    log = spark.read.format("delta").load(str(lake / "_changefeed" / "changelog"))
    first = log.where("kind IN ('insert', 'update', 'delete') AND table_def IS NULL").count()
    consume(spark, live, lake, "canal-json", options, partitions={"t": 4})  # the replay, then the consumer stops
    replayed = read_progress(spark, str(lake), last=True)[0]
    assert log.where("kind IN ('insert', 'update', 'delete') AND table_def IS NULL").count() == first  # no append
    copy_records(staged, live, "t", {0: 1.0, 1: 1.0, 2: 1.0})
    consume(spark, live, lake, "canal-json", options, partitions={"t": 3})  # a new consumer: the rest
    lake_equals(spark, lake, final_state(events))
    assert replayed["batch_id"] == 0 and replayed["applied_ts"] > 0  # the replay applied up to the first cutoff


def test_debezium_without_watermarks_applies_in_key_order(spark, tmp_path: Path) -> None:
    events = list(generate(seed=5, transactions=80))
    live, lake = tmp_path / "live", tmp_path / "lake"
    produce(tmp_path, f"file://{live}/t?protocol=debezium&partition-num=2", events)
    consume(spark, live, lake, "debezium", {})
    lake_equals(spark, lake, final_state(events))


def test_debezium_lagging_partition_holds_back_the_ddl_it_has_not_delivered(spark, tmp_path: Path) -> None:
    """Without watermarks, one partition far behind the others: a DDL (rename, truncate, drop table, column
    changes) waits until every partition delivered its copy, so the late partition's rows before it are applied
    first, under the table's name and columns of their time, and the rows after it wait for it. Messages a
    partition delivers again later (older than what it already applied for their table) are ignored."""
    events = list(generate(seed=7, transactions=200))
    staged, live, lake = tmp_path / "staged", tmp_path / "live", tmp_path / "lake"
    produce(tmp_path, f"file://{staged}/t?protocol=debezium&partition-num=3", events)
    copy_records(staged, live, "t", {0: 1.0, 1: 0.2, 2: 0.7})
    consume(spark, live, lake, "debezium", {})
    copy_records(staged, live, "t", {0: 1.0, 1: 0.6, 2: 1.0})
    consume(spark, live, lake, "debezium", {})
    # the rest, then partition 0's first records and partition 2's middle ones once more (at-least-once)
    copy_records(staged, live, "t", {0: 1.0, 1: 1.0, 2: 1.0}, replay={0: (0, 60), 2: (100, 160)})
    consume(spark, live, lake, "debezium", {})
    lake_equals(spark, lake, final_state(events))


def _table() -> TableInfo:
    return TableInfo("shop", "items", columns=[Column("id", "int", nullable=False), Column("name", "varchar(20)"),
                                               Column("price", "decimal(8,2)")],
                     indexes=[Index("PRIMARY", ["id"], primary=True, unique=True)], version=1)


def _ts(i: int) -> int:
    return (1_763_000_000_000 + i) << 18


def test_scd2_keeps_history(spark, tmp_path: Path) -> None:
    t = _table()
    create = Event(Kind.DDL, _ts(1), table=t, query="CREATE TABLE shop.items (id int NOT NULL PRIMARY KEY, "
                   "name varchar(20), price decimal(8,2))", ddl_type="ActionCreateTable")
    evs = [
        create,
        Event(Kind.INSERT, _ts(2), table=t, after={"id": 1, "name": "pen", "price": "1.50"}),
        Event(Kind.INSERT, _ts(2), table=t, after={"id": 2, "name": "ink", "price": "3.00"}),
        Event(Kind.UPDATE, _ts(3), table=t, before={"id": 1, "name": "pen", "price": "1.50"},
              after={"id": 1, "name": "pen", "price": "1.75"}),
        Event(Kind.UPDATE, _ts(4), table=t, before={"id": 2, "name": "ink", "price": "3.00"},
              after={"id": 3, "name": "ink", "price": "3.00"}),  # a primary-key change
        Event(Kind.DELETE, _ts(5), table=t, before={"id": 1, "name": "pen", "price": "1.75"}),
    ]
    folder, lake = tmp_path / "s", tmp_path / "lake"
    produce(tmp_path, f"file://{folder}/t?protocol=canal-json&enable-tidb-extension=true&partition-num=2", evs)
    consume(spark, folder, lake, "canal-json", {"enable-tidb-extension": "true"}, stored_as_scd_type=2)
    rows = sorted((r["id"], r["name"], str(r["price"]), r["__START_AT"], r["__END_AT"])
                  for r in spark.read.format("delta").load(str(lake / "shop/items")).collect())
    assert rows == [
        (1, "pen", "1.50", _ts(2), _ts(3)),
        (1, "pen", "1.75", _ts(3), _ts(5)),
        (2, "ink", "3.00", _ts(2), _ts(4)),
        (3, "ink", "3.00", _ts(4), None),
    ]


def test_scd2_without_watermarks_ignores_a_change_delivered_again(spark, tmp_path: Path) -> None:
    """Without watermarks a change at the commit ts its partition last applied is not known to be a replay (the
    rest of its transaction may come later), so it reaches the merge: it must not open the version again."""
    t = _table()
    evs = [Event(Kind.DDL, _ts(1), table=t, query="CREATE TABLE shop.items (id int NOT NULL PRIMARY KEY, "
                 "name varchar(20), price decimal(8,2))", ddl_type="ActionCreateTable"),
           Event(Kind.INSERT, _ts(2), table=t, after={"id": 1, "name": "pen", "price": "1.50"}),
           Event(Kind.UPDATE, _ts(3), table=t, before={"id": 1, "name": "pen", "price": "1.50"},
                 after={"id": 1, "name": "pen", "price": "1.75"}),
           Event(Kind.INSERT, _ts(3), table=t, after={"id": 2, "name": "ink", "price": "3.00"})]
    staged, live, lake = tmp_path / "staged", tmp_path / "live", tmp_path / "lake"
    produce(tmp_path, f"file://{staged}/t?protocol=debezium&partition-num=1", evs)
    copy_records(staged, live, "t", {0: 0.75})  # the DDL, the insert and the update: half of the ts-3 transaction
    consume(spark, live, lake, "debezium", {}, stored_as_scd_type=2)
    copy_records(staged, live, "t", {0: 1.0}, replay={0: (2, 3)})  # the rest, then the update once more
    consume(spark, live, lake, "debezium", {}, stored_as_scd_type=2)
    rows = sorted(((r["id"], str(r["price"]), r["__START_AT"], r["__END_AT"])
                   for r in spark.read.format("delta").load(str(lake / "shop/items")).collect()),
                  key=lambda x: (x[0], x[2], x[3] or 0))
    assert rows == [(1, "1.50", _ts(2), _ts(3)), (1, "1.75", _ts(3), None), (2, "3.00", _ts(3), None)]


def test_scd2_track_history_columns(spark, tmp_path: Path) -> None:
    t = _table()
    create = Event(Kind.DDL, _ts(1), table=t, query="CREATE TABLE shop.items (id int NOT NULL PRIMARY KEY, "
                   "name varchar(20), price decimal(8,2))", ddl_type="ActionCreateTable")
    first = [create, Event(Kind.INSERT, _ts(2), table=t, after={"id": 1, "name": "pen", "price": "1.50"})]
    second = [
        # only the name changes: not a tracked column, the open version is updated in place
        Event(Kind.UPDATE, _ts(3), table=t, before={"id": 1, "name": "pen", "price": "1.50"},
              after={"id": 1, "name": "Pen", "price": "1.50"}),
        Event(Kind.UPDATE, _ts(4), table=t, before={"id": 1, "name": "Pen", "price": "1.50"},
              after={"id": 1, "name": "Pen", "price": "2.00"}),
    ]
    folder, lake = tmp_path / "s", tmp_path / "lake"
    uri = f"file://{folder}/t?protocol=canal-json&enable-tidb-extension=true&partition-num=1"
    opts = {"enable-tidb-extension": "true"}
    produce(tmp_path, uri, first)
    consume(spark, folder, lake, "canal-json", opts, stored_as_scd_type=2, track_history_column_list=["price"])
    produce(tmp_path, uri, second)
    consume(spark, folder, lake, "canal-json", opts, stored_as_scd_type=2, track_history_column_list=["price"])
    rows = sorted((r["id"], r["name"], str(r["price"]), r["__START_AT"], r["__END_AT"])
                  for r in spark.read.format("delta").load(str(lake / "shop/items")).collect())
    assert rows == [(1, "Pen", "1.50", _ts(2), _ts(4)), (1, "Pen", "2.00", _ts(4), None)]


def test_undecodable_message_goes_to_dead_letters(spark, tmp_path: Path) -> None:
    t = _table()
    evs = [Event(Kind.DDL, _ts(1), table=t, query="CREATE TABLE shop.items (id int NOT NULL PRIMARY KEY, "
                 "name varchar(20), price decimal(8,2))", ddl_type="ActionCreateTable"),
           Event(Kind.INSERT, _ts(2), table=t, after={"id": 1, "name": "pen", "price": "1.50"})]
    folder, lake = tmp_path / "s", tmp_path / "lake"
    produce(tmp_path, f"file://{folder}/t?protocol=canal-json&enable-tidb-extension=true&partition-num=1", evs)
    with open(folder / "t/partition-0.jsonl", "ab") as f:
        n = len((folder / "t/partition-0.jsonl").read_bytes().splitlines())
        f.write(orjson.dumps({"offset": n, "key": None, "value": '{"id": 1, "isDdl": false, "type": "INSERT"',
                              "crc": 0}) + b"\n")
    consume(spark, folder, lake, "canal-json", {"enable-tidb-extension": "true"})
    dead = spark.read.format("delta").load(str(lake / "_changefeed/dead_letters")).collect()
    assert len(dead) == 1
    assert dead[0]["value"] == b'{"id": 1, "isDdl": false, "type": "INSERT"'
    assert f"t/0@{n}" in dead[0]["reason"] and "offset" in dead[0]["reason"]
    assert [r["id"] for r in spark.read.format("delta").load(str(lake / "shop/items")).collect()] == [1]


def test_consumer_killed_mid_stream_restarts_exactly_once(spark, kafka_broker: str, tmp_path: Path) -> None:
    events = list(generate(seed=23, transactions=150))
    topic = f"kill-{os.getpid()}-{int(time.time())}"
    uri = f"kafka://{kafka_broker}/{topic}?protocol=canal-json&enable-tidb-extension=true&partition-num=3"
    produce_events(events, uri, tmp_path)
    cli = [sys.executable, "-m", "changefeed.cli"]
    lake = tmp_path / "lake"
    consume_cmd = [*cli, "consume", "--from", uri, "--lake", str(lake), "--max-records-per-trigger", "60"]
    proc = subprocess.Popen([*consume_cmd, "--trigger", "processing-time=1 second"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    progress = lake / "_changefeed/progress"
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            if progress.exists() and len(list(progress.glob("batch-*.json"))) >= 2:
                break
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:]  # type: ignore[union-attr]
            time.sleep(0.2)
        else:
            pytest.fail("the consumer committed no batch in 240 s")
        time.sleep(1.5)  # somewhere inside a later batch
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    # the restart: what `consume` runs (`consuming.consume_into_lake`: the lake's checkpoint and schema store), in
    # this session rather than a second command's JVM (tens of seconds): the killed process is what is checked.
    # No cap per trigger here: the batch the kill cut short is replayed with the offsets its process planned (the
    # checkpoint's offset log), then the rest comes in one batch rather than in several of 60
    cp = LakeLayout(str(lake)).checkpoint
    changes = read_changes(spark, f"kafka://{kafka_broker}/{topic}", "canal-json", {"enable-tidb-extension": "true"},
                           schema_store=schema_store(cp))
    q = apply_changes(changes, str(lake), checkpoint=cp)
    q.awaitTermination()
    assert q.exception() is None
    lake_equals(spark, lake, final_state(events))


def test_avro_without_extension_follows_the_columns_rows_carry(spark, schema_registry_url: str,
                                                               tmp_path: Path) -> None:
    """Plain avro sends no DDL and no watermarks (and its deletes are tombstones with no commit ts): the table
    takes the columns its rows carry, each key applied in its partition's order."""
    t1 = TableInfo("shop", "items", columns=[Column("id", "int", nullable=False), Column("name", "varchar(20)")],
                   indexes=[Index("PRIMARY", ["id"], primary=True, unique=True)])
    t2 = TableInfo("shop", "items", columns=[*t1.columns, Column("price", "decimal(8,2)")], indexes=t1.indexes)
    ts = iter(range(1 << 40, (1 << 40) + (1 << 30), 1 << 18))
    events = [Event(Kind.DDL, next(ts), table=t1, query="CREATE TABLE shop.items (id int NOT NULL PRIMARY KEY, "
                    "name varchar(20))", ddl_type="ActionCreateTable"),
              *(Event(Kind.INSERT, next(ts), table=t1, after={"id": i, "name": f"n{i}"}) for i in range(6)),
              Event(Kind.DELETE, next(ts), table=t1, before={"id": 1, "name": "n1"}),
              Event(Kind.DDL, next(ts), table=t2, pre_table=t1, query="ALTER TABLE shop.items ADD COLUMN price "
                    "decimal(8,2)", ddl_type="ActionAddColumn"),
              Event(Kind.UPDATE, next(ts), table=t2, before={"id": 2, "name": "n2", "price": None},
                    after={"id": 2, "name": "n2", "price": "9.50"}),
              Event(Kind.INSERT, next(ts), table=t2, after={"id": 9, "name": "n9", "price": "1.25"}),
              Event(Kind.DELETE, next(ts), table=t2, before={"id": 9, "name": "n9", "price": "1.25"}),
              Event(Kind.INSERT, next(ts), table=t2, after={"id": 9, "name": "again", "price": "2.00"})]
    folder, lake = tmp_path / "stream", tmp_path / "lake"
    toml = tmp_path / "cf.toml"
    toml.write_text("[sink]\ndispatchers = [{matcher = ['*.*'], topic = \"t_{schema}_{table}\", "
                    "partition = \"index-value\"}]\n")
    sink, cfg, router = resolve(f"file://{folder}/t?protocol=avro&partition-num=2&schema-registry="
                                f"{schema_registry_url}", toml)
    transport = FileProducer(sink.folder, sink.partition_num)
    p = Producer(make_encoder(cfg, topic=router), router, transport, watermark_interval_ms=0)
    for ev in events:
        p.send(ev)
    p.close()
    transport.close()
    assert (folder / "t_shop_items").is_dir()
    changes = read_changes(spark, f"file://{folder}/t_*", "avro", {"schema-registry": schema_registry_url},
                           schema_store=str(lake / "_schemas"))
    q = apply_changes(changes, str(lake), checkpoint=str(lake / "_cp"))
    q.awaitTermination()
    assert q.exception() is None
    got = {r["id"]: (r["name"], None if r["price"] is None else str(r["price"]))
           for r in spark.read.format("delta").load(str(lake / "shop/items")).collect()}
    assert got == {0: ("n0", None), 2: ("n2", "9.50"), 3: ("n3", None), 4: ("n4", None), 5: ("n5", None),
                   9: ("again", "2.00")}


def test_canal_json_without_ddl_keeps_decimals_and_bits_whole(spark, tmp_path: Path) -> None:
    """canal-json's short mysqlType says `decimal` for every DECIMAL(p,s) and `bit` for every BIT(n): a consumer
    that never saw the CREATE TABLE must not read them as MySQL's DECIMAL(10,0) and BIT(1) (values rounded,
    a 64-bit value lost)."""
    t = TableInfo("shop", "prices", columns=[Column("id", "int", nullable=False), Column("price", "decimal(20,6)"),
                                             Column("flags", "bit(64)")],
                  indexes=[Index("PRIMARY", ["id"], primary=True, unique=True)])
    evs = [Event(Kind.INSERT, _ts(2), table=t, after={"id": 1, "price": "12345678901234.567891",
                                                      "flags": (1 << 64) - 1}),
           Event(Kind.INSERT, _ts(2), table=t, after={"id": 2, "price": "-0.000001", "flags": 5}),
           Event(Kind.UPDATE, _ts(3), table=t, before={"id": 2, "price": "-0.000001", "flags": 5},
                 after={"id": 2, "price": "99.5", "flags": 1 << 63})]
    folder, lake = tmp_path / "s", tmp_path / "lake"
    produce(tmp_path, f"file://{folder}/t?protocol=canal-json&enable-tidb-extension=true&partition-num=2", evs)
    consume(spark, folder, lake, "canal-json", {"enable-tidb-extension": "true"})
    got = sorted((r["id"], Decimal(str(r["price"])), int(r["flags"]))
                 for r in spark.read.format("delta").load(str(lake / "shop/prices")).collect())
    assert got == [(1, Decimal("12345678901234.567891"), (1 << 64) - 1), (2, Decimal("99.5"), 1 << 63)]
