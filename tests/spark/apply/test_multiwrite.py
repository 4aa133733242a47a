"""Many small tables of one shape written in one Spark job and a driver-side Delta commit each (`multiwrite`):
the lake must equal the upstream state computed in plain Python (`upstream.final_state`), window after window,
through inserts, updates, key changes, deletes, a column added to one table and a TRUNCATE, with partitions
delivered unevenly and part of one delivered twice; and the tables must read the same in an independent reader
(delta-rs)."""

from __future__ import annotations

import gc
import os
import random
import re
import time
from pathlib import Path
from urllib.parse import unquote

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from changefeed.ddl import action_from_query
from changefeed.model import Event, Kind
from changefeed.spark.apply import driverfiles, multiwrite, read_progress
from changefeed.spark.apply.deltalog import DELTA_RS
from changefeed.spark.apply.log_rs import DIRECT
from changefeed.sqlschema import SchemaTracker
from changefeed.upstream import final_state

from ...conftest import produce_events
from ..test_pipeline import consume, copy_records, lake_equals, produce

SHAPE_A = 5  # tables shop.a0..a4: (id bigint primary key, name, amount)
SHAPE_B = 3  # tables shop.b0..b2: (a int, b varchar, v double), primary key (a, b)


def _events(seed: int = 7, transactions: int = 150) -> list[Event]:
    rng = random.Random(seed)
    tracker = SchemaTracker()
    ts = [1 << 42]

    def tick() -> int:
        ts[0] += rng.randint(1, 30) << 18
        return ts[0]

    out: list[Event] = []

    def ddl(sql: str) -> None:
        before, after = tracker.apply(sql)
        out.append(Event(Kind.DDL, tick(), query=sql, ddl_type=action_from_query(sql), table=after,
                         pre_table=before))

    ddl("CREATE DATABASE shop")
    for i in range(SHAPE_A):
        ddl(f"CREATE TABLE shop.a{i} (id bigint NOT NULL PRIMARY KEY, name varchar(32), amount decimal(12,2))")
    for i in range(SHAPE_B):
        ddl(f"CREATE TABLE shop.b{i} (a int NOT NULL, b varchar(8) NOT NULL, v double, PRIMARY KEY (a, b))")
    rows: dict[str, dict[tuple, dict]] = {f"a{i}": {} for i in range(SHAPE_A)} | {f"b{i}": {} for i in range(SHAPE_B)}
    serial = [0]

    def image(name: str, old: dict | None = None) -> dict:
        serial[0] += 1
        n = serial[0]
        if name.startswith("a"):
            img = {"id": old["id"] if old else n, "name": f"n{n}", "amount": f"{n % 997}.{n % 100:02d}"}
            if name == "a1" and "note" in tracker.get("shop", "a1").by_name:
                img["note"] = f"x{n % 7}" if n % 3 else None
            return img
        return {"a": old["a"] if old else n % 50, "b": old["b"] if old else f"k{n}", "v": n / 8 if n % 5 else None}

    def key(name: str, img: dict) -> tuple:
        return (img["id"],) if name.startswith("a") else (img["a"], img["b"])

    for tx in range(transactions):
        if tx == transactions // 3:
            ddl("ALTER TABLE shop.a1 ADD COLUMN note varchar(10)")
        if tx == transactions // 2:
            ddl("TRUNCATE TABLE shop.a2")
            rows["a2"].clear()
        commit = tick()
        touched: set[tuple] = set()  # TiDB folds a transaction's changes of one key into one: so does this
        for _ in range(rng.randint(1, 4)):
            name = rng.choice(sorted(rows))
            t = tracker.get("shop", name)
            have = {k: v for k, v in rows[name].items() if (name, k) not in touched}
            roll = rng.random()
            if not have or roll < 0.5:
                img = image(name)
                k = key(name, img)
                if k in rows[name]:
                    continue
                rows[name][k] = img
                touched.add((name, k))
                out.append(Event(Kind.INSERT, commit, table=t, after=img))
                continue
            k = rng.choice(sorted(have))
            old = rows[name].pop(k)
            touched.add((name, k))
            if roll < 0.75:
                new = image(name, old)
            elif roll < 0.85 and name.startswith("a"):  # the key itself changes
                new = {**image(name, old), "id": 100_000 + serial[0]}
            else:
                out.append(Event(Kind.DELETE, commit, table=t, before=old))
                continue
            rows[name][key(name, new)] = new
            touched.add((name, key(name, new)))
            out.append(Event(Kind.UPDATE, commit, table=t, before=old, after=new))
    return out


@pytest.mark.parametrize("committer", ["changefeed", "delta-rs", "Apache-Spark"])
def test_many_tables_of_one_shape_land_as_upstream_holds_them(spark, tmp_path: Path, monkeypatch,
                                                              committer: str) -> None:
    """Every way of committing from the driver: the log's file written directly (a local lake's plain tables),
    delta-rs (a local lake's others) and Delta's own classes (other file systems)."""
    if committer == "delta-rs":
        monkeypatch.setenv(DIRECT, "0")
        monkeypatch.setattr(driverfiles, "MAX_HELD_BYTES", -1)  # the shared job writes the files, into staging
    if committer == "Apache-Spark":
        monkeypatch.setenv(DELTA_RS, "0")
    events = _events()
    staged, live, lake = tmp_path / "staged", tmp_path / "live", tmp_path / "lake"
    produce(tmp_path, f"file://{staged}/t?protocol=canal-json&enable-tidb-extension=true&partition-num=3", events)
    options = {"enable-tidb-extension": "true"}
    steps = [{0: 0.4, 1: 0.3, 2: 0.35}, {0: 0.7, 1: 0.8, 2: 0.6}]
    if committer == "changefeed":
        _killed_while_creating(spark, staged, live, lake, options, monkeypatch)
    else:  # two deliveries do for the other committers: the first makes the tables (the ALTER and the TRUNCATE
        # among its commits), the second rewrites those it changes; the extra split is the changefeed one's to check
        steps = steps[1:]
    for upto in steps:
        copy_records(staged, live, "t", upto)
        consume(spark, live, lake, "canal-json", options)
        applied = read_progress(spark, str(lake), last=True)[0]["applied_ts"]
        assert applied > 0
        lake_equals(spark, lake, final_state(events, upto=applied))
    copy_records(staged, live, "t", {0: 1.0, 1: 1.0, 2: 1.0}, replay={1: (10, 60)})
    consume(spark, live, lake, "canal-json", options)
    lake_equals(spark, lake, final_state(events))

    from delta.tables import DeltaTable
    from deltalake import DeltaTable as RsTable

    # the shared job wrote these tables (its commits are Delta's overwrite, "WRITE"; a MERGE's are "MERGE")
    history = DeltaTable.forPath(spark, str(lake / "shop" / "a0")).history().collect()
    writes = [r["engineInfo"] or "" for r in history if r["operation"] == "WRITE"]
    assert writes and all(e.startswith(committer) for e in writes), [(r["operation"], r["engineInfo"]) for r in history]
    for name in ("a0", "a1", "b2"):
        path = str(lake / "shop" / name)
        ours = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
        theirs = RsTable(path).to_pyarrow_table().to_pylist()
        assert sorted(tuple(r.values()) for r in theirs) == ours


def _killed_while_creating(spark, staged: Path, live: Path, lake: Path, options: dict[str, str], monkeypatch) -> None:
    """The first micro-batch stopped inside its tables' first commits (each new table's creation and first rows are
    one commit, `RustLog.defer_many`): half the tables committed, the others neither made nor written. The test's
    next micro-batch (the restart) must land every table as upstream holds it."""
    from deltalake import DeltaTable as RsTable

    from changefeed.spark.apply.log_rs import RustLog
    from changefeed.spark.pipeline import apply_changes, read_changes

    real = RustLog.commit_all

    def half_then_killed(self: RustLog, items: list) -> list:
        real(self, items[:len(items) // 2])
        raise RuntimeError("killed before the other tables' commits")

    copy_records(staged, live, "t", {0: 0.4, 1: 0.3, 2: 0.35})
    monkeypatch.setattr(RustLog, "commit_all", half_then_killed)
    changes = read_changes(spark, f"file://{live}/t", "canal-json", options, schema_store=str(lake / "_schemas"))
    q = apply_changes(changes, str(lake), checkpoint=str(lake / "_cp"))
    with pytest.raises(Exception, match="killed before"):
        q.awaitTermination()
    monkeypatch.setattr(RustLog, "commit_all", real)
    logs = {t.name: sorted(os.listdir(t / "_delta_log")) for t in (lake / "shop").iterdir()}
    made = [n for n, files in logs.items() if files]
    assert 0 < len(made) < len(logs), logs  # some tables made by their first commit, the others not at all
    for n in made:
        assert logs[n] == [f"{0:020d}.json"] and RsTable(str(lake / "shop" / n)).history()[0]["operation"] == \
            "CREATE TABLE AS SELECT"
    assert not list((lake / "_changefeed" / "progress").glob("batch-*.json"))  # the batch never completed


def test_a_new_tables_first_rows_are_merged_on_the_driver(spark, tmp_path: Path, monkeypatch) -> None:
    """A database's first micro-batch: its new tables (each made by its first commit) hold no rows, so their
    groups are merged on the driver after the one job collecting their operations, not by the Spark job that
    joins them with the rows they hold (`MultiWriter.write`); the lake as upstream holds it."""
    from changefeed.spark.apply import drivermerge

    jobs: list[int] = []
    on_empty: list[bool] = []
    apply, write = drivermerge.apply, multiwrite.MultiWriter.write

    def merge(held, *args):  # noqa: ANN001, ANN002, ANN202
        out = apply(held, *args)
        if held.num_rows == 0:
            on_empty.append(out is not None)
        return out

    monkeypatch.setattr(drivermerge, "apply", merge)
    monkeypatch.setattr(multiwrite.MultiWriter, "write", lambda self, group, *a: (jobs.append(len(group)),
                                                                                  write(self, group, *a)))
    events = _events(seed=5, transactions=40)
    staged, live, lake = tmp_path / "staged", tmp_path / "live", tmp_path / "lake"
    produce(tmp_path, f"file://{staged}/t?protocol=canal-json&enable-tidb-extension=true&partition-num=3", events)
    copy_records(staged, live, "t", {0: 1.0, 1: 1.0, 2: 1.0})
    consume(spark, live, lake, "canal-json", {"enable-tidb-extension": "true"})
    progress = read_progress(spark, str(lake))
    assert len([r for r in progress if r["rows"]]) == 1  # (one micro-batch: the database's first)
    lake_equals(spark, lake, final_state(events, upto=progress[-1]["applied_ts"]))
    assert jobs == [], jobs
    assert on_empty and all(on_empty), on_empty  # (each group's new tables at once: `drivermerge.apply_all`)


def test_rows_kept_from_the_drivers_last_write_stand_for_the_tables_files(spark, kafka_broker: str,
                                                                         tmp_path: Path, monkeypatch) -> None:
    """Many micro-batches in one run (60 messages each, from Kafka): a table's next rewrite starts from the rows
    the driver wrote last (not read back), also after the column added to a1 and the TRUNCATE of a2 (the driver's
    own commits, the rows it holds following them); those rewrites are merged on the driver (`drivermerge`),
    groups of several tables and their windows' NULLs, key changes and deletes; the lake ends as upstream holds
    it. The first merge from kept rows the driver is made to decline takes Spark's job: once they are the JVM's
    local relation, the JVM no longer holds the Arrow IPC bytes they came in (py4j's iterator over them, left in a
    Python cycle)."""
    from changefeed.spark.apply import drivermerge
    from changefeed.spark.pipeline import apply_changes, read_changes

    hits, misses, merged = [], [], []
    kept: set[int] = set()  # the rows Kept gave (by identity)
    get, apply = driverfiles.Kept.get, drivermerge.apply

    def spy(self, path, version, files):  # noqa: ANN001, ANN202
        rows = get(self, path, version, files)
        (hits if rows is not None else misses).append(path.rsplit("/", 1)[-1])
        kept.add(id(rows))
        return rows

    gateway = spark.sparkContext._gateway
    bindings = gateway.java_gateway_server.getGateway().getBindings()

    def iterators() -> set[str]:  # JVM objects py4j keeps for Python that are iterators (one call: their toString)
        return set(re.findall(r"(o\d+)=<iterator>", spark._jvm.java.util.Objects.toString(bindings)))

    held, left = multiwrite.MultiWriter._held, []  # the first built from kept rows: its iterators Python still holds

    def held_spy(self, group, schema):  # noqa: ANN001, ANN202
        gc.disable()  # only the writer's own collections: an automatic one would hide what it leaves
        try:
            before, base = len(hits), iterators()
            out = held(self, group, schema)
            if not left and len(hits) > before:
                deadline = time.monotonic() + 3  # (one on its way out between the two reads: read again)
                while True:  # released by Python: queued for py4j's finalizer thread, or already gone from the JVM
                    queued = {t for _, t in list(getattr(gateway._gateway_client, "finalizer_deque", ()))}
                    held_on = iterators() - base - queued
                    if not held_on or time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
                left.append(len(held_on))
            return out
        finally:
            gc.enable()

    monkeypatch.setattr(driverfiles.Kept, "get", spy)
    monkeypatch.setattr(multiwrite.MultiWriter, "_held", held_spy)

    def merge(held, last, *args):  # noqa: ANN001, ANN002, ANN202
        if id(held) in kept and not left:  # the first from kept rows: to Spark's job
            declined.append(len(hits))
            return None
        out = apply(held, last, *args)
        merged.append(out is not None)
        return out

    declined: list[int] = []
    monkeypatch.setattr(drivermerge, "apply", merge)
    # (an event line needs a table: CREATE DATABASE left out, which the lake does not need)
    events = [e for e in _events(seed=3, transactions=200) if e.table is not None]
    topic = f"kept-{os.getpid()}-{int(time.time())}"
    uri = f"kafka://{kafka_broker}/{topic}?protocol=canal-json&enable-tidb-extension=true&partition-num=3"
    produce_events(events, uri, tmp_path)
    lake = tmp_path / "lake"
    changes = read_changes(spark, f"kafka://{kafka_broker}/{topic}", "canal-json", {"enable-tidb-extension": "true"},
                           schema_store=str(lake / "_schemas"), max_records_per_trigger=60)
    q = apply_changes(changes, str(lake), checkpoint=str(lake / "_cp"))
    q.awaitTermination()
    assert q.exception() is None
    lake_equals(spark, lake, final_state(events))
    assert len(hits) > SHAPE_A + SHAPE_B, (hits, misses)  # rewrites over several micro-batches
    # the column added to a1 and the TRUNCATE of a2 committed by the driver (`ddldriver`), the rows it holds
    # following them: neither table read back from its files after its DDL, any more than a0 without one
    assert misses.count("a1") == misses.count("a0") == misses.count("a2"), misses
    assert {_last_op(lake / "shop" / t, op) for t, op in (("a1", "ADD COLUMNS"), ("a2", "DELETE"))} == {True}
    assert len(declined) == 1 and left == [0], (declined, left)
    assert sum(merged) + 1 > SHAPE_A + SHAPE_B and all(merged), merged  # on the driver, but the one declined


def _last_op(table: Path, operation: str) -> bool:
    """Whether the table's log holds a commit of `operation` by this consumer (its engineInfo)."""
    for f in sorted((table / "_delta_log").glob("*.json")):
        info = next(a["commitInfo"] for a in map(orjson.loads, f.read_bytes().splitlines()) if "commitInfo" in a)
        if info["operation"] == operation:
            return info["engineInfo"].startswith("changefeed")
    return False


def test_a_table_rewritten_alone_holds_what_its_merge_would(spark, tmp_path: Path, monkeypatch) -> None:
    """The rewrite of a small table (no group) and Delta's MERGE of the same windows end with the same rows, with a
    column left out (except_column_list) and some updates applied as deletes (apply_as_deletes); the rewrites are
    merged on the driver (`drivermerge`: the tables' rows read in the job that collects their operations)."""
    from changefeed.spark.apply import drivermerge, multiwrite
    from changefeed.workload import generate

    merged: list[bool] = []
    apply = drivermerge.apply

    def merge(*args):  # noqa: ANN002, ANN202
        out = apply(*args)
        merged.append(out is not None)
        return out

    monkeypatch.setattr(drivermerge, "apply", merge)

    events = list(generate(seed=5, transactions=150))
    staged, live = tmp_path / "staged", tmp_path / "live"
    produce(tmp_path, f"file://{staged}/t?protocol=canal-json&enable-tidb-extension=true&partition-num=3", events)
    copy_records(staged, live, "t", {0: 1.0, 1: 1.0, 2: 1.0})
    options = {"enable-tidb-extension": "true"}
    kw = {"except_column_list": ["balance"], "apply_as_deletes": "kind = 'update' AND commit_ts % 3 = 0"}
    # what a consumer stopped between a shared write and its commits left staged: removed at the next start,
    # and only this app id's (another consumer of the lake may be writing its own)
    staging = tmp_path / "rewritten" / "_changefeed" / "staging"
    for app in ("changefeed", "other"):
        (staging / app / "0123abcd" / "__t=0").mkdir(parents=True)
        (staging / app / "0123abcd" / "__t=0" / "part-0.parquet").write_bytes(b"PAR1")
    consume(spark, live, tmp_path / "rewritten", "canal-json", options, **kw)
    assert sum(merged) >= 3, merged  # (a new table's first write too: it holds no rows)
    assert not (staging / "changefeed" / "0123abcd").exists()
    assert (staging / "other" / "0123abcd" / "__t=0" / "part-0.parquet").read_bytes() == b"PAR1"
    monkeypatch.setattr(multiwrite, "ALONE_MAX_BYTES", -1)
    monkeypatch.setattr(multiwrite, "MIN_TABLES", 1 << 30)
    consume(spark, live, tmp_path / "merged", "canal-json", options, **kw)

    from delta.tables import DeltaTable

    tables = sorted(p.name for p in (tmp_path / "merged" / "app").iterdir() if (p / "_delta_log").is_dir())
    assert tables == sorted(p.name for p in (tmp_path / "rewritten" / "app").iterdir()
                            if (p / "_delta_log").is_dir())
    ops = {"rewritten": set(), "merged": set()}
    for name in tables:
        a, b = (spark.read.format("delta").load(str(tmp_path / side / "app" / name))
                for side in ("rewritten", "merged"))
        assert sorted(a.columns) == sorted(b.columns) and "balance" not in a.columns
        b = b.select(*a.columns)
        assert a.count() == b.count() and not a.exceptAll(b).count() and not b.exceptAll(a).count(), name
        for side in ops:
            ops[side] |= {r["operation"] for r in
                          DeltaTable.forPath(spark, str(tmp_path / side / "app" / name)).history().collect()}
    assert "WRITE" in ops["rewritten"] and "MERGE" in ops["merged"] and "WRITE" not in ops["merged"], ops
    # a table with a TIMESTAMP_NTZ column (its Delta table feature) is rewritten too, and reads the same in delta-rs
    from deltalake import DeltaTable as RsTable

    events_path = str(tmp_path / "rewritten" / "app" / "audit")  # app.events, renamed
    assert "WRITE" in {r["operation"] for r in DeltaTable.forPath(spark, events_path).history().collect()}
    assert "timestampNtz" in (RsTable(events_path).protocol().reader_features or [])
    ours = spark.read.format("delta").load(events_path)
    theirs = RsTable(events_path).to_pyarrow_table().to_pylist()
    assert sorted(map(repr, (tuple(r[c] for c in ours.columns) for r in theirs))) \
        == sorted(map(repr, (tuple(r) for r in ours.collect())))
    # app.users: its RENAME COLUMN turned column mapping on; it stays rewritten (files under physical names, with
    # their statistics), never a MERGE, and reads the same in delta-rs (whose SQL reader follows column mapping)
    from deltalake import QueryBuilder

    users = str(tmp_path / "rewritten" / "app" / "users")
    history = sorted(DeltaTable.forPath(spark, users).history().collect(), key=lambda r: r["version"])
    renamed = next(r["version"] for r in history if r["operation"] == "RENAME COLUMN")
    after = [r["operation"] for r in history if r["version"] > renamed]
    assert RsTable(users).metadata().configuration.get("delta.columnMapping.mode") == "name"
    assert "WRITE" in after and "MERGE" not in after, after
    cols = ["id", "name", "remark"]  # (the renamed column: read by its physical name)
    ours = spark.read.format("delta").load(users)
    assert "remark" in ours.columns and "note" not in ours.columns
    theirs = pa.table(QueryBuilder().register("u", RsTable(users)).execute(
        "SELECT " + ", ".join(f'"{c}"' for c in cols) + " FROM u").read_all()).to_pylist()
    assert sorted(map(repr, (tuple(r[c] for c in cols) for r in theirs))) \
        == sorted(map(repr, (tuple(r) for r in ours.select(*cols).collect())))
    assert any(r["remark"] is not None for r in theirs)
    adds = [orjson.loads(line)["add"] for f in sorted((Path(users) / "_delta_log").glob("*.json"))
            for line in f.read_bytes().splitlines() if b'"add"' in line]
    physical = {f["name"]: f["metadata"]["delta.columnMapping.physicalName"]
                for f in orjson.loads(RsTable(users).schema().to_json())["fields"]}
    assert physical["remark"] == "note"  # (a column mapped after the fact keeps its name in the files)
    stats = orjson.loads(adds[-1]["stats"])  # by physical names, as Delta's protocol has them
    assert "note" in stats["nullCount"] and "remark" not in stats["nullCount"], stats
    # app.orders: its MODIFY COLUMN turned type widening on; it stays rewritten too (its old files, of the narrow
    # type, read as the wide one), never a MERGE, its new files of the wide type; equal to the merged side (above)
    orders = tmp_path / "rewritten" / "app" / "orders"
    log = {int(f.stem): [orjson.loads(line) for line in f.read_bytes().splitlines() if line.strip()]
           for f in (orders / "_delta_log").glob("*.json")}  # (read from the log: no Spark job)
    ops = {v: next(a["commitInfo"]["operation"] for a in acts if "commitInfo" in a) for v, acts in log.items()}
    widened = min(v for v, op in ops.items() if op == "CHANGE COLUMN")
    after = [op for v, op in sorted(ops.items()) if v > widened]
    assert "typeWidening" in (RsTable(str(orders)).protocol().reader_features or [])
    assert "WRITE" in after and "MERGE" not in after, after
    last = [a["add"]["path"] for a in log[max(v for v, op in ops.items() if op == "WRITE")] if "add" in a]
    assert last and all(str(pq.read_schema(orders / unquote(f)).field("amount").type) == "decimal128(12, 2)"
                        for f in last), last
