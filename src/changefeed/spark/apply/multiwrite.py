"""Many small tables' writes of one window in one Spark job, then one driver-side Delta commit per table.

A window of a changefeed over a whole database holds a few changes for each of many tables. A MERGE per table
costs the same few Spark jobs and a Delta commit whatever its size, so the window's cost would follow the
number of tables. Here the tables of one shape (the same lake columns and types, the same key, the same MySQL
column types: one typing of their images) are written together: one job takes every table's last operation
per key (`scd1.last_ops`, grouped by table too), joins it with the rows the tables hold (their files read at
once, each file's table found by its name), and writes each table's new rows as files of its own: a small
group's by the driver, straight into the tables' folders (`driverfiles`), others into the lake's staging area,
moved into place after. Each table then gets an ordinary Delta commit made on the driver (`deltalog`): its old
files removed, the new ones added, this consumer's txn version; a replay skips a table already committed, as
for a MERGE. Only SCD1 tables that are plain (no column mapping, deletion vectors, CDC files...) and small
(`deltalog.MAX_TABLE_BYTES` in a group, `ALONE_MAX_BYTES` alone) are written so: the whole table is rewritten,
which costs less than a MERGE's fixed jobs only while it is small (and no more than a MERGE when the window's
changes reach every file of it). Others keep their MERGE.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T

from . import driverfiles, pycycles
from .deltalog import MAX_TABLE_BYTES, file_name, new_file_name
from .multiwrite_driver import TABLE, DriverWrites, Planned, stored_schema
from .options import q
from .ordering import UPSERT
from .params import local_rows
from .scd1 import last_ops
from .tablefiles import TableFiles, field_ids

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from .lake import Lake
    from .options import ApplyOptions
    from .projection import Projection

COMMIT_THREADS = 16  # a local group's table commits made at once
MIN_TABLES = 3  # fewer tables of one shape than this share no job: each is written alone, or by its MERGE
# a table written alone (not with others of its shape) is rewritten up to this size: a small table's rewrite costs
# less than a MERGE's fixed jobs, and a window with changes all over a table makes a MERGE rewrite every file too
ALONE_MAX_BYTES = 16 << 20
SPREAD_BYTES = 8 << 20  # a job writing more than this spreads each table's rows over every task (by key)
LISTING_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"
_GLOB = set("*?[]{}\\")  # a folder named with these would be read as a pattern
_Added = tuple[list[tuple[str, int, int]], dict[str, str] | None]  # a table's files, and their stats where known


class MultiWriter(DriverWrites):
    def __init__(self, lake: Lake, proj: Projection, options: ApplyOptions) -> None:
        self.lake = lake
        self.proj = proj
        self.o = options
        self.logs = lake.logs
        self.kept = driverfiles.Kept()
        self._commits: ThreadPoolExecutor | None = None

    def groups(self, planned: list[Planned]) -> tuple[list[list[tuple[Planned, TableFiles]]], list[Planned]]:
        """The writes that go together (per shape and window, at least `MIN_TABLES` of them; a small table alone
        otherwise), and the rest (each its MERGE)."""
        if self.o.scd_type != 1:
            return [], planned
        by: dict[Any, list[tuple[Planned, TableFiles]]] = {}
        rest: list[Planned] = []
        groups: list[list[tuple[Planned, TableFiles]]] = []
        for p in planned:
            shape = self._shape(p)
            tf = self.logs.files(p.path) if shape is not None else None
            if shape is None or tf is None or tf.refused is not None or tf.size > MAX_TABLE_BYTES:
                rest.append(p)
                continue
            if tf.physical() is not None:  # column mapping: names of its own in its files, written alone
                if tf.size <= ALONE_MAX_BYTES:
                    groups.append([(p, tf)])
                else:
                    rest.append(p)
                continue
            by.setdefault((shape, tf.schema_json, id(p.write.window)), []).append((p, tf))
        for g in by.values():
            if len(g) >= MIN_TABLES:
                groups.append(g)
                continue
            for p, tf in g:
                if tf.size <= ALONE_MAX_BYTES:
                    groups.append([(p, tf)])
                else:
                    rest.append(p)
        return groups, rest

    def _shape(self, p: Planned) -> tuple[Any, ...] | None:
        """What must be equal for tables to share one job: columns, key, and how images are typed."""
        if any(ch in p.path for ch in _GLOB):
            return None
        keys = self.proj.keys(p.t)
        by = p.t.by_name
        if any(c not in by for c in [*p.cols, *keys]):
            return None  # a column only an older definition knows: typed per table
        return tuple(p.cols), tuple(keys), tuple(repr(by[c].type) for c in [*p.cols, *keys])

    def write(self, group: list[tuple[Planned, TableFiles]], committed: Callable[[str, int], None],
              each: Callable[[Callable[[Any], Any], list[Any]], Any]) -> None:
        """One job for the group's tables, then each table's commit (`committed(path, version)` after each),
        through `each` (a map, perhaps over a thread pool)."""
        spark = self.lake.spark
        first = group[0][0]
        t, cols = first.t, first.cols
        keys = self.proj.keys(t)
        schema = T.StructType.fromJson(json.loads(group[0][1].schema_json))
        bounds = local_rows(spark, [(p.write.database, p.write.table, i, p.write.after, p.write.upto)
                                    for i, (p, _) in enumerate(group)],
                            [("database", "string"), ("table", "string"), (TABLE, "int"), ("__lo", "long"),
                             ("__hi", "long")])
        rows = first.write.window.join(F.broadcast(bounds), ["database", "table"]).where(
            "(__lo IS NULL OR commit_ts > __lo) AND (__hi IS NULL OR commit_ts <= __hi)")
        last, key_names, vals, has = last_ops(self.proj, t, rows, cols, group=(TABLE,))
        held = self._held(group, schema)
        cond, keep, out = self.proj.memo(t, cols, lambda: _join_columns(schema, keys, key_names, cols, vals, has),
                                         "multiwrite", group[0][1].schema_json)
        result = held.alias("e").join(last.alias("l"), cond, "full_outer").where(keep).select(*out)
        folders = [self.logs.local(p.path) for p, _ in group]
        stage: str | None = None
        parts: list[pa.Table] = []
        # column mapping (a table of its own: its physical names are its own): the files hold physical names
        phys = group[0][1].physical()  # (a table with column mapping is a group of its own)
        if driverfiles.small(sum(tf.size for _, tf in group), [p.write.changes for p, _ in group]) \
                and all(f is not None or self.logs.on_store(p.path) for f, (p, _) in zip(folders, group, strict=True)):
            # the files written by the driver, in place: into the folder, or by one PUT on S3
            parts = driverfiles.split(result.toArrow(), TABLE, len(group))
            files_of = self._driver_files(group, parts)
        else:  # by the job, into staging, then moved into place
            stage = f"{self.lake.staging}/{uuid.uuid4().hex}"
            if phys is not None:
                result = result.select(F.col(TABLE), *[F.col(q(n)).alias(phys.get(n, n)) for n in schema.fieldNames()])
            if len(group) == 1:  # one table: written as the join leaves it, a file per task
                self.lake.write_staged(result.drop(TABLE), stage)
            elif sum(tf.size for _, tf in group) > SPREAD_BYTES:  # big tables: every task writes its part of each
                self.lake.write_staged(result, stage, TABLE)
            else:  # small ones: a file each
                self.lake.write_staged(result.repartition(TABLE), stage, TABLE)

            def files_of(i: int, p: Planned) -> _Added:
                return self.lake.move_files(stage if len(group) == 1 else f"{stage}/{TABLE}={i}", p.path,
                                            new_file_name), None

        self._commit(group, parts, stage, files_of, committed, each)

    def _driver_files(self, group: list[tuple[Planned, TableFiles]], parts: list[pa.Table]
                      ) -> Callable[[int, Planned], _Added]:
        """How the driver writes each table's rows (`parts`, in the group's order) in place: into its folder, or by
        one PUT on S3; under their physical names where the table has column mapping."""
        phys = group[0][1].physical()  # (a table with column mapping is a group of its own)
        ids = field_ids(group[0][1].schema_json) if phys is not None else {}

        def files_of(i: int, p: Planned) -> _Added:
            rows = driverfiles.physical(parts[i], phys, ids) if phys is not None else parts[i]
            folder = self.logs.local(p.path)
            tf = group[i][1]
            if folder is not None:
                return driverfiles.write_with_stats(rows, folder, new_file_name, tf.schema_json, tf.configuration)
            return driverfiles.put(rows, new_file_name, lambda n, d: self.logs.put_file(p.path, n, d),
                                   tf.schema_json, tf.configuration)

        return files_of

    def _commit(self, group: list[tuple[Planned, TableFiles]], parts: list[pa.Table], stage: str | None,
                files_of: Callable[[int, Planned], Any], committed: Callable[[str, int], None],
                each: Callable[[Callable[[Any], Any], list[Any]], Any]) -> None:
        """Each table's commit of the files `files_of` gives (its rows kept when the driver wrote them: no
        `stage`), then `committed(path, version)`; the staging folder removed after."""
        folders = [self.logs.local(p.path) for p, _ in group]

        def commit(item: tuple[int, tuple[Planned, TableFiles]]) -> None:
            i, (p, tf) = item
            self.kept.forget(p.path)
            added, stats = files_of(i, p)
            now = self.logs.commit(p.path, tf, added, p.write.version, self.lake.app_id, stats)
            if stage is None:  # the table's rows are what the driver wrote: kept for its next rewrite
                self.kept.put(p.path, now.version, now.files, parts[i])
            committed(p.path, p.write.version)

        try:
            items = list(enumerate(group))
            local = len(items) > 1 and all(f is not None and self.logs.appends(p.path) for f, (p, _) in
                                           zip(folders, group, strict=True))
            if local and stage is None:
                self._commit_local(group, parts, files_of, committed)
            elif local:
                # a local lake's tables committed by delta-rs or as log files: no py4j call, and each commit waits
                # for the disk (its log file flushed): many at once, the journal flushes them together (a database's
                # first tables: 1,000 commits waited ~6 ms each on 4 threads)
                if self._commits is None:
                    self._commits = ThreadPoolExecutor(COMMIT_THREADS, thread_name_prefix="changefeed-commit")
                list(self._commits.map(commit, items))
            else:
                each(commit, items)  # driver work only (a rename, a commit): several at once
        finally:
            if stage is not None:
                self.lake.remove_own(stage)

    def _commit_local(self, group: list[tuple[Planned, TableFiles]], parts: list[pa.Table],
                      files_of: Callable[[int, Planned], _Added], committed: Callable[[str, int], None]) -> None:
        """A local group's tables written by the driver: each table's file written (`files_of`: its stats from the
        footer just written), then their commits made together (`DeltaLogs.commit_all`: the log files made durable
        at once). A database's first micro-batch commits 1,000 tables: a thread per commit, each reading its file's
        footer back, took ~1.4 ms of the driver's CPU a table (bench/RESULTS.md)."""
        todo = []
        for i, (p, tf) in enumerate(group):
            self.kept.forget(p.path)
            added, stats = files_of(i, p)
            todo.append((p.path, tf, added, p.write.version, self.lake.app_id, stats))
        for (p, _), rows, now in zip(group, parts, self.logs.commit_all(todo), strict=True):
            self.kept.put(p.path, now.version, now.files, rows)  # its rows, for its next rewrite
            committed(p.path, p.write.version)

    def _read_files(self, paths: list[str], stored: T.StructType) -> DataFrame:
        """Parquet files by their paths: the files are known, so their statuses are read on the driver, not by a
        listing job (Spark starts one for more than 32 paths)."""
        spark = self.lake.spark
        threshold = max(len(paths) + 1, int(spark.conf.get(LISTING_THRESHOLD) or 32))
        with self.lake.session_conf(LISTING_THRESHOLD, str(threshold)):
            return spark.read.schema(stored).parquet(*paths)

    def _held(self, group: list[tuple[Planned, TableFiles]], schema: T.StructType) -> DataFrame:
        """The rows the group's tables hold now, each with its table's index: those the driver wrote last where
        the table has not moved since (`driverfiles.Kept`), the others read from their files (each file's table
        found by its name)."""
        spark = self.lake.spark
        paths, names, kept = [], [], []
        for i, (p, tf) in enumerate(group):
            rows = self.kept.get(p.path, tf.version, tf.files)
            if rows is not None and rows.column_names == schema.fieldNames():
                if rows.num_rows:
                    kept.append(rows.append_column(TABLE, pa.array([i] * rows.num_rows, pa.int32())))
                continue
            for rel in tf.files:
                paths.append(f"{p.path}/{unquote(rel)}")
                names.append((file_name(rel), i))
        with_t = T.StructType([*schema.fields, T.StructField(TABLE, T.IntegerType())])
        # the rows the driver wrote last, where the table has not moved since: not read back from its files
        known = spark.createDataFrame(pa.concat_tables(kept, promote_options="permissive"), with_t) \
            if kept else None  # (tables kept from different micro-batches may differ in a column's nullability)
        if known is not None:  # the JVM's iterator over the rows' Arrow IPC bytes released: the local relation
            pycycles.young()  # holds the rows; the bytes were kept beside them through the batch (`pycycles`)
        if not paths:
            return known if known is not None else spark.createDataFrame([], with_t)
        which = local_rows(spark, names, [("__f", "string"), (TABLE, "int")])
        # column mapping: the files name the columns by their physical names (a table of its own: see `write`)
        phys = group[0][1].physical() or {}
        files = self._read_files(paths, stored_schema(schema, phys))
        read = (files.select("*", F.col("_metadata.file_name").alias("__f"))
                .join(F.broadcast(which), "__f")
                .select(*[F.col(q(phys.get(f.name, f.name))).alias(f.name) for f in schema.fields], TABLE))
        return read if known is None else read.unionByName(known)


def _join_columns(schema: T.StructType, keys: list[str], key_names: list[str], cols: list[str], vals: list[str],
                  has: list[str]) -> tuple[Column, Column, list[Column]]:
    """The join of a group's held rows (`e`) with their last operations (`l`): its condition, the rows it keeps and
    the columns it writes. Built once per table definition and file schema (`Projection.memo`): a few hundred
    Column objects, each a call into the JVM, that no micro-batch's values change."""
    cond = F.col(f"e.{TABLE}") == F.col(f"l.{TABLE}")
    nullable = {f.name for f in schema.fields if f.nullable}
    for k, n in zip(keys, key_names, strict=True):
        # a NOT NULL key joins by plain equality: its rows then stay partitioned as `last_ops` left them
        cond &= F.col(f"e.{q(k)}").eqNullSafe(F.col(f"l.{n}")) if k in nullable \
            else F.col(f"e.{q(k)}") == F.col(f"l.{n}")
    op = F.col("l.__op")
    out = [F.coalesce(F.col(f"l.{TABLE}"), F.col(f"e.{TABLE}")).alias(TABLE)]
    for f in schema.fields:
        old = F.col(f"e.{q(f.name)}")
        if f.name in keys:
            v = F.coalesce(F.col(f"l.{key_names[keys.index(f.name)]}"), old)
        elif f.name in cols:
            i = cols.index(f.name)
            v = F.when(op.isNull(), old).when(F.col(f"l.{has[i]}"), F.col(f"l.{vals[i]}")).otherwise(old)
        else:
            v = old
        v = v.cast(f.dataType)
        if not f.nullable:  # Delta's own writers refuse a NULL there: so does this one
            v = F.when(v.isNull(), F.raise_error(F.lit(f"NOT NULL column {f.name} would hold NULL"))).otherwise(v)
        out.append(v.alias(f.name))
    return cond, op.isNull() | (op == UPSERT), out
