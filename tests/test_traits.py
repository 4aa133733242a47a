"""A stream's traits, decided in one place from its protocol and options; a decoder's abilities, declared."""

from __future__ import annotations

import pytest

from changefeed.codecs import Buffering, Remembering, make_decoder
from changefeed.config import ConfigError, build_config
from changefeed.traits import stream_traits


@pytest.mark.parametrize(("protocol", "options", "watermarks"), [
    ("canal-json", {}, False), ("canal-json", {"enable-tidb-extension": "true"}, True),
    ("simple", {}, True), ("avro", {"enable-tidb-extension": "true"}, False),
    ("avro", {"enable-tidb-extension": "true", "avro-enable-watermark": "true"}, True),
    ("debezium", {}, False), ("debezium-avro", {}, False),
    # TiCDC's debezium Avro encoder sends watermarks (and DDL) only with both options, as its avro encoder does
    ("debezium-avro", {"enable-tidb-extension": "true"}, False),
    ("debezium-avro", {"enable-tidb-extension": "true", "avro-enable-watermark": "true"}, True),
    ("debezium-avro", {"enable-tidb-extension": "true", "avro-enable-watermark": "true",
                       "debezium-output-ddl-and-watermark": "false"}, False)])
def test_watermarks_follow_protocol_and_options(protocol, options, watermarks):
    assert stream_traits(protocol, options).watermarks is watermarks


def test_what_each_protocol_carries():
    t = {p: stream_traits(p) for p in ("canal-json", "simple", "avro", "debezium", "debezium-avro")}
    assert [p for p, x in t.items() if x.ddl_broadcast] == ["debezium", "debezium-avro"]
    assert [p for p, x in t.items() if x.binlog_positions] == ["debezium", "debezium-avro"]
    assert [p for p, x in t.items() if not x.ddl_definitions] == ["avro"]
    assert [p for p, x in t.items() if x.untimed_deletes] == ["avro"]
    assert [p for p, x in t.items() if x.table_per_topic] == ["avro", "debezium-avro"]
    assert [p for p, x in t.items() if x.text_dialect == "canal"] == ["canal-json"]
    # canal-json's own text only when its row messages are plain JSON
    assert stream_traits("canal-json", {"large-message-handle-compression": "lz4"}).text_dialect == "text"
    with pytest.raises(ConfigError):
        stream_traits("canal-json", {"enable-tidb-extension": "maybe"})


def test_guarded_decoders_declare_their_inner_decoders_abilities():
    simple, canal = make_decoder(build_config("simple")), make_decoder(build_config("canal-json"))
    assert isinstance(simple.inner, Buffering) and isinstance(simple.inner, Remembering)
    assert isinstance(canal.inner, Remembering) and not isinstance(canal.inner, Buffering)
    assert simple.remembers and canal.remembers
    assert canal.pending == 0 and canal.take_pending() == [] and canal.finish() is None  # nothing held, ever


def test_changes_not_from_read_changes_need_their_traits_given():
    pytest.importorskip("pyspark")
    from changefeed.spark.pipeline import traits_of

    with pytest.raises(ValueError, match="traits=stream_traits"):
        traits_of(object())  # type: ignore[arg-type]
