"""TiDB record (row) keys, as TiKV stores them and TiCDC hands them to its encoders (canal-json `output-row-key`).

TiCDC writes no key it computes: `_tidb.rowkey` is the raw key of the TiKV entry the row change came from
(ticdc `pkg/common/event/dml_event.go`, `DMLEvent.AppendRow` keeps `raw.Key`; `GetNextRow` hands it on as
`RowChange.RowKey`). That key is TiDB's `tablecodec.EncodeRowKeyWithHandle(physicalTableID, handle)`:

    't' + codec.EncodeInt(tableID) + '_r' + handle.Encoded()

where `codec.EncodeInt` is the memcomparable int64 (big-endian, sign bit flipped) and an int handle's
`Encoded()` is `codec.EncodeInt(handle)` too (tidb `pkg/tablecodec/tablecodec.go`, `pkg/kv/key.go`). So a row
of a table whose handle is an integer has a 19-byte key.

What an event here can give (`row_key`): the handle is known only where it is a column value, i.e. the table's
primary key is one integer column stored as the handle (TiDB's `PKIsHandle`: clustered, which a single integer
primary key is unless created NONCLUSTERED or with `tidb_enable_clustered_index=OFF`). Everywhere else the
event does not hold the key's bytes and `row_key` gives None:
- no explicit primary key (also where a NOT NULL unique key stands in as the implicit one): the handle is the
  hidden `_tidb_rowid`, which no event carries;
- a primary key of other types or of several columns: clustered (TiDB's default `tidb_enable_clustered_index=ON`)
  it is a common handle, `codec.EncodeKey` of the key's datums with each string replaced by its collation's
  sort key (and prefix columns cut); non-clustered it is `_tidb_rowid` again. The event says neither which
  nor (for the ci collations) the sort keys, so no bytes are guessed;
- no table id (or not a positive int64).
TiKV's key holds the physical table id: the partition's for a row of a partitioned table (the event's
`physical_table_id`), else the table's `table_id`.
"""

from __future__ import annotations

import struct

from .model import Row, TableInfo
from .mysqltypes.types import Family

_U64 = (1 << 64) - 1
_SIGN = 1 << 63
_CMP_INT = struct.Struct(">Q")
_I64_MIN, _U64_MAX = -(1 << 63), _U64


def encode_int(v: int) -> bytes:
    """TiDB's `codec.EncodeInt`: 8 bytes big-endian with the sign bit flipped, so bytes sort as the ints do.

    A BIGINT UNSIGNED handle above 2^63-1 is the int64 of the same bits (TiDB's `kv.IntHandle(int64(u))`), so
    any value in [-2^63, 2^64) is taken by its low 64 bits.
    """
    if not _I64_MIN <= v <= _U64_MAX:
        raise ValueError(f"{v} is not a 64-bit integer handle")
    return _CMP_INT.pack((v & _U64) ^ _SIGN)


def record_key(table_id: int, encoded_handle: bytes) -> bytes:
    """TiDB's `tablecodec.EncodeRowKey`: `t{tableID}_r{handle}`, the table id memcomparable."""
    return b"t" + encode_int(table_id) + b"_r" + encoded_handle


def int_record_key(table_id: int, handle: int) -> bytes:
    """TiDB's `tablecodec.EncodeRowKeyWithHandle(tableID, kv.IntHandle(handle))`."""
    return record_key(table_id, encode_int(handle))


def int_handle_column(table: TableInfo) -> str | None:
    """The column whose value is the row's int handle (a one-column integer primary key), or None."""
    if not table.explicit_pk or len(table.pk_names) != 1:
        return None
    col = table.by_name.get(table.pk_names[0])
    if col is None or col.type.family is not Family.INT:
        return None
    return col.name


def row_key(table: TableInfo, row: Row | None, physical_table_id: int | None = None) -> bytes | None:
    """The TiKV key of `row` of `table` where the event determines it (see the module's docstring), else None;
    a partition's row is keyed by its partition's ID (`physical_table_id`)."""
    tid = physical_table_id or table.table_id
    if tid is None or row is None:
        return None
    name = int_handle_column(table)
    if name is None:
        return None
    v = row.get(name)
    if v.__class__ is not int or not _I64_MIN <= v <= _U64_MAX or tid.__class__ is not int or not 0 < tid < _SIGN:
        return None
    return int_record_key(tid, v)
