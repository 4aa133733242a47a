"""The files of a small group's rewritten tables, written by the driver (pyarrow) straight into their folders (on a
local lake, or on S3 by one PUT each), from the rows the group's Spark job computed.

Through Spark's writer, the job's last task wrote one file per table: a writer set up, a checksum file beside
it, a rename at the task's commit and one more into the table's folder, ~3-4 ms a file, 0.6-0.9 s of every
micro-batch over 200 tables (bench/RESULTS.md). A small group's result is a few thousand rows: collected as Arrow
(Spark's own `toArrow`, the Arrow types Spark gives its columns), each table's file then takes well under a
millisecond. The rows are Spark's, computed by the same plan; only the writing of the files moves. A file is
written under its final name in the table's folder, as Delta's own writers do: until the table's commit
lists it, no reader sees it.
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

# a group is written here while the files it reads back and the changes it applies are at most these (a table of
# 666,670 rows, ~6 MB of Parquet, took 250,000 changes a batch in 1.1 s here against 1.5 s by Spark's MERGE,
# bench/RESULTS.md; its operations are ~20 MB of Arrow on the driver)
MAX_HELD_BYTES = 8 << 20
MAX_CHANGES = 1_000_000


def small(held_bytes: int, changes: list[int | None]) -> bool:
    """Whether a group's result is small enough to pass through the driver (its changes all counted)."""
    return held_bytes <= MAX_HELD_BYTES and all(n is not None for n in changes) \
        and sum(n or 0 for n in changes) <= MAX_CHANGES


@functools.lru_cache(maxsize=1024)
def no_rows(schema_json: str, large_types: bool) -> pa.Table:
    """No rows of a table's schema (a Delta schema's JSON), typed as `toArrow` types its files' rows read back:
    every column nullable, as Spark reads files (`large_types`: the session's `arrowUseLargeVarTypes`)."""
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_schema

    fields = T.StructType.fromJson(json.loads(schema_json)).fields
    return to_arrow_schema(T.StructType([T.StructField(f.name, f.dataType, True) for f in fields]),
                           error_on_duplicated_field_names_in_struct=True,
                           prefers_large_types=large_types).empty_table()


def split(rows: pa.Table, column: str, tables: int) -> list[pa.Table]:
    """Each table's rows (`column`: its index, left out) as a table of its own, in index order, each in the order it
    had. One table's rows are all of them: no sort, no copy (a big table's window of 250,000 changes spent 0.07 s
    here, a Python loop over every row; bench/RESULTS.md 2026-11-29 15:50)."""
    import pyarrow.compute as pc

    if tables == 1 or rows.num_rows == 0:
        data = rows.drop_columns([column])
        return [data] * tables
    rows = rows.take(pc.sort_indices(rows[column]))  # a stable sort: a table's rows keep their order
    counts = pc.value_counts(rows[column])
    data = rows.drop_columns([column])
    out = [data.slice(0, 0)] * tables
    start = 0
    for which, n in sorted(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True)):
        out[which] = data.slice(start, n)
        start += n
    return out


def physical(rows: pa.Table, names: dict[str, str], ids: dict[str, int]) -> pa.Table:
    """A table's rows with each column under its physical name and field id (column mapping), as Delta's writers
    write them: readers find a column in the files by that name."""
    import pyarrow as pa

    fields = []
    for f in rows.schema:
        meta = dict(f.metadata or {})
        if f.name in ids:
            meta[b"PARQUET:field_id"] = str(ids[f.name]).encode()
        fields.append(pa.field(names.get(f.name, f.name), f.type, f.nullable, meta or None))
    return pa.Table.from_arrays(rows.columns, schema=pa.schema(fields))


def write(rows: pa.Table, folder: str, name: Callable[[], str], footers: list[Any] | None = None
          ) -> list[tuple[str, int, int]]:
    """A table's rows as one Parquet file in its folder, compressed as Spark's are (snappy): the files written
    (name, size, modification time in ms; none for no rows); the footer written appended to `footers`."""
    import pyarrow.parquet as pq

    if rows.num_rows == 0:
        return []
    file = name()
    target = os.path.join(folder, file)
    pq.write_table(rows, target, compression="snappy", metadata_collector=footers)
    st = os.stat(target)
    return [(file, st.st_size, int(st.st_mtime * 1000))]


def write_with_stats(rows: pa.Table, folder: str, name: Callable[[], str], schema_json: str,
                     configuration: dict[str, str]) -> tuple[list[tuple[str, int, int]], dict[str, str]]:
    """`write`, and the file's `stats` from the footer the writer made (`filestats.of_metadata`): not read back from
    the file (a database's first micro-batch writes a file for each of its tables)."""
    from .filestats import of_metadata

    footers: list[Any] = []
    added = write(rows, folder, name, footers)
    return added, {file: of_metadata(footers[0], schema_json, configuration) for file, _, _ in added}


def put(rows: pa.Table, name: Callable[[], str], put_file: Callable[[str, bytes], None], schema_json: str,
        configuration: dict[str, str]) -> tuple[list[tuple[str, int, int]], dict[str, str]]:
    """A table's rows as one Parquet file on an object store (`put_file(name, bytes)`: one PUT, straight into the
    table's folder, no staging and no copy): the files written, as `write` gives them, and their `stats` (from
    the footer just written: nothing read back from the store)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .filestats import of_metadata

    if rows.num_rows == 0:
        return [], {}
    sink = pa.BufferOutputStream()
    pq.write_table(rows, sink, compression="snappy")
    data = sink.getvalue()
    file = name()
    put_file(file, data.to_pybytes())
    stats = of_metadata(pq.read_metadata(pa.BufferReader(data)), schema_json, configuration)
    return [(file, data.size, int(time.time() * 1000))], {file: stats}


class Kept:
    """The rows this consumer last wrote to each small table, as Arrow, for the table's next rewrite: while the
    table's log still ends at the commit that added them (its version and files as they were then), they are
    the table's rows, and reading its files back is not needed. Any other commit (a DDL, a MERGE, another
    writer) changes the version, and the files are read again."""

    def __init__(self, max_bytes: int = 256 << 20) -> None:
        self.max_bytes = max_bytes
        self._rows: dict[str, tuple[int, frozenset[str], pa.Table]] = {}
        self._bytes = 0
        self._lock = threading.Lock()  # tables are committed from several threads

    def get(self, path: str, version: int, files: Iterable[str]) -> pa.Table | None:
        with self._lock:
            kept = self._rows.get(path)
        if kept is None or kept[0] != version or kept[1] != frozenset(files):
            return None
        return kept[2]

    def put(self, path: str, version: int, files: Iterable[str], rows: pa.Table) -> None:
        if rows.get_total_buffer_size() > 2 * rows.nbytes + 4096:
            # a slice of the group's result (`split`) holds that whole result's buffers: kept as its own rows, so
            # what is counted is what is held (a table's two rows kept the whole micro-batch's rows alive)
            import pyarrow as pa

            rows = rows.take(pa.array(range(rows.num_rows), pa.int64()))
        with self._lock:
            self._drop(path)
            if rows.nbytes > self.max_bytes:
                return
            while self._rows and self._bytes + rows.nbytes > self.max_bytes:  # the oldest go first
                self._drop(next(iter(self._rows)))
            self._rows[path] = (version, frozenset(files), rows)
            self._bytes += rows.nbytes

    def forget(self, path: str) -> None:
        with self._lock:
            self._drop(path)

    def _drop(self, path: str) -> None:
        kept = self._rows.pop(path, None)
        if kept is not None:
            self._bytes -= kept[2].nbytes
