"""Moved to changefeed.sinkconfig (sink URIs and changefeed TOML); this name stays for old imports."""

from .sinkconfig import *  # noqa: F403
from .sinkconfig import (
    COMPRESSIONS,
    FILE_PARAMS,
    KAFKA_PARAMS,
    ChangefeedConfig,
    SinkURI,
    codec_options,
    load_changefeed_toml,
    parse_sink_uri,
    resolve,
)

__all__ = ["COMPRESSIONS", "FILE_PARAMS", "KAFKA_PARAMS", "ChangefeedConfig", "SinkURI", "codec_options",
           "load_changefeed_toml", "parse_sink_uri", "resolve"]
