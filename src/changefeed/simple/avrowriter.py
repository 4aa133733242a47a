"""Avro binary for simple-protocol DML messages, written directly (the hot path).

fastavro resolves the 12-branch union and every per-column union on each call; for DML messages
the layout is fixed per table, so we write the bytes ourselves, field by field, following the Avro
spec (zig-zag varint longs, length-prefixed strings, map blocks). Other message kinds, and the
tests, go through fastavro with TiCDC's published schema, which checks this writer byte for byte.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from ..model import Row, RowChecksum, TableInfo
from ..mysqltypes import Family

# union branch indexes in message.json: Message union, MessageType enum, the value union of data/old
_MESSAGE = b"\x16"  # branch 11 (Message) of the top-level union, zig-zag encoded
_DML_HEAD = _MESSAGE + b"\x06\x06"  # type DML (3), payload branch DML (3)
_DML_TYPE = {"INSERT": b"\x00", "UPDATE": b"\x02", "DELETE": b"\x04"}
_NULL, _LONG, _FLOAT, _DOUBLE, _STRING, _BYTES, _TIMESTAMP, _UBIGINT = (bytes([i * 2]) for i in range(8))
_F32 = struct.Struct("<f").pack
_F64 = struct.Struct("<d").pack
_SMALL = [bytes([(n << 1) if n >= 0 else ((-n << 1) - 1)]) for n in range(-64, 64)]


def zlong(n: int) -> bytes:
    """An Avro long: zig-zag, then base-128 varint (n is taken as Go's int64 of a uint64)."""
    if -64 <= n < 64:
        return _SMALL[n + 64]
    if n >= 1 << 63:
        n -= 1 << 64
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def zstr(s: str) -> bytes:
    b = s.encode("utf-8")
    return zlong(len(b)) + b


def zbytes(b: bytes) -> bytes:
    return zlong(len(b)) + b


def value_writer(ctype: Any, tz: str) -> Callable[[Any], bytes]:
    """A column's non-null value as its branch index and Avro bytes (simple/message.go encodeValue4Avro)."""
    fam = ctype.family
    if fam is Family.TIMESTAMP:
        loc = zstr(tz)
        return lambda v: _TIMESTAMP + loc + zstr(v)
    if ctype.name == "bigint" and ctype.unsigned:
        return lambda v: _UBIGINT + zlong(v)
    if fam in (Family.INT, Family.YEAR, Family.ENUM, Family.SET, Family.BIT):
        return lambda v: _LONG + zlong(v)
    if fam is Family.FLOAT:
        return (lambda v: _FLOAT + _F32(v)) if ctype.name == "float" else (lambda v: _DOUBLE + _F64(v))
    if fam is Family.BYTES:
        return lambda v: _BYTES + zlong(len(v)) + v
    return lambda v: _STRING + zstr(v if isinstance(v, str) else v.decode("utf-8", "replace"))


def checksum_bytes(cs: RowChecksum | None) -> bytes:
    """The DML's `checksum` union: null, or the Checksum record (version int, corrupted, current, previous)."""
    if cs is None:
        return _NULL
    return b"".join((b"\x02", zlong(cs.version), b"\x01" if cs.corrupted else b"\x00", zlong(cs.current),
                     zlong(cs.previous)))


class DMLWriter:
    """Per table: the constant head of its DML messages and a writer per column."""

    __slots__ = ("table", "head", "keys", "writers", "tail_version")

    def __init__(self, table: TableInfo, tz: str) -> None:
        self.table = table
        self.head = (_DML_HEAD + b"\x02" + zstr(table.schema) + zstr(table.table)
                     + zlong(table.table_id or 0))
        self.tail_version = zlong(table.version or 0)
        cols = sorted(table.columns, key=lambda c: c.name)  # the order the JSON encoding uses (Go's sorted maps)
        self.keys = {c.name: zstr(c.name) for c in cols}
        self.writers = {c.name: value_writer(c.type, tz) for c in table.columns}

    def image(self, row: Row | None, only: set[str] | None = None) -> bytes:
        """The ["null", map] union of a row image: one map block, entries by column name."""
        if row is None:
            return _NULL
        parts = []
        keys, writers = self.keys, self.writers
        for name in keys:
            if name not in row or (only is not None and name not in only):
                continue
            v = row[name]
            parts.append(keys[name] + (_NULL if v is None else writers[name](v)))
        if not parts:
            return b"\x02\x00"
        return b"\x02" + zlong(len(parts)) + b"".join(parts) + b"\x00"

    def message(self, dml_type: str, commit_ts: int, build_ts: int, data: bytes, old: bytes,
                claim_check: str | None = None, handle_key_only: bool = False, checksum: bytes = _NULL) -> bytes:
        return b"".join((
            self.head, _DML_TYPE[dml_type], zlong(commit_ts), zlong(build_ts), self.tail_version,
            _NULL if claim_check is None else b"\x02" + zstr(claim_check),
            b"\x02\x01" if handle_key_only else _NULL,
            checksum,
            data, old,
        ))
