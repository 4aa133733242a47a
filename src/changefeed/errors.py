"""Every error changefeed raises, under one root: `ChangefeedError`.

The modules that raise them re-export them where they were first defined (`from changefeed.config import
ConfigError` keeps working). Errors about values and type strings are also `ValueError`s, because the code that
reads values catches `ValueError` around them. Decode errors name where the bad input is: which message (or
line), which field, which byte offset. This module imports no other changefeed module.
"""

from __future__ import annotations

import orjson


class ChangefeedError(Exception):
    """Base of every changefeed error; the CLI reports it as one readable line (--debug adds the traceback)."""


# -- configuration -----------------------------------------------------------------------------------------


class ConfigError(ChangefeedError):
    """An option, URI, file or protocol that cannot be used; the message says which and why."""


# -- messages and events -----------------------------------------------------------------------------------


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
    """An event that cannot be encoded in the chosen protocol (a missing image, table, storage, schema)."""


class MessageTooLarge(EncodeError):
    """A message over max-message-bytes that its large-message handling cannot shrink (TiCDC's ErrMessageTooLarge)."""


# -- types, values and DDL ---------------------------------------------------------------------------------


class TypeParseError(ChangefeedError, ValueError):
    """A column type string that is not MySQL (raised by mysqltypes' parser)."""


class ValueError_(ChangefeedError, ValueError):
    """A value that does not fit its column type (out of range, not a number, not a date...)."""


class ConvertError(ChangefeedError, ValueError):
    """A binlog value or row that does not fit its column or table (raised by the MySQL source's converter)."""


class UnknownDDLType(ChangefeedError):
    """A DDL type name that is not one of TiDB's action names (an event line's `ddl.type`)."""


class SchemaError(ChangefeedError, ValueError):
    """A DDL statement that cannot be applied; the message names the statement and the problem."""


class UnsupportedSyntax(SchemaError):
    """DDL syntax the statement interpreter does not understand (the schema tracker ignores such statements)."""


# -- services and the pipeline -----------------------------------------------------------------------------


class SourceError(ChangefeedError):
    """The upstream MySQL server cannot be captured as it is (a setting, a privilege, a connection, the binlog)."""


class TransportError(ChangefeedError):
    """Kafka did not take or give back messages (a topic missing or not created, undelivered messages)."""


class SchemaRegistryError(ChangefeedError):
    """The schema registry refused a request or could not be reached; `status` and `error_code` are its answer."""

    def __init__(self, message: str, status: int | None = None, error_code: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code


class ApplyError(ChangefeedError):
    """A change or DDL the lake cannot take; the pipeline stops here (the changelog keeps it)."""


class ForeignPathError(ChangefeedError):
    """A path holds what changefeed did not create; writing there could destroy it."""


class ClusterSetupError(ChangefeedError):
    """The cluster cannot run the pipeline as configured (missing package, unreachable path)."""


class SparkSetupError(ChangefeedError):
    """Spark cannot be started as asked (its connector jars are not fetched)."""


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


class StorageError(ChangefeedError):
    """A lake's store (S3 and the like) that cannot be reached: wrong endpoint, bad credentials, no bucket."""
