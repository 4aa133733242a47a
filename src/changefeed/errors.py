"""Errors that name where the bad input is: which message (or line), which field, which byte offset."""

from __future__ import annotations

import orjson


class ChangefeedError(Exception):
    """Base of the errors the CLI reports as one readable line."""


class DecodeError(ChangefeedError):
    """Input that cannot be decoded.

    `where` is the message (1-based line number in a file, or a topic/partition/offset), `field` the
    JSON path of the bad field, `offset` the byte offset in the message where it was seen.
    """

    def __init__(
        self,
        reason: str,
        *,
        where: str | None = None,
        field: str | None = None,
        offset: int | None = None,
    ) -> None:
        self.reason = reason
        self.where = where
        self.field = field
        self.offset = offset
        super().__init__(self._text())

    def _text(self) -> str:
        parts = []
        if self.where is not None:
            parts.append(self.where)
        if self.field is not None:
            parts.append(f"field {self.field}")
        if self.offset is not None:
            parts.append(f"offset {self.offset}")
        prefix = ", ".join(parts)
        return f"{prefix}: {self.reason}" if prefix else self.reason

    def located(self, where: str) -> DecodeError:
        """The same error, told which message it came from."""
        return DecodeError(self.reason, where=where, field=self.field, offset=self.offset)


class EncodeError(ChangefeedError):
    """An event that cannot be encoded in the chosen protocol."""


class MessageTooLarge(EncodeError):
    """TiCDC's ErrMessageTooLarge."""


def field_offset(raw: bytes, name: str) -> int | None:
    """Byte offset of a JSON key in a raw message, to point at a bad field."""
    i = raw.find(b'"' + name.encode("utf-8", "replace") + b'"')
    return i if i >= 0 else None


def json_object(raw: bytes | str, what: str) -> dict:
    """`raw` parsed as a JSON object; otherwise a DecodeError at the byte where it went wrong."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise DecodeError(f"not JSON: {e.msg}", offset=e.pos) from None
    if not isinstance(obj, dict):
        raise DecodeError(f"{what} is a JSON object", offset=0)
    return obj
