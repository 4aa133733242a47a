"""Topic patterns: the Avro protocols write one topic per table, created as tables are."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

import orjson

from changefeed.spark.source import expand_topics, parse_source, pattern_regex, uncapped


def test_glob_topics_become_a_kafka_pattern() -> None:
    rx = pattern_regex(["tidb_app_*", "audit?"])
    assert re.fullmatch(rx, "tidb_app_users") and re.fullmatch(rx, "audit1")
    assert not re.fullmatch(rx, "tidb_other_users") and not re.fullmatch(rx, "audit12")


def test_expand_keeps_named_topics_and_matches_patterns_once() -> None:
    existing = ["c_app_b", "c_app_a", "other", "c"]
    assert expand_topics(["c*", "other", "c_app_a"], existing) == ["c", "c_app_a", "c_app_b", "other"]
    assert expand_topics(["missing"], existing) == ["missing"]  # a named topic counts before it exists


def test_a_cap_on_a_file_stream_is_said_not_silently_dropped(tmp_path: Path) -> None:
    said = uncapped(f"file://{tmp_path}/changes?protocol=canal-json", 500)
    assert said is not None and "--max-records-per-trigger 500" in said and "Kafka" in said
    assert f"file://{tmp_path}/changes" in said and "?protocol" not in said
    assert uncapped("kafka://127.0.0.1:9092/changes", 500) is None  # Spark's Kafka source bounds it
    assert uncapped(f"file://{tmp_path}/changes", None) is None


def test_file_source_partitions_follow_new_topic_folders(tmp_path: Path) -> None:
    src = parse_source(f"file://{tmp_path}/changes*")
    assert src.partitions() == {}
    for topic, n in (("changes", 1), ("changes_app_users", 3), ("unrelated", 2)):
        (tmp_path / topic).mkdir()
        (tmp_path / topic / "meta.json").write_bytes(orjson.dumps({"partitions": n}))
    assert src.partitions() == {"changes": 1, "changes_app_users": 3}


def test_kafka_partitions_seen_anew_each_call_though_the_admin_client_is_kept(kafka_broker: str) -> None:
    # a watermark is global only once every partition sent one: a partition added to the topic must show at the
    # next call, though the admin client (and its connection) is made once per broker list
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka_broker})
    topic = f"grow_{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(timeout=30)
    src = parse_source(f"kafka://{kafka_broker}/{topic}")
    assert src.partitions() == {topic: 2}
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(timeout=30)
    deadline = time.monotonic() + 30
    while src.partitions() != {topic: 3} and time.monotonic() < deadline:
        time.sleep(0.2)
    assert src.partitions() == {topic: 3}
