"""The function Spark runs in `mapInArrow`, called directly on Arrow batches (no Spark needed).

What matters here is state across tasks: the schema store lets a later task (or a restarted consumer) decode
with definitions an earlier task learnt, and a replay of messages already decoded must come out the same.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow as pa
import pytest

from changefeed.codecs import make_encoder
from changefeed.config import build_config
from changefeed.spark.decode import decode_partitions
from changefeed.workload import generate

PROTOCOLS = [("canal-json", {"enable-tidb-extension": "true"}), ("simple", {})]


def messages(protocol: str, options: dict[str, str]) -> list[tuple[bytes | None, bytes | None]]:
    enc = make_encoder(build_config(protocol, options))
    out = []
    for ev in generate(seed=23, transactions=150):
        out += [(m.key, m.value) for m in enc.encode(ev)]
    return out


def run(protocol: str, options: dict[str, str], store: Path, msgs: list[tuple[bytes | None, bytes | None]],
        first_offset: int = 0) -> list[dict]:
    raw = pa.RecordBatch.from_pydict(
        {"topic": ["t"] * len(msgs), "partition": [0] * len(msgs),
         "offset": list(range(first_offset, first_offset + len(msgs))),
         "key": [k for k, _ in msgs], "value": [v for _, v in msgs]},
        schema=pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                          ("key", pa.binary()), ("value", pa.binary())]))
    rows: list[dict] = []
    for b in decode_partitions(protocol, options, str(store))(iter([raw])):
        rows += b.to_pylist()
    return rows


def comparable(r: dict) -> tuple:
    defs = tuple(orjson.loads(r[k]) if r[k] else None for k in ("table_def", "pre_table_def"))
    return (r["offset"], r["idx"], r["kind"], r["commit_ts"], r["ddl"], str(r["before"]), str(r["after"]),
            str(defs) if r["kind"] in ("ddl", "bootstrap") else None, r["error"])


@pytest.mark.parametrize(("protocol", "options"), PROTOCOLS, ids=[p[0] for p in PROTOCOLS])
def test_a_replay_after_a_restart_decodes_as_the_first_time(tmp_path: Path, protocol: str,
                                                            options: dict[str, str]) -> None:
    """A consumer that crashed re-reads messages whose DDL the schema store already holds the outcome of
    (here: RENAME COLUMN, ADD/DROP/MODIFY COLUMN, RENAME TABLE): each DDL must still carry the definitions
    before and after it, and each row its own columns, exactly as when first decoded."""
    msgs = messages(protocol, options)
    store = tmp_path / "schemas"
    first = run(protocol, options, store, msgs)
    assert first and not [r for r in first if r["kind"] == "error"]
    ddl = [r for r in first if r["kind"] == "ddl"]
    assert any(r["ddl"] and "RENAME COLUMN" in r["ddl"] for r in ddl)
    assert all(r["table_def"] for r in ddl if "ALTER TABLE" in (r["ddl"] or ""))
    for start in (0, len(msgs) // 3, 2 * len(msgs) // 3):
        again = run(protocol, options, store, msgs[start:], first_offset=start)
        want = [comparable(r) for r in first if r["offset"] >= start]
        got = [comparable(r) for r in again]
        assert got == want, next((f"offset {g[0]}: {g} != {w}" for g, w in zip(got, want, strict=False)
                                  if g != w), "lengths differ")


def test_a_ddl_on_every_partition_is_parsed_once_per_process_and_decodes_alike(tmp_path: Path, monkeypatch) -> None:
    """A DDL arrives once per partition (TiCDC broadcasts it): the partitions' decoders in one worker process share
    its parse and its definition's text (a database's first micro-batch holds a CREATE TABLE per table), and each
    partition's rows are what a process decoding it alone gives."""
    import changefeed.spark.decode as decode_mod
    import changefeed.sqlschema.tracker as tracker_mod

    msgs = messages("canal-json", {"enable-tidb-extension": "true"})[:150]  # (its tables' CREATE TABLE, ALTERs)
    monkeypatch.setattr(tracker_mod, "_CREATED", {})
    monkeypatch.setattr(decode_mod, "_DEF_JSON", {})
    checked = []
    real = decode_mod.table_from_json
    monkeypatch.setattr(decode_mod, "table_from_json", lambda obj: checked.append(1) or real(obj))
    per_partition, checks = [], []
    for i in range(3):
        per_partition.append(run("canal-json", {"enable-tidb-extension": "true"}, tmp_path / f"p{i}", msgs))
        checks.append(len(checked) - sum(checks))
    alone = per_partition[0]  # decoded with nothing parsed before in this process
    creates = [r for r in alone if r["kind"] == "ddl" and r["table_def"] and r["ddl"].startswith("CREATE TABLE")]
    assert creates and any(r["kind"] == "ddl" and r["ddl"].startswith("ALTER") for r in alone)
    assert not [r for r in alone if r["kind"] == "error"]
    for rows in per_partition[1:]:
        assert [comparable(r) for r in rows] == [comparable(r) for r in alone]
    # the 2nd and 3rd partitions' CREATE TABLE definitions were neither parsed nor read back again
    assert checks[1] == checks[2] == checks[0] - len(creates)


@pytest.mark.parametrize("reader", ["jvm", "raw"])
def test_canal_json_fast_readers_give_the_protocol_decoders_values(spark, tmp_path: Path, reader: str) -> None:
    """The fast canal-json readers (from_json on the JVM; the raw JSON in mapInArrow, read_changes' default)
    keep canal-json's own value text; they must give the same Spark values as the protocol's decoder (datums,
    then text) for every change of a workload with every type family."""
    from pyspark.sql import functions as F

    from changefeed.produce import open_producer
    from changefeed.spark.decode import decode
    from changefeed.spark.pipeline import read_changes, traits_of
    from changefeed.spark.source import parse_source, read_raw
    from changefeed.spark.types import typed
    from changefeed.upstream import UpstreamState

    uri = f"file://{tmp_path}/s/t?protocol=canal-json&enable-tidb-extension=true&partition-num=3"
    producer, transport, _ = open_producer(uri, ddl_to_all_partitions=True)
    state = UpstreamState()
    defs = {}
    for ev in generate(seed=31, transactions=200):
        producer.send(ev)
        state.apply(ev)
        if ev.table is not None and ev.table.columns:
            defs.setdefault((ev.table.schema, ev.table.table), []).append(ev.table)
    producer.close()
    transport.close()
    opts = {"enable-tidb-extension": "true"}
    src = f"file://{tmp_path}/s/t"
    jvm = read_changes(spark, src, "canal-json", opts, streaming=False, schema_store=str(tmp_path / "a"),
                       jvm_decode=reader == "jvm")
    assert traits_of(jvm).text_dialect == "canal"
    py = decode(read_raw(spark, parse_source(src), streaming=False), "canal-json", opts, str(tmp_path / "b"))
    jvm, py = jvm.cache(), py.cache()  # decoded once each, for the twenty comparisons below
    key = ["partition", "offset", "idx"]
    assert jvm.where("kind = 'error'").count() == 0
    assert sorted(tuple(r) for r in jvm.select(*key, "kind", "commit_ts").collect()) == \
        sorted(tuple(r) for r in py.select(*key, "kind", "commit_ts").collect())
    # a row carries its table's shape only where its partition first shows that shape (the minimal changelog keeps
    # such rows, the control job collects them): each partition's first row of a table has one, no shape twice
    changed = jvm.where("kind IN ('insert', 'update', 'delete')")
    shaped = changed.where("table_def IS NOT NULL").groupBy("partition", "table_def").agg(
        F.count("*").alias("n"), F.min(F.struct("offset", "idx")).alias("at")).collect()
    assert shaped and max(r["n"] for r in shaped) == 1, sorted(r["n"] for r in shaped)[-3:]
    firsts = changed.groupBy("partition", "table").agg(F.min(F.struct("offset", "idx")).alias("at")).collect()
    assert {(r["partition"], tuple(r["at"])) for r in firsts} <= {(r["partition"], tuple(r["at"])) for r in shaped}
    assert len(shaped) < changed.count() / 10
    compared = 0
    for (db, name), versions in defs.items():
        t = versions[-1]
        for img in ("before", "after"):
            cols = list(t.columns)
            a = jvm.where(F.col("table") == name).select(*key, *[typed(F.col(img)[c.name], c.type, dialect="canal")
                                                               .alias(c.name) for c in cols])
            b = py.where(F.col("table") == name).select(*key, *[typed(F.col(img)[c.name], c.type).alias(c.name)
                                                              for c in cols])
            diff = a.exceptAll(b).limit(3).collect()
            assert not diff, (db, name, img, diff)
            compared += a.count()
    jvm.unpersist()
    py.unpersist()
    assert compared > 500


def _avro_extra_rows() -> tuple[object, object, list[dict]]:
    """A table of the types the workload lacks (unsigned ints, BIT(64), VECTOR, BINARY, BLOB, CHAR, an ENUM
    member with a comma, edge values; no ENUM index 0, the '' of a non-strict insert, which TiCDC's avro encoder
    refuses), and one with a DECIMAL wider than Spark's (left to Python)."""
    from changefeed.model import Column, Index, TableInfo

    extra = TableInfo("app", "extra", columns=[
        Column("id", "int unsigned", nullable=False), Column("tu", "tinyint unsigned"), Column("mi", "mediumint"),
        Column("bu", "bigint unsigned"), Column("b64", "bit(64)"), Column("b3", "bit(3)"), Column("vec", "vector"),
        Column("bin", "binary(4)"), Column("bl", "blob"), Column("c", "char(3)"),
        Column("e", "enum('a','b,c','1')"), Column("s", "set('p','q','r')"), Column("f", "float"),
        Column("d", "double"), Column("j", "json"), Column("dt", "datetime(6)"), Column("ts", "timestamp(6)"),
        Column("tm", "time(3)"), Column("y", "year"), Column("dm", "decimal(38,10)"), Column("dz", "decimal(5,0)")],
        indexes=[Index("PRIMARY", ["id"], primary=True, unique=True)])
    wide = TableInfo("app", "wide", columns=[Column("id", "varbinary(8)", nullable=False),
                                             Column("w", "decimal(40,10)")],
                     indexes=[Index("PRIMARY", ["id"], primary=True, unique=True)])
    rows = []
    for i in range(60):
        k = i % 3
        rows.append({
            "id": 4294967295 - i if k == 0 else i, "tu": (255, 0, i)[k], "mi": (-8388608, 8388607, i)[k],
            "bu": (18446744073709551615, 9223372036854775808, i)[k], "b64": ((1 << 64) - 1, 0, i)[k], "b3": i % 8,
            "vec": f"[{i}.5,-1e+30,0]", "bin": bytes([i, 0, 255, 10]), "bl": bytes(range(i % 50)) * 3, "c": "日本",
            "e": i % 3 + 1, "s": i % 8, "f": (3.4028235e38, -1.5, 0.1)[k], "d": (1e-300, 2.5e22, -0.1)[k],
            "j": '{"a": [1, 2]}', "dt": "2024-02-29 23:59:59.999999", "ts": f"20{10 + i % 20}-01-02 03:04:05.000001",
            "tm": ("-838:59:59.000", "12:00:00.500")[i % 2], "y": (1901, 2155, 0)[k],
            "dm": ("-9999999999999999999999999999.9999999999", "0.0000000001", "12.5000000000")[k],
            "dz": str(i * 7 - 50)} | ({} if i % 5 else {"tu": None, "bl": None, "e": None, "s": None, "dt": None}))
    return extra, wide, rows


def test_avro_on_the_jvm_gives_the_python_decoders_rows_and_values(spark, schema_registry_url: str,
                                                                   tmp_path: Path) -> None:
    """The two avro decoders (from_avro with the registry's writer schemas; the Python one in mapInArrow) must
    give the same change rows (kinds, tables, commit ts, table definitions where they are written, dead
    letters) and the same Spark values for every column of every type family; malformed messages are dead
    letters on the JVM path too."""
    from pyspark.sql import functions as F

    from changefeed.eventline import table_from_json
    from changefeed.model import Event, Kind
    from changefeed.produce import open_producer
    from changefeed.spark.pipeline import read_changes, traits_of
    from changefeed.spark.types import typed

    extra, wide, rows = _avro_extra_rows()
    toml = tmp_path / "cf.toml"
    toml.write_text("[sink]\ndispatchers = [{matcher = ['*.*'], topic = \"t_{schema}_{table}\", "
                    "partition = \"index-value\"}]\n")
    opts = {"schema-registry": schema_registry_url, "enable-tidb-extension": "true", "avro-enable-watermark": "true"}
    query = "&".join(f"{k}={v}" for k, v in opts.items())
    producer, transport, _ = open_producer(f"file://{tmp_path}/s/t?protocol=avro&partition-num=2&{query}", toml,
                                           watermark_interval_ms=0)
    for ev in generate(seed=31, transactions=150):
        producer.send(ev)
    # dead letters: a value cut short (as the first message of its table in partition 0, and mid-stream in
    # partition 1), a key that is not in the Confluent wire format
    [good] = make_encoder(build_config("avro", opts), topic="t_{schema}_{table}").encode(
        Event(Kind.INSERT, 1 << 60, table=extra, after=rows[1]))
    cut = good.value[:12]
    transport.send("t_app_extra", 0, good.key, cut)
    ts = 1 << 60
    for i, row in enumerate(rows):
        ts += 1 << 18
        producer.send(Event(Kind.INSERT, ts, table=extra, after=row))
        if i % 4 == 1:
            ts += 1 << 18
            producer.send(Event(Kind.UPDATE, ts, table=extra, before=row, after=dict(rows[(i + 7) % 60], id=row["id"])))
        if i % 6 == 2:
            ts += 1 << 18
            producer.send(Event(Kind.DELETE, ts, table=extra, before=row))
        if i % 10 == 0:
            ts += 1 << 18
            producer.send(Event(Kind.INSERT, ts, table=wide, after={"id": bytes([i, 1]), "w": "-1234567890.5"}))
        if i == 30:
            transport.send("t_app_extra", 1, good.key, cut)
            transport.send("t_app_extra", 1, b"\x07junk", good.value)
    producer.close()
    transport.close()

    src = f"file://{tmp_path}/s/t_*"
    jvm = read_changes(spark, src, "avro", opts, streaming=False, schema_store=str(tmp_path / "a"), jvm_decode=True)
    py = read_changes(spark, src, "avro", opts, streaming=False, schema_store=str(tmp_path / "b"))
    jvm, py = jvm.persist(), py.persist()  # decoded once each, then compared many ways
    plan = jvm._jdf.queryExecution().optimizedPlan().toString()
    assert "from_avro" in plan and '"name": "extra"' in plan and '"name": "users"' in plan  # not all Python's
    dialect = traits_of(jvm).text_dialect

    plain = ["topic", "partition", "offset", "idx", "kind", "database", "table", "commit_ts", "schema_version",
             "position", "ddl", "ddl_type", "table_def", "pre_table_def", "error", "key", "value"]
    shape = [*plain, F.sort_array(F.map_keys("before")).alias("bk"), F.sort_array(F.map_keys("after")).alias("ak")]
    a = sorted(tuple(r) for r in jvm.select(*shape).collect())
    b = sorted(tuple(r) for r in py.select(*shape).collect())
    assert len(a) == len(b) and a == b, next((f"{x}\n!=\n{y}" for x, y in zip(a, b, strict=False) if x != y),
                                             "lengths differ")
    errors = {(r[0], r[1], r[2]): r for r in a if r[4] == "error"}
    assert len(errors) == 3 and all(r[14] and r[16] is not None for r in errors.values()), errors
    assert {r[4] for r in a} >= {"insert", "update", "delete", "ddl", "watermark"}

    # every column's Spark value, for every table definition the rows carried
    defs: dict[str, dict[tuple[str, str], object]] = {}
    for (d,) in py.where("table_def IS NOT NULL AND kind <> 'ddl'").select("table_def").distinct().collect():
        t = table_from_json(orjson.loads(d))
        for c in t.columns:
            defs.setdefault(t.table, {})[(c.name, c.mysql_type)] = c
    assert {"extra", "wide", "users", "orders"} <= set(defs)
    key = ["topic", "partition", "offset", "idx"]
    rows_of = dict(jvm.groupBy("table").count().collect())  # (one job for every table's count)
    compared = 0
    for name, cols in defs.items():
        va, vb = (df.where(F.col("table") == name).select(*key, *[
            typed(F.col(img)[c.name], c.type, dialect=dia).alias(f"{img}_{i}")  # type: ignore[attr-defined]
            for img in ("before", "after") for i, c in enumerate(cols.values())])
            for df, dia in ((jvm, dialect), (py, "text")))
        # a row of either side the other lacks (both differences in one job)
        assert not va.exceptAll(vb).union(vb.exceptAll(va)).limit(1).collect(), name
        compared += rows_of[name] * len(cols)
    assert compared > 5000
    jvm.unpersist()
    py.unpersist()
