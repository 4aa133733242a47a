"""Topic patterns: the Avro protocols write one topic per table, created as tables are."""

from __future__ import annotations

import re
from pathlib import Path

import orjson

from changefeed.spark.source import expand_topics, parse_source, pattern_regex


def test_glob_topics_become_a_kafka_pattern() -> None:
    rx = pattern_regex(["tidb_app_*", "audit?"])
    assert re.fullmatch(rx, "tidb_app_users") and re.fullmatch(rx, "audit1")
    assert not re.fullmatch(rx, "tidb_other_users") and not re.fullmatch(rx, "audit12")


def test_expand_keeps_named_topics_and_matches_patterns_once() -> None:
    existing = ["c_app_b", "c_app_a", "other", "c"]
    assert expand_topics(["c*", "other", "c_app_a"], existing) == ["c", "c_app_a", "c_app_b", "other"]
    assert expand_topics(["missing"], existing) == ["missing"]  # a named topic counts before it exists


def test_file_source_partitions_follow_new_topic_folders(tmp_path: Path) -> None:
    src = parse_source(f"file://{tmp_path}/changes*")
    assert src.partitions() == {}
    for topic, n in (("changes", 1), ("changes_app_users", 3), ("unrelated", 2)):
        (tmp_path / topic).mkdir()
        (tmp_path / topic / "meta.json").write_bytes(orjson.dumps({"partitions": n}))
    assert src.partitions() == {"changes": 1, "changes_app_users": 3}
