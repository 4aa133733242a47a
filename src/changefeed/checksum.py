"""Row-level checksums, as TiDB computes them and TiCDC carries them (`[integrity] integrity-check-level`).

TiCDC's messages carry TiDB's *column-level* checksum of each row image (tidb pkg/util/rowcodec/common.go
`RowData.Checksum`, which TiCDC's mounter recomputes whatever checksum version the row was written with,
and which its consumers verify with pkg/sink/codec/common/verify_checksum.go `buildChecksumBytes`):

    checksum = CRC-32 (IEEE) updated, column after column in column-ID order, with each column's bytes

and a column's bytes are (`appendDatumForChecksum`; NULL and GEOMETRY add nothing):

    tinyint..bigint, mediumint, year   the value as uint64 (two's complement), little-endian, 8 bytes
    float, double                      float64(value) bits, little-endian, 8 bytes; NaN and ±Inf count as 0
    enum, set, bit                     the index / bitmask / unsigned value as uint64, little-endian
    char..longtext, binary..longblob   uint32 little-endian length + the raw bytes (UTF-8 for text)
    decimal, date, datetime, time      uint32 length + the value's text (MyDecimal.String, Time.String, ...)
    timestamp                          uint32 length + the text of the value converted to UTC
    json                               uint32 length + BinaryJSON.String() (`{"a": 1}`)
    vector                             uint32 dimension + each element as float32 little-endian

A row is a dict of datums as the model holds them (REFERENCE-NOTES §0), whose text forms are the ones
TiDB's String() gives, so the bytes are TiDB's. Columns are taken in TableInfo order, which is TiCDC's
column-ID order for every table that came from a TiCDC message (simple TableSchema, avro field order); a
column missing from the row (a handle-key-only image) adds nothing, as in TiCDC's decoder.
"""

from __future__ import annotations

import re
import struct
import time
import zlib
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson

from .model import Event, Kind, Row, RowChecksum, TableInfo
from .mysqltypes import ColumnType, Family, ValueError_, tidb_json_text

# The checksum version written when the event does not bring one: 0, TiDB's column-level checksum, which
# is what `current`/`previous` are whatever version TiDB stored the row with (TiCDC copies that version
# from the row; consumers, TiCDC's own included, do not read it).
DEFAULT_VERSION = 0

_MASK64 = (1 << 64) - 1
_U64 = struct.Struct("<Q").pack
_U32 = struct.Struct("<I").pack
_F64 = struct.Struct("<d").pack
_F32 = struct.Struct("<f")
_INF = float("inf")
_TS_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(\.\d*)?\Z")
_EPOCH_DAYS = datetime(1970, 1, 1).toordinal()


def _uint64(v: Any) -> bytes:
    """Integers go in as Go's uint64(v): a negative value as its two's complement."""
    return _U64((v if type(v) is int else int(v)) & _MASK64)


def _float(single: bool) -> Callable[[Any], bytes]:
    def enc(v: Any) -> bytes:
        f = float(v)
        if f != f or f in (_INF, -_INF):
            return _F64(0.0)  # "because ticdc has such a transform" (rowcodec), NaN/Inf become 0
        if single:  # a FLOAT datum is float64(float32): 3.14 counts as 3.140000104904175
            try:
                f = _F32.unpack(_F32.pack(f))[0]
            except OverflowError:
                raise ValueError_(f"{v!r} is out of range for FLOAT") from None
        return _F64(f)

    return enc


def _length_value(raw: bytes) -> bytes:
    return _U32(len(raw)) + raw


def _text(v: Any) -> bytes:
    if isinstance(v, bytes | bytearray):
        return _length_value(bytes(v))
    return _length_value(str(v).encode("utf-8"))


def _json(v: Any) -> bytes:
    return _length_value((v if isinstance(v, str) else tidb_json_text(v)).encode("utf-8"))


def _vector(v: Any) -> bytes:
    """VectorFloat32.SerializeTo: its dimension, then float32s (ParseVectorFloat32 reads the text form)."""
    try:
        elems = orjson.loads(v) if isinstance(v, str | bytes) else v
        floats = [float(x) for x in elems]
    except (orjson.JSONDecodeError, TypeError, ValueError):
        raise ValueError_(f"{v!r} is not a vector") from None
    return _U32(len(floats)) + struct.pack(f"<{len(floats)}f", *floats)


@lru_cache(maxsize=64)
def _zone(name: str) -> ZoneInfo | None:
    """The changefeed's time zone; None for the process's local zone (TiCDC's "", "system", "local")."""
    if name.lower() in ("", "system", "local"):
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError_(f"unknown time zone {name!r}") from None


def _offset(zone: ZoneInfo | None, unix: int) -> int:
    if zone is None:
        return time.localtime(unix).tm_gmtoff
    off = datetime.fromtimestamp(unix, zone).utcoffset()
    return int(off.total_seconds()) if off is not None else 0


def timestamp_utc(value: str, tz: str) -> str:
    """A TIMESTAMP's text in zone `tz` as TiDB's Time.ConvertTimeZone(tz, UTC).String() gives it.

    The fraction keeps its digits. Local times in a DST gap or overlap resolve as Go's time.Date does: the
    offset in effect at the instant read as UTC, or, when that instant minus the offset falls in another
    period, the offset there. The zero timestamp stays as it is (TiDB converts only non-zero times).
    """
    if tz.upper() == "UTC":
        return value
    m = _TS_RE.match(value)
    if m is None:
        raise ValueError_(f"{value!r} is not a TIMESTAMP value")
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    if mo == 0 or d == 0:  # the zero timestamp (TiDB cannot convert a partial zero date either)
        return value
    zone = _zone(tz)
    try:
        unix = (datetime(y, mo, d).toordinal() - _EPOCH_DAYS) * 86400 + h * 3600 + mi * 60 + s
        off = _offset(zone, unix)
        if off:
            off2 = _offset(zone, unix - off)
            unix -= off2 if off2 != off else off
        utc = datetime.fromtimestamp(unix, UTC)
    except (ValueError, OverflowError, OSError):
        raise ValueError_(f"{value!r} cannot be converted from {tz} to UTC") from None
    return utc.strftime("%Y-%m-%d %H:%M:%S") + (m.group(7) or "")


@lru_cache(maxsize=4096)
def column_encoder(ctype: ColumnType, tz: str = "UTC") -> Callable[[Any], bytes] | None:
    """The function from a column's non-null datum to its checksum bytes; None if the type adds nothing."""
    fam = ctype.family
    if fam in (Family.INT, Family.YEAR, Family.ENUM, Family.SET, Family.BIT):
        return _uint64
    if fam is Family.FLOAT:
        return _float(ctype.name == "float")
    if fam is Family.BYTES:
        return None if ctype.name == "geometry" else _text
    if fam is Family.TIMESTAMP:
        return lambda v: _text(timestamp_utc(v if isinstance(v, str) else str(v), tz))
    if fam is Family.JSON:
        return _json
    if fam is Family.VECTOR:
        return _vector
    return _text  # char..longtext, decimal, date, datetime, time: their text


def column_bytes(ctype: ColumnType, value: Any, tz: str = "UTC") -> bytes:
    """One column's contribution to the checksum (b"" for NULL)."""
    if value is None:
        return b""
    enc = column_encoder(ctype, tz)
    return b"" if enc is None else enc(value)


def row_checksum(table: TableInfo, row: Row, tz: str = "UTC") -> int:
    """TiDB's column-level checksum of a row image (uint32). `tz` is the zone TIMESTAMP values are in.

    Raises ValueError_ for a value the checksum cannot take (an unknown time zone, a bad vector).
    """
    crc = 0
    for col in table.columns:
        v = row.get(col.name)
        if v is None:
            continue
        enc = column_encoder(col.type, tz)
        if enc is not None:
            crc = zlib.crc32(enc(v), crc)
    return crc


def event_checksum(ev: Event, tz: str = "UTC") -> RowChecksum | None:
    """The checksums an encoder writes for a row event; None when both are 0 (TiCDC then writes none).

    Computed from the images the event carries (so they match what is written); the version and the
    corrupted flag come from the checksum the event arrived with, if any.
    """
    if ev.kind not in (Kind.INSERT, Kind.UPDATE, Kind.DELETE) or ev.table is None:
        return None
    current = row_checksum(ev.table, ev.after, tz) if ev.after is not None and ev.kind is not Kind.DELETE else 0
    previous = row_checksum(ev.table, ev.before, tz) if ev.before is not None and ev.kind is not Kind.INSERT else 0
    if not current and not previous:
        return None
    came = ev.checksum
    return RowChecksum(current=current, previous=previous, version=came.version if came else DEFAULT_VERSION,
                       corrupted=came.corrupted if came else False)


def mismatches(table: TableInfo, images: Iterable[tuple[str, Row | None, int]], tz: str = "UTC"
               ) -> tuple[str, int, int] | None:
    """The first (name, expected, computed) whose image does not give its checksum, or None.

    An expected 0 means "no checksum" (TiCDC: checksum not enabled upstream) and is not checked.
    """
    for name, row, want in images:
        if not want or row is None:
            continue
        got = row_checksum(table, row, tz)
        if got != want & 0xFFFFFFFF:
            return name, want, got
    return None
