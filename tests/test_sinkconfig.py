"""Sink URIs and changefeed TOML as TiCDC spells them."""

from __future__ import annotations

from pathlib import Path

import pytest

from changefeed.config import ConfigError
from changefeed.sinkconfig import load_changefeed_toml, parse_sink_uri, resolve

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
    p.write_text('[sink]\nprotocol = "canal-json"\ntransaction-atomicty = "none"\n')
    with pytest.raises(ConfigError, match="unsupported key\\(s\\) transaction-atomicty"):
        load_changefeed_toml(p)
    p.write_text('[sink]\ndispatchers = [{matcher = ["a.*"], partiton = "ts"}]\n')
    with pytest.raises(ConfigError, match="partiton"):
        load_changefeed_toml(p)


# TiCDC's codec config (pkg/sink/codec/common/config.go): the sink URI's query is bound to the parameters it
# knows, the rest ignored; enable-tidb-extension with another protocol than canal-json/avro is logged as ignored;
# avro's handling modes are only validated for avro.
def test_sink_uri_options_are_taken_as_ticdc_takes_them(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    caplog.set_level(logging.WARNING)
    _, cfg, _ = resolve("kafka://127.0.0.1:9092/t?protocol=simple&enable-tidb-extension=false")
    assert cfg.protocol == "simple" and not cfg.enable_tidb_extension
    assert "enable-tidb-extension is ignored for protocol simple" in caplog.text
    _, cfg, _ = resolve("kafka://127.0.0.1:9092/t?protocol=canal-json&avro-decimal-handling-mode=bogus"
                        "&kafka-version=2.4.0&partition-numb=3")
    assert cfg.avro_decimal_handling_mode == "precise"  # not avro: never read, never validated
    assert "partition-numb ignored" in caplog.text
    # what TiCDC refuses stays refused
    with pytest.raises(ConfigError, match="expected true or false"):
        resolve("kafka://127.0.0.1:9092/t?protocol=canal-json&enable-tidb-extension=maybe")
    with pytest.raises(ConfigError, match="expected one of precise, string"):
        resolve("kafka://127.0.0.1:9092/t?protocol=avro&schema-registry=http://r:8081"
                "&avro-decimal-handling-mode=bogus")
    with pytest.raises(ConfigError, match="max-message-bytes must be positive"):
        resolve("kafka://127.0.0.1:9092/t?protocol=canal-json&max-message-bytes=0")


def test_ticdc_changefeed_toml_keys_for_other_downstreams_are_taken(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    import logging

    caplog.set_level(logging.WARNING)
    p = tmp_path / "c.toml"
    p.write_text('force-replicate = false\nenable-old-value = true\n[integrity]\nintegrity-check-level = "none"\n'
                 'corruption-handle-level = "warn"\n[sink]\nprotocol = "canal-json"\ntransaction-atomicity = "none"\n'
                 'encoder-concurrency = 32\nenable-kafka-sink-v2 = false\n[sink.csv]\ndelimiter = ","\n'
                 '[sink.kafka-config.codec-config]\nmax-batch-size = 16\n')
    cf = load_changefeed_toml(p)
    assert cf.protocol == "canal-json"
    assert "encoder-concurrency" in caplog.text and "max-batch-size ignored" in caplog.text
    p.write_text('[sink]\nprotocol = "canal-json"\ntransaction-atomicity = "table"\n')
    with pytest.raises(ConfigError, match="table level atomicity is not supported by kafka scheme"):
        load_changefeed_toml(p)
    p.write_text('[integrity]\nintegrity-check-level = "strict"\n')
    with pytest.raises(ConfigError, match="integrity-check-level"):
        load_changefeed_toml(p)
    p.write_text('force-replicate = true\n[sink]\nprotocol = "avro"\n')
    with pytest.raises(ConfigError, match="force-replicate must be disabled, when using avro protocol"):
        resolve("kafka://127.0.0.1:9092/t?protocol=avro&schema-registry=http://r:8081", p)
