"""The files of a small group's rewritten tables, written by the driver (pyarrow) straight into their folders on a
local lake, from the rows the group's Spark job computed.

Through Spark's writer, the job's last task wrote one file per table: a writer set up, a checksum file beside
it, a rename at the task's commit and one more into the table's folder, ~3-4 ms a file, 0.6-0.9 s of every
micro-batch over 200 tables (bench/RESULTS.md). A small group's result is a few thousand rows: collected as Arrow
(Spark's own `toArrow`, the Arrow types Spark gives its columns), each table's file then takes well under a
millisecond. The rows are Spark's, computed by the same plan; only the writing of the files moves. A file is
written under its final name in the table's folder, as Delta's own writers do: until the table's commit
lists it, no reader sees it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

# a group is written here while the files it reads back and the changes it applies are at most these
MAX_HELD_BYTES = 8 << 20
MAX_CHANGES = 200_000


def small(held_bytes: int, changes: list[int | None]) -> bool:
    """Whether a group's result is small enough to pass through the driver (its changes all counted)."""
    return held_bytes <= MAX_HELD_BYTES and all(n is not None for n in changes) \
        and sum(n or 0 for n in changes) <= MAX_CHANGES


def write_tables(rows: pa.Table, column: str, folders: list[str],
                 name: Callable[[], str]) -> list[list[tuple[str, int, int]]]:
    """Each table's rows (`column`: its index in `folders`, left out of the files) as one Parquet file in its
    folder, compressed as Spark's are (snappy): per table, the files written (name, size, modification time in
    ms; none for a table left without rows)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out: list[list[tuple[str, int, int]]] = [[] for _ in folders]
    if rows.num_rows == 0:
        return out
    rows = rows.take(pc.sort_indices(rows[column]))
    which = rows[column].to_pylist()
    data = rows.drop_columns([column])
    start = 0
    for end in range(1, len(which) + 1):
        if end < len(which) and which[end] == which[start]:
            continue
        i = which[start]
        file = name()
        target = os.path.join(folders[i], file)
        pq.write_table(data.slice(start, end - start), target, compression="snappy")
        st = os.stat(target)
        out[i].append((file, st.st_size, int(st.st_mtime * 1000)))
        start = end
    return out
