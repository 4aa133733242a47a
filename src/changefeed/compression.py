"""`large-message-handle-compression`: snappy (raw block, as klauspost/compress/snappy.Encode) and lz4
(frame format, as pierrec/lz4's Writer), the two TiCDC offers."""

from __future__ import annotations

CODECS = ("none", "snappy", "lz4")


def compress(codec: str, data: bytes) -> bytes:
    if codec == "none":
        return data
    import cramjam  # (loaded when a message is compressed: a plain codec command starts without it)

    if codec == "snappy":
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == "lz4":
        return bytes(cramjam.lz4.compress(data))
    raise ValueError(f"unsupported compression {codec!r}: expected one of {', '.join(CODECS)}")


def decompress(codec: str, data: bytes) -> bytes:
    if codec == "none":
        return data
    import cramjam

    try:
        if codec == "snappy":
            return bytes(cramjam.snappy.decompress_raw(data))
        if codec == "lz4":
            return bytes(cramjam.lz4.decompress(data))
    except cramjam.DecompressionError as e:
        raise ValueError(f"cannot {codec}-decompress the message: {e}") from None
    raise ValueError(f"unsupported compression {codec!r}: expected one of {', '.join(CODECS)}")
