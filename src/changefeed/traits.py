"""What a change stream is like, decided once from its protocol and codec options.

Whether a stream carries watermarks, where its DDL go, what its changes and DDL carry, how its images hold
values: the consumer (the Spark pipeline, the job) asks `stream_traits(protocol, options)` rather than
testing protocol names itself, so each of these is spelled in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .config import build_config


@dataclass(frozen=True, slots=True)
class StreamTraits:
    protocol: str
    # the stream carries watermarks (TiCDC's resolved ts); real Debezium has none (TiCDC's debezium can
    # still be consumed with apply_changes(watermarks=True))
    watermarks: bool
    # each DDL is sent to every partition of its table's topic, after the rows before it (TiCDC's MQ sink
    # with the debezium protocols): without watermarks, the DDL copies are the barrier
    ddl_broadcast: bool
    # changes may carry a binlog position that orders them within a commit ts (real Debezium's source block)
    binlog_positions: bool
    # DDL messages carry table definitions (the avro protocol's carry only their text)
    ddl_definitions: bool
    # deletes may carry no commit ts (the avro protocol's tombstones)
    untimed_deletes: bool
    # one topic per table (the Avro protocols register a schema per topic): a consumer takes a pattern
    table_per_topic: bool
    # how decoded images hold values: "canal" (canal-json's own value text, its row messages being plain
    # JSON: not compressed, no claim-check handling) or "text" (types.text_of)
    text_dialect: str


def stream_traits(protocol: str, options: Mapping[str, str] | None = None) -> StreamTraits:
    """The traits of a `protocol` stream written with codec `options` (bad options raise ConfigError)."""
    cfg = build_config(protocol, dict(options or {}))
    debezium = protocol in ("debezium", "debezium-avro")
    if protocol == "canal-json":
        watermarks = cfg.enable_tidb_extension
    elif protocol == "simple":
        watermarks = True
    elif protocol == "avro":  # TiCDC's Avro encoder sends them with both options only
        watermarks = cfg.enable_tidb_extension and cfg.avro_enable_watermark
    elif protocol == "debezium-avro":  # the same, unless debezium-output-ddl-and-watermark=false stops them
        from .debezium.avro import sends_ddl_and_watermarks

        watermarks = sends_ddl_and_watermarks(cfg)
    else:
        watermarks = False
    plain_json = protocol == "canal-json" and cfg.large_message_handle_compression == "none" \
        and cfg.large_message_handle_option == "none"
    return StreamTraits(protocol=protocol, watermarks=bool(watermarks), ddl_broadcast=debezium,
                        binlog_positions=debezium, ddl_definitions=protocol != "avro",
                        untimed_deletes=protocol == "avro", table_per_topic=protocol in ("avro", "debezium-avro"),
                        text_dialect="canal" if plain_json else "text")
