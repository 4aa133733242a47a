"""The main job end to end: workload -> encoder -> transport (files, Kafka) -> Spark -> Delta -> verify.

The expected state comes from the workload's own bookkeeping (upstream.py, plain Python), never from the
pipeline; the stream holds every DDL kind the workload has (create table, add/drop/rename/modify column,
create/drop index, truncate, rename table, drop table)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from changefeed.eventline import EventReader, read_lines
from changefeed.job import RunOptions, run
from changefeed.upstream import final_state
from changefeed.workload import CREATE, LATER, Workload

DDL_KINDS = {"CREATE TABLE", "ADD COLUMN", "DROP COLUMN", "RENAME COLUMN", "MODIFY COLUMN", "CREATE INDEX",
             "DROP INDEX", "TRUNCATE TABLE", "RENAME TABLE", "DROP TABLE"}


def test_the_workload_has_every_ddl_kind_and_its_expected_state_is_its_own() -> None:
    text = " ".join([*CREATE, *(q for _, qs in LATER for q in qs)])
    assert all(k in text for k in DDL_KINDS), [k for k in DDL_KINDS if k not in text]
    w = Workload(seed=5, transactions=400, live_rows=30)
    events = list(w)
    assert [e.ddl_type for e in events if e.query and "RENAME TABLE" in e.query] == ["ActionRenameTable"]
    assert max(len(t.rows) for t in w.state.tables.values()) <= 30  # bounded, whatever the length
    again = final_state(events)
    assert {k: t.rows for k, t in again.tables.items()} == {k: t.rows for k, t in w.state.tables.items()}
    assert [e.commit_ts for e in events] == sorted(e.commit_ts for e in events)
    assert [e.commit_ts for e in Workload(seed=5, transactions=400, live_rows=30)] == [e.commit_ts for e in events]


def test_avro_consumer_with_a_users_config_reads_its_dispatchers_topics(tmp_path: Path) -> None:
    """Not every topic of the broker or folder: the sink's topic and each dispatcher's topic expression."""
    from changefeed.job import table_topics

    toml = tmp_path / "cf.toml"
    toml.write_text("[sink]\ndispatchers = [{matcher = ['app.*'], topic = 'app_{schema}_{table}'},\n"
                    "  {matcher = ['*.*'], topic = 'all-{schema}.{table}-v1'}]\n")
    opts = RunOptions(protocol="avro", work=tmp_path, config=toml)
    config, uri = table_topics("kafka://127.0.0.1:9092/cf?protocol=avro", "avro", opts)
    assert config == str(toml)
    assert uri == "kafka://127.0.0.1:9092/cf,app_*_*,all-*.*-v1"
    config, uri = table_topics("file:///data/cf_*?protocol=avro", "avro", opts)
    assert uri == "file:///data/cf_*"  # a pattern the user gave stays
    from changefeed.spark.source import expand_topics

    got = expand_topics(uri.rsplit("/", 1)[1].split(","), ["cf_a", "other", "cf_b"])
    assert got == ["cf_a", "cf_b"]


def check(rep) -> None:
    v = rep.verification
    assert v is not None
    bad = [t for t in v.tables if not t.ok]
    assert not bad, [(t.name, t.expected, t.actual, t.missing, t.extra, t.problem, t.samples[:2]) for t in bad]
    assert {t.name for t in v.tables} == {"app.users", "app.orders", "app.audit"}
    assert rep.dead_letters == 0
    assert rep.chart is not None and rep.chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the expected-state file verify takes is the same state
    reader = EventReader()
    with open(rep.expected, "rb") as f:
        st = final_state(reader.parse(line) for _, line in read_lines(f))
    assert sum(len(t.rows) for t in st.tables.values()) == sum(t.expected for t in v.tables)


FILE_CASES = [("canal-json", {"enable-tidb-extension": "true"}), ("simple", {}),
              ("simple", {"encoding-format": "avro"}), ("debezium", {})]


@pytest.mark.parametrize(("protocol", "options"), FILE_CASES,
                         ids=["canal-json", "simple-json", "simple-avro", "debezium"])
def test_run_over_files(spark, tmp_path: Path, protocol: str, options: dict[str, str]) -> None:
    rep = run(spark, RunOptions(protocol=protocol, options=options, work=tmp_path, transactions=60, seed=11))
    check(rep)
    assert rep.ddl >= len(CREATE) + sum(len(q) for _, q in LATER) - 1  # CREATE DATABASE may be a no-op


# debezium-avro: TiCDC sends its DDL only with the extension and avro-enable-watermark, and refuses a BIGINT
# UNSIGNED above 2^63-1 (the workload's edge values) in the default long mode
AVRO_CASES = [("avro", {"enable-tidb-extension": "true", "avro-enable-watermark": "true"}),
              ("debezium-avro", {"enable-tidb-extension": "true", "avro-enable-watermark": "true",
                                 "avro-bigint-unsigned-handling-mode": "string"})]


@pytest.mark.parametrize(("protocol", "options"), AVRO_CASES, ids=["avro", "debezium-avro"])
def test_run_avro_over_files(spark, schema_registry_url: str, tmp_path: Path, protocol: str,
                             options: dict[str, str]) -> None:
    """One topic per table (created as tables are), read back through a topic pattern; avro's DDL carry only
    their text, so the consumer follows the table definitions from the statements."""
    opts = {**options, "schema-registry": schema_registry_url}
    rep = run(spark, RunOptions(protocol=protocol, options=opts, work=tmp_path, transactions=60, seed=13))
    check(rep)
    topics = {d.name for d in (tmp_path / "stream").iterdir() if d.is_dir()}
    assert {"changes_app_users", "changes_app_orders", "changes_app_audit"} <= topics, topics


# Kafka's micro-batches are uneven: one partition runs ahead of another. With watermarks the consumer applies
# up to the slowest; without (debezium, debezium-avro) a DDL waits for every partition's copy of it. (The simple
# protocol's decoding is the files run's; over Kafka it would add nothing canal-json and avro do not cover.)
@pytest.mark.parametrize(("protocol", "options"), [("canal-json", {"enable-tidb-extension": "true"}), AVRO_CASES[0],
                                                   ("debezium", {}), AVRO_CASES[1]],
                         ids=["canal-json", "avro", "debezium", "debezium-avro"])
def test_run_over_kafka(spark, kafka_broker: str, schema_registry_url: str, tmp_path: Path, protocol: str,
                        options: dict[str, str]) -> None:
    if protocol in ("avro", "debezium-avro"):  # a topic per table, made mid-stream: the consumer takes a pattern
        options = {**options, "schema-registry": schema_registry_url}
    q = "&".join(f"{k}={v}" for k, v in options.items())
    uri = f"kafka://{kafka_broker}/run-{protocol}-{os.getpid()}?protocol={protocol}&partition-num=3" + \
        (f"&{q}" if q else "")
    rep = run(spark, RunOptions(protocol=protocol, options=options, sink_uri=uri, work=tmp_path, transactions=60,
                                seed=12, max_records_per_trigger=150))
    check(rep)
    assert rep.batches >= 2


# the README's first command (`changefeed run`: its report, chart and per-batch lines) is run in a fresh clone by
# tests/cli/test_newcomer.py::test_a_fresh_clone_set_up_and_run
