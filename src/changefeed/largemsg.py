"""What every protocol shares about message size: TiCDC's length rule, its claim-check envelope, the error."""

from __future__ import annotations

import base64

from . import gojson
from .errors import MessageTooLarge

# sarama's per-record overhead, which TiCDC adds to key + value when checking max-message-bytes
MAX_RECORD_OVERHEAD = 5 * 5 + 10 + 1


def record_length(key: bytes | None, value: bytes | None) -> int:
    return len(key or b"") + len(value or b"") + MAX_RECORD_OVERHEAD


def too_large(protocol: str, what: str, length: int, limit: int, hint: str = "") -> MessageTooLarge:
    return MessageTooLarge(f"{protocol} message for {what} is {length} bytes, over max-message-bytes={limit}"
                           + (f"; {hint}" if hint else ""))


def claim_check_envelope(key: bytes | None, value: bytes) -> bytes:
    """What TiCDC stores in a claim-check file: Go's JSON of {Key, Value []byte} (base64 strings)."""
    return gojson.dumps_std({
        "key": None if key is None else base64.b64encode(key).decode("ascii"),
        "value": base64.b64encode(value).decode("ascii"),
    })
