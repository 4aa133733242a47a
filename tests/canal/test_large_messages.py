"""max-message-bytes and the large-message options, as TiCDC's canal-json encoder handles them."""

from __future__ import annotations

import base64
from pathlib import Path

import cramjam
import orjson
import pytest

from changefeed.canal import CanalJSONDecoder, CanalJSONEncoder
from changefeed.codecs import make_decoder, make_encoder
from changefeed.config import ConfigError
from changefeed.errors import MessageTooLarge
from changefeed.model import Column, Event, Index, Kind, TableInfo

TABLE = TableInfo(
    "test", "big",
    [Column("id", "int", nullable=False, primary_key=True), Column("k", "varchar(10)", nullable=False),
     Column("blob", "longblob", nullable=True)],
    [Index("PRIMARY", ["id"], primary=True, unique=True)],
)
BIG = Event(kind=Kind.INSERT, commit_ts=429918007904436226, table=TABLE,
            after={"id": 7, "k": "key", "blob": bytes(range(256)) * 40})
SMALL = Event(kind=Kind.INSERT, commit_ts=429918007904436226, table=TABLE, after={"id": 8, "k": "x", "blob": b"y"})


def test_too_large_without_option_is_a_clear_error(cfg):
    enc = CanalJSONEncoder(cfg(max_message_bytes="4096"))
    with pytest.raises(MessageTooLarge, match=r"test\.big .* over max-message-bytes=4096"):
        enc.encode(BIG)
    assert len(enc.encode(SMALL)) == 1


def test_limit_counts_kafka_record_overhead(cfg):
    value = CanalJSONEncoder(cfg(), clock_ms=lambda: 1).encode(SMALL)[0].value
    exact = len(value) + 36  # sarama's record overhead, as TiCDC counts it
    assert CanalJSONEncoder(cfg(max_message_bytes=str(exact)), clock_ms=lambda: 1).encode(SMALL)
    with pytest.raises(MessageTooLarge):
        CanalJSONEncoder(cfg(max_message_bytes=str(exact - 1)), clock_ms=lambda: 1).encode(SMALL)


def test_handle_key_only_needs_the_extension(cfg):
    with pytest.raises(ConfigError, match="enable-tidb-extension"):
        cfg(large_message_handle_option="handle-key-only")


def test_handle_key_only(cfg):
    c = cfg(enable_tidb_extension="true", max_message_bytes="4096", large_message_handle_option="handle-key-only")
    [m] = CanalJSONEncoder(c).encode(BIG)
    msg = orjson.loads(m.value)
    assert msg["data"] == [{"id": "7"}]
    assert msg["sqlType"] == {"id": 4} and msg["mysqlType"] == {"id": "int"}
    assert msg["_tidb"] == {"commitTs": 429918007904436226, "onlyHandleKey": True}
    [ev] = CanalJSONDecoder(c).decode(m.value)
    assert ev.after == {"id": 7}  # the rest must be read from upstream: TiCDC's consumer queries TiDB
    # a small message is untouched
    assert "onlyHandleKey" not in orjson.loads(CanalJSONEncoder(c).encode(SMALL)[0].value)["_tidb"]


def test_delete_only_output_handle_key_columns_has_no_marker(cfg):
    c = cfg(enable_tidb_extension="true", delete_only_output_handle_key_columns="true")
    ev = Event(kind=Kind.DELETE, commit_ts=5 << 18, table=TABLE, before=SMALL.after)
    msg = orjson.loads(CanalJSONEncoder(c).encode(ev)[0].value)
    assert msg["data"] == [{"id": "8"}] and msg["old"] is None
    assert msg["_tidb"] == {"commitTs": 5 << 18}


def test_claim_check_round_trip(cfg, tmp_path: Path):
    uri = f"file://{tmp_path}/claims"
    c = cfg(enable_tidb_extension="true", max_message_bytes="4096", large_message_handle_option="claim-check",
            claim_check_storage_uri=uri)
    [m] = make_encoder(c).encode(BIG)
    msg = orjson.loads(m.value)
    loc = msg["_tidb"]["claimCheckLocation"]
    assert loc.startswith(uri + "/") and loc.endswith(".json")
    assert msg["data"] == [{"id": "7"}] and "onlyHandleKey" not in msg["_tidb"]
    stored = orjson.loads(Path(loc[len("file://"):]).read_bytes())
    assert stored["key"] is None  # TiCDC's envelope: Go's []byte fields as base64
    assert orjson.loads(base64.b64decode(stored["value"]))["data"][0]["id"] == "7"
    [ev] = make_decoder(cfg()).decode(m.value)
    assert ev.after == BIG.after


@pytest.mark.parametrize("codec", ["snappy", "lz4"])
def test_compression_applies_to_every_message(cfg, codec):
    c = cfg(large_message_handle_compression=codec)
    [m] = CanalJSONEncoder(c).encode(SMALL)
    raw = bytes(cramjam.snappy.decompress_raw(m.value) if codec == "snappy" else cramjam.lz4.decompress(m.value))
    assert orjson.loads(raw)["data"] == [{"id": "8", "k": "x", "blob": "y"}]
    [ev] = CanalJSONDecoder(c).decode(m.value)
    assert ev.after == SMALL.after
