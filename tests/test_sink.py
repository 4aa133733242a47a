"""Sink URIs and changefeed TOML as TiCDC spells them."""

from __future__ import annotations

from pathlib import Path

import pytest

from changefeed.config import ConfigError
from changefeed.sink import load_changefeed_toml, parse_sink_uri, resolve

GOLDEN = Path(__file__).parent / "golden"


def test_kafka_uri():
    s = parse_sink_uri("kafka://127.0.0.1:9092,127.0.0.1:9093/topic-name?protocol=canal-json&partition-num=6"
                       "&replication-factor=1&max-message-bytes=1048576&compression=zstd&enable-tidb-extension=true"
                       "&kafka-version=2.4.0&sasl-user=u&sasl-password=p%40ss&enable-tls=true")
    assert (s.scheme, s.brokers, s.topic, s.protocol) == ("kafka", ["127.0.0.1:9092", "127.0.0.1:9093"], "topic-name",
                                                           "canal-json")
    assert (s.partition_num, s.replication_factor, s.compression) == (6, 1, "zstd")
    assert s.codec_options == {"max-message-bytes": "1048576", "enable-tidb-extension": "true"}
    assert s.kafka["sasl-password"] == "p@ss" and s.kafka["enable-tls"] == "true"


def test_file_uri():
    s = parse_sink_uri("file:///tmp/lake/changes?protocol=simple&encoding-format=avro")
    assert s.scheme == "file" and s.folder == Path("/tmp/lake") and s.topic == "changes"
    assert s.codec_options == {"encoding-format": "avro"}


@pytest.mark.parametrize(("uri", "message"), [
    ("kafka://h:1/t?protocol=canal-json&partition-numb=3", "unknown parameter(s) partition-numb"),
    ("kafka://h:1/t?partition-num=3", "protocol= is missing"),
    ("kafka://h:1/t?protocol=canal-json&compression=brotli", "compression='brotli'"),
    ("kafka://h:1/t?protocol=canal-json&partition-num=0", "partition-num must be positive"),
    ("mysql://h/t?protocol=canal-json", "scheme 'mysql'"),
    ("file:///tmp/dir/?protocol=canal-json", "last path segment is the topic"),
])
def test_bad_uris_are_named(uri, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        parse_sink_uri(uri)


def test_ticdc_documentation_example_config():
    cf = load_changefeed_toml(GOLDEN / "ticdc_changefeed.toml")
    assert cf.protocol == "canal-json"
    assert cf.codec_options["large-message-handle-option"] == "handle-key-only"
    assert [r.partitioner.kind for r in cf.rules] == ["index-value", "ts", "index-value", "columns", "table"]
    assert cf.rules[2].partitioner.index == "index1" and cf.rules[3].partitioner.columns == ["id", "a"]
    assert cf.rules[0].matcher.match("test2", "x") and not cf.rules[0].matcher.match("test5", "x")
    sink, cfg, router = resolve("kafka://127.0.0.1:9092/default-topic?protocol=canal-json&enable-tidb-extension=true",
                                GOLDEN / "ticdc_changefeed.toml")
    assert cfg.handle_key_only and cfg.enable_tidb_extension
    assert router.topic("test3", "orders") == "test3_orders" and router.topic("other", "t") == "default-topic"


def test_unsupported_toml_keys_are_named(tmp_path: Path):
    p = tmp_path / "c.toml"
    p.write_text('[sink]\nprotocol = "canal-json"\ntransaction-atomicity = "none"\n')
    with pytest.raises(ConfigError, match="unsupported key\\(s\\) transaction-atomicity"):
        load_changefeed_toml(p)
    p.write_text('[sink]\ndispatchers = [{matcher = ["a.*"], partiton = "ts"}]\n')
    with pytest.raises(ConfigError, match="partiton"):
        load_changefeed_toml(p)
