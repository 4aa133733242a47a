"""What every protocol shares about message size: TiCDC's length rule, its claim-check envelope, the error."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

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


def fit_row(protocol: str, what: str, value: bytes, cfg: Any, render: Callable[[str | None], bytes],
            store: Callable[[bytes], str] | None, hint: str) -> bytes:
    """TiCDC's large-message handling of a row message: the full value when it fits, else (as configured)
    the handle-key-only value, or the full value stored for claim-check and a value that points at it.

    `render(location)` builds the smaller value (location None: handle-key-only); `store` writes a claim-check
    file and gives its location."""
    limit = cfg.max_message_bytes
    length = record_length(None, value)
    if length <= limit:
        return value
    if cfg.large_message_handle_option == "none":
        raise too_large(protocol, what, length, limit, hint)
    location = None
    if cfg.claim_check:
        assert store is not None
        location = store(value if cfg.claim_check_raw_value else claim_check_envelope(None, value))
    smaller = render(location)
    n = record_length(None, smaller)
    if n > limit:
        if location is None:
            raise too_large(protocol, what + " (only the handle-key columns)", n, limit)
        raise too_large(f"{protocol} claim-check", what, n, limit)
    return smaller
