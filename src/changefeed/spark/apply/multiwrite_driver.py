"""The small tables of a window's groups merged on the driver (`drivermerge`, in Arrow) rather than by a Spark job per
group: one job collects every group's operations and the rows of the tables the driver does not hold, then each
table's new rows are written and committed as `MultiWriter.write` does. What the driver cannot merge as Spark does
(too many changes, a big table, a type pyarrow's kernels lack) goes back to `MultiWriter.write`'s job.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F
from pyspark.sql import types as T

from . import driverfiles, drivermerge
from .options import q
from .params import local_rows
from .scd1 import flat_ops
from .tablefiles import column_names

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from ...model import TableInfo
    from .deltalog import DeltaLogs
    from .lake import Lake
    from .projection import Projection
    from .segments import TableWrite
    from .tablefiles import TableFiles

DRIVER_MERGE = "CHANGEFEED_DRIVER_MERGE"  # "0": every group's rewrite computed by its Spark job (`write_on_driver`)
DRIVER_MAX_READS = 16  # tables whose files that job reads too (each a select of its own), at most
# a window's changes merged on the driver at most, all its tables' (their operations are collected at once): the
# bound a group written by the driver has (`driverfiles.small`), so one table alone never passes it either
DRIVER_MAX_CHANGES = driverfiles.MAX_CHANGES
TABLE = "__t"  # a table's index among those of one job


@dataclass(frozen=True)
class Planned:
    """A table write ready to be made: its definition, its folder, and the lake columns it sets."""

    write: TableWrite
    t: TableInfo
    path: str
    cols: list[str]


class DriverWrites:
    """The driver's half of `MultiWriter`, which gives the lake, the projection, the rows kept from the tables' last
    rewrites, and how a group's files are made, committed and read."""

    lake: Lake
    proj: Projection
    logs: DeltaLogs
    kept: driverfiles.Kept

    def _commit(self, group: list[tuple[Planned, TableFiles]], parts: list[pa.Table], stage: str | None,
                files_of: Callable[[int, Planned], Any], committed: Callable[[str, int], None],
                each: Callable[[Callable[[Any], Any], list[Any]], Any]) -> None:
        raise NotImplementedError

    def _driver_files(self, group: list[tuple[Planned, TableFiles]], parts: list[pa.Table]) -> Any:
        raise NotImplementedError

    def _read_files(self, paths: list[str], stored: T.StructType) -> DataFrame:
        raise NotImplementedError

    def write_on_driver(self, groups: list[list[tuple[Planned, TableFiles]]], committed: Callable[[str, int], None],
                        each: Callable[[Callable[[Any], Any], list[Any]], Any]
                        ) -> list[list[tuple[Planned, TableFiles]]]:
        """The groups' small tables merged on the driver (`drivermerge`): their window's operations, and the rows
        of those whose rows the driver does not hold (`driverfiles.Kept`, up to `DRIVER_MAX_READS` tables), collected
        in one job for all of them; each table's last operations applied to its rows in Arrow, its file written and
        committed as `write` does. The groups left for `write` (too many changes, a table too big or empty, or what
        the driver cannot merge as Spark does). A table without files holds no rows: nothing to read (a database's
        first micro-batch: its new tables, made by this commit, took `write`'s 6 jobs)."""
        if os.environ.get(DRIVER_MERGE, "1") == "0":
            return groups
        mine: list[list[tuple[Planned, TableFiles, pa.Table | None]]] = []
        rest: list[list[tuple[Planned, TableFiles]]] = []
        changes = reads = 0
        large: bool | None = None
        for g in groups:
            took, left = [], []
            for p, tf in g:
                held = self.kept.get(p.path, tf.version, tf.files)
                if held is not None and tuple(held.column_names) != column_names(tf.schema_json):
                    held = None
                if held is None and not tf.files:  # an empty table (a new one): its rows are none
                    if large is None:
                        large = bool(self.lake.spark._jconf.arrowUseLargeVarTypes())  # as `toArrow` types them
                    held = driverfiles.no_rows(tf.schema_json, large)
                n = p.write.changes
                if n is not None and changes + n <= DRIVER_MAX_CHANGES and driverfiles.small(tf.size, [n]) \
                        and (held is not None or (tf.files and reads < DRIVER_MAX_READS)) \
                        and (self.logs.local(p.path) is not None or self.logs.on_store(p.path)):
                    took.append((p, tf, held))
                    changes += n
                    reads += held is None
                else:
                    left.append((p, tf))
            if took:
                mine.append(took)
            if left:
                rest.append(left)
        if not mine:
            return groups
        ops_of, names, read = self._operations(mine)
        for g, ops, (key_names, vals, has, by) in zip(mine, ops_of, names, strict=True):
            held_of = [kept if kept is not None else read[p.path] for p, _, kept in g]  # each table's rows now
            parts = self._all_at_once(g, held_of, ops, key_names, vals, has, by)
            if parts is not None:  # (None: what the driver cannot do for one of them: table by table below)
                done = [(p, tf) for p, tf, _ in g]
                self._commit(done, parts, None, self._driver_files(done, parts), committed, each)
                continue
            parts, done = [], []
            for (p, tf, _), held, o in zip(g, held_of, driverfiles.split(ops, TABLE, len(g)), strict=True):
                try:
                    last = drivermerge.last_per_key(o, key_names, by)
                    rows = None if last is None else drivermerge.apply(held, last, self.proj.keys(p.t), key_names,
                                                                       p.cols, vals, has, not_null(tf.schema_json))
                except (pa.ArrowNotImplementedError, pa.ArrowTypeError):  # a type pyarrow's kernels lack
                    rows = None
                if rows is None:
                    rest.append([(p, tf)])  # Spark's job: what the driver cannot do as it does
                    continue
                parts.append(rows)
                done.append((p, tf))
            if done:
                self._commit(done, parts, None, self._driver_files(done, parts), committed, each)
        return rest

    def _all_at_once(self, g: list[tuple[Planned, TableFiles, pa.Table | None]], held: list[pa.Table],
                     ops: pa.Table, key_names: list[str], vals: list[str], has: list[str], by: list[str]
                     ) -> list[pa.Table] | None:
        """A group's tables merged at once (`drivermerge.apply_all`), each table's rows; not a few Arrow calls per
        table (~0.45 ms each: a micro-batch of the many-tables stream or a database's first, 1,000 tables, spent
        ~0.5 s there). None where the driver cannot do it as Spark does for one of them (each is then tried alone)."""
        if len(g) < 2:
            return None
        p, tf = g[0][0], g[0][1]
        try:
            rows = drivermerge.apply_all(held, ops, TABLE, self.proj.keys(p.t), key_names, p.cols, vals, has, by,
                                         not_null(tf.schema_json))
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None
        return None if rows is None else driverfiles.split(rows, TABLE, len(g))

    def _operations(self, groups: list[list[tuple[Planned, TableFiles, pa.Table | None]]]
                    ) -> tuple[list[pa.Table], list[tuple[list[str], list[str], list[str], list[str]]],
                               dict[str, pa.Table]]:
        """In one job: each group's keyed operations in its window (`scd1.flat_ops`, its table's index in
        `TABLE`), the rows of each table the driver does not hold (None: read from its files, as `_held` reads
        them), and the operations' column names. Each select's columns under names of its own (`__g<j>:`,
        `__h<m>:`), NULL in the other selects' rows."""
        spark = self.lake.spark
        selects, names, flats = [], [], []
        for j, g in enumerate(groups):
            first = g[0][0]
            bounds = local_rows(spark, [(p.write.database, p.write.table, i, p.write.after, p.write.upto)
                                        for i, (p, _, _) in enumerate(g)],
                                [("database", "string"), ("table", "string"), (TABLE, "int"), ("__lo", "long"),
                                 ("__hi", "long")])
            rows = first.write.window.join(F.broadcast(bounds), ["database", "table"]).where(
                "(__lo IS NULL OR commit_ts > __lo) AND (__hi IS NULL OR commit_ts <= __hi)")
            flat, key_names, vals, has, by = flat_ops(self.proj, first.t, rows, first.cols, group=(TABLE,))
            flats.append((f"__g{j}:", flat.columns, "__op"))
            selects.append(flat.select(*[F.col(q(c)).alias(f"__g{j}:{c}") for c in flat.columns]))
            names.append((key_names, vals, has, by))
        unread = [(p, tf) for g in groups for p, tf, held in g if held is None]
        for m, (p, tf) in enumerate(unread):
            schema = T.StructType.fromJson(json.loads(tf.schema_json))
            phys = tf.physical() or {}
            stored = stored_schema(schema, phys)
            files = self._read_files([f"{p.path}/{unquote(rel)}" for rel in tf.files], stored)
            flats.append((f"__h{m}:", schema.fieldNames(), ""))
            selects.append(files.select(*[F.col(q(phys.get(n, n))).alias(f"__h{m}:{n}") for n in schema.fieldNames()],
                                        F.lit(True).alias(f"__h{m}:")))
        both = functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), selects)
        # each select reads every partition of the window (a dozen for a small batch): a task for each of the
        # cores, not one for each partition of each group
        got = both.coalesce(max(1, spark.sparkContext.defaultParallelism)).toArrow()
        out = []
        for prefix, columns, marker in flats:  # the rows of a select: its marker column is never NULL
            mine = got.select([f"{prefix}{c}" for c in columns]).rename_columns(columns)
            if len(selects) > 1:
                mine = mine.filter(pc.is_valid(got[f"{prefix}{marker}"]))
            out.append(mine)
        return out[:len(groups)], names, {p.path: t for (p, _), t in zip(unread, out[len(groups):], strict=True)}


def stored_schema(schema: T.StructType, phys: dict[str, str]) -> T.StructType:
    """A table's schema as its files name the columns (their physical names, where the table has column mapping)."""
    return T.StructType([T.StructField(phys.get(f.name, f.name), f.dataType, f.nullable) for f in schema.fields])


@functools.lru_cache(maxsize=1024)
def not_null(schema_json: str) -> frozenset[str]:
    """The table's NOT NULL columns (Spark's job raises its error for a NULL there: `MultiWriter`'s join)."""
    return frozenset(f["name"] for f in json.loads(schema_json)["fields"] if not f.get("nullable", True))
