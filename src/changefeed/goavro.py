"""Avro datums as goavro writes them: the library both of TiCDC's Avro encoders (avro, debezium-avro) use.

fastavro writes a `decimal` one byte longer for -2^(8k-1) (-128 as ff80); a schema registry reader does not care,
but byte-for-byte output does, so both encoders hand fastavro these bytes with the logical type dropped.
"""

from __future__ import annotations


def signed_bytes(n: int) -> bytes:
    """goavro's toSignedBytes: the fewest big-endian two's-complement bytes (0 is one zero byte)."""
    return n.to_bytes(((n if n >= 0 else ~n).bit_length() // 8) + 1, "big", signed=True)
