"""The lake as the applier touches it: Delta tables and the Hadoop file system, with idempotent commits.

Every `spark._jvm` use of the applier is here. A table's commits carry Delta's txnAppId (the consumer's app id)
and txnVersion (how far the table is complete: see `schedule.txn_version`); `txn_version` reads that back once
per table and then follows this consumer's own commits. Delta reads txnAppId/txnVersion from session confs, so
each writer thread works in its own clone of the session (`own_session`).
"""

from __future__ import annotations

import os
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import orjson

from ...errors import ApplyError
from .. import table_features as features
from ..caching import cache_in_session
from ..layout import LakeLayout
from . import driverfiles
from .deltalog import DeltaLogs, new_file_name
from .options import sql_string

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .names import TableNames


def read_json_files(spark: SparkSession, folder: str, prefix: str, *, last: bool = False) -> list[Any]:
    """The JSON files `<folder>/<prefix>*.json`, in name order (`last=True`: only the last), parsed."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    path = jvm.org.apache.hadoop.fs.Path(folder)
    fs = path.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    if not fs.exists(path):
        return []
    names = sorted(st.getPath().getName() for st in fs.listStatus(path))
    names = [n for n in names if n.startswith(prefix) and n.endswith(".json")]
    out = []
    for n in names[-1:] if last else names:
        stream = fs.open(jvm.org.apache.hadoop.fs.Path(path, n))
        try:
            out.append(orjson.loads(bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream))))
        finally:
            stream.close()
    return out


DRIVER_APPEND_ROWS = 50_000  # an S3 log's append of at most this many rows is written by the driver
STAGED_COMMITTER = "mapreduce.fileoutputcommitter.algorithm.version"
SUCCESS_MARKER = "mapreduce.fileoutputcommitter.marksuccessfuljobs"
_LOG_FILE = re.compile(r"\d{20}\.json|\d{20}\.checkpoint(\.\d+\.\d+)?(\.[^.]+)?\.parquet|_last_checkpoint")


class Lake:
    """One lake, for one consumer (app id): paths, Delta tables, their versions, and the file system."""

    def __init__(self, spark: SparkSession, lake: str, app_id: str) -> None:
        self._main_spark = spark
        self._local = threading.local()  # a writer thread's own session (its txnAppId/txnVersion confs)
        self.layout = LakeLayout(lake)
        self.app_id = app_id
        self._versions: dict[str, int] = {}  # per table path: the version it is complete up to (memory only)
        self._tables: set[str] = set()  # paths known to hold a Delta table (made or seen by create_table)
        self.logs = DeltaLogs(self)  # driver-side commits (creating plain tables, `multiwrite`)
        self.names: TableNames | None = None  # the catalogs that name the tables (`names`), told what happens here

    @property
    def spark(self) -> SparkSession:
        """The session of the calling thread: the consumer's, or a writer thread's clone of it. Delta reads a
        commit's txnAppId/txnVersion from session confs, so tables written at once each need their own."""
        return getattr(self._local, "spark", None) or self._main_spark

    def own_session(self) -> None:
        """Give the calling (writer) thread its own clone of the consumer's session, once."""
        if getattr(self._local, "spark", None) is None:
            from pyspark.sql import SparkSession

            main = self._main_spark
            self._local.spark = SparkSession(main.sparkContext, main._jsparkSession.cloneSession())  # type: ignore[attr-defined]
            cache_in_session(self._local.spark)  # its MERGE sources cached without a clone each (caching.py)

    # --- paths and tables -----------------------------------------------------------------------
    def path(self, database: str, table: str) -> str:
        return self.layout.table(database, table)

    def _jvm_log(self, path: str) -> Any:
        jvm = self.spark._jvm  # type: ignore[attr-defined]
        return jvm.org.apache.spark.sql.delta.DeltaLog.forTable(self.spark._jsparkSession, path)  # type: ignore[attr-defined]

    def exists(self, path: str) -> bool:
        """A Delta table is there: its log holds a commit or a checkpoint (a folder, or an empty log, is none)."""
        folder = self.logs.local(path)
        if folder is not None:  # no py4j call: a window over many tables asks for each
            try:
                with os.scandir(os.path.join(folder, "_delta_log")) as it:
                    return any(_LOG_FILE.fullmatch(e.name) for e in it)
            except (FileNotFoundError, NotADirectoryError):
                return False
        jvm = self.spark._jvm  # type: ignore[attr-defined]
        return bool(jvm.io.delta.tables.DeltaTable.isDeltaTable(self.spark._jsparkSession, path))  # type: ignore[attr-defined]

    def read(self, path: str) -> DataFrame:
        return self.spark.read.format("delta").load(path)

    def columns(self, path: str) -> list[str]:
        """A table's columns: from its log by delta-rs on a local lake (Spark would first rebuild the state of a
        version delta-rs committed, with a Spark job), else from Spark's read of it."""
        cols = self.logs.columns(path)
        return cols if cols is not None else self.read(path).columns

    def sql(self, statement: str) -> DataFrame:
        return self.spark.sql(statement)

    # --- versions: idempotent commits -----------------------------------------------------------
    def txn_version(self, path: str) -> int:
        """The commit ts a table is complete up to for this consumer (-1: none, or no table).

        Read from the table's Delta log once (its txnVersion for our app id, or the DDL version property),
        then kept here as this consumer commits."""
        v = self._versions.get(path)
        if v is None:
            v = self._versions[path] = self._read_version(path)
        return v

    def _read_version(self, path: str) -> int:
        if not self.exists(path):
            return -1
        return self.logs.txn_version(path, self.app_id, self.ddl_property)

    @property
    def ddl_property(self) -> str:
        return f"changefeed.{self.app_id}.ddlVersion"

    def with_txn(self, version: int, fn: Callable[[], Any], path: str | None = None) -> Any:
        """Run `fn` (one Delta commit) as this consumer's commit `version` (of the table at `path`)."""
        conf = self.spark.conf
        conf.set("spark.databricks.delta.write.txnAppId", self.app_id)
        conf.set("spark.databricks.delta.write.txnVersion", str(version))
        try:
            out = fn()
        finally:
            conf.unset("spark.databricks.delta.write.txnAppId")
            conf.unset("spark.databricks.delta.write.txnVersion")
        if path is not None:
            self.committed(path, version)
        return out

    def known_tables(self) -> list[str]:
        """The tables this consumer has read its version of or committed to since it started."""
        return list(self._versions)

    def committed(self, path: str, version: int) -> None:
        """This consumer's commit `version` of the table at `path` is in."""
        self._versions[path] = max(self._versions.get(path, -1), version)

    def mark(self, path: str, version: int) -> None:
        """Record that a DDL is applied: a table property (a metadata-only commit, no Spark job)."""
        self.spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({sql_string(self.ddl_property)} = "
                       f"'{version}')")
        self._versions[path] = max(self._versions.get(path, -1), version)

    def merge_in_memory(self, path: str, source: DataFrame, cond: str, version: int,
                        clauses: Callable[[Any], Any]) -> None:
        """A MERGE whose source is computed once, into memory: Delta would otherwise materialize it on disk
        (`merge.materializeSource=auto`), needed only for a source that could change between its two passes.
        Ours cannot (a pure function of the cached micro-batch, each key's last change picked by a total order)."""
        from delta.tables import DeltaTable

        source = source.persist()
        try:
            with self.session_conf("spark.databricks.delta.merge.materializeSource", "none"):
                merge = clauses(DeltaTable.forPath(self.spark, path).alias("t").merge(source.alias("s"), cond))
                self.with_txn(version, merge.execute, path)
        finally:
            source.unpersist()

    @contextmanager
    def session_conf(self, key: str, value: str) -> Iterator[None]:
        """The calling thread's session with `key` set to `value` for a while, then as it was (unset if it was)."""
        conf = self.spark.conf
        was = conf.get(key, None)
        conf.set(key, value)
        try:
            yield
        finally:
            if was is None:
                conf.unset(key)
            else:
                conf.set(key, was)

    # --- creating, moving, dropping -------------------------------------------------------------
    def create_table(self, path: str, schema_of: Callable[[], Any], version: int | None = None) -> None:
        """A Delta table of the schema `schema_of()` gives at `path`, unless there is one; `version`: the DDL
        that creates it, recorded as applied in the same commit (see `mark`)."""
        if path in self._tables:
            return
        if self.exists(path):
            self._tables.add(path)
            if self.names is not None:
                self.names.created(self.spark, path)
            return
        from delta.tables import DeltaTable

        schema = schema_of()
        props = features.creation_properties(schema.fieldNames())  # plain unless a name needs more
        marks = {self.ddl_property: str(version)} if version is not None else {}
        if props or not all(features.plain(f.dataType) for f in schema.fields):
            self._clear_empty_log(path)
            b = DeltaTable.createIfNotExists(self.spark).location(path).addColumns(schema)
            for k, v in {**props, **marks}.items():
                b = b.property(k, v)
            b.execute()
        else:  # the same commit, made without planning a CREATE TABLE statement (a database's tables: many)
            self.logs.create(path, schema.json(), marks)
        self._tables.add(path)
        if self.names is not None:
            self.names.created(self.spark, path)
        if version is not None:
            self.committed(path, version)

    def _clear_empty_log(self, path: str) -> None:
        """A local table's `_delta_log` left without a file by a run killed while Delta's builder was creating the
        table (its folders made, `_staged_commits` among them, no commit yet): the builder then takes the folder for
        a table and fails (DELTA_TABLE_NOT_FOUND) on the restart. Its empty folders go (`rmdir` removes only an empty
        one: nothing is lost); any file in them leaves them all as they are."""
        folder = self.logs.local(path)
        if folder is None:
            return
        for root, _, files in os.walk(os.path.join(folder, "_delta_log"), topdown=False):
            if files:
                return
            try:
                os.rmdir(root)
            except OSError:
                return

    def create_tables(self, tables: list[tuple[str, Callable[[], Any], int]], *, defer: bool = False) -> None:
        """The plain new tables among (path, schema_of, version) made at once as `create_table` makes each
        (`logs.create_many`: a database's first micro-batch creates its tables, each first log file waiting for
        the disk took ~6 ms one after another); the others are left to `create_table` (Delta's CREATE TABLE,
        which the caller's writer threads run side by side). `defer`: a local lake's tables are made by their
        first commit, the creation and the first rows in one log file (`DeltaLogs.create_many`); the caller runs
        `materialize` before anything else reads or changes them (not with a catalog naming the tables: it is
        told of each table as it is made)."""
        plain: list[tuple[str, Any, int]] = []
        for path, schema_of, version in tables:
            if path in self._tables or self.exists(path):
                continue
            schema = schema_of()
            if not features.creation_properties(schema.fieldNames()) \
                    and all(features.plain(f.dataType) for f in schema.fields):
                plain.append((path, schema, version))
        made = self.logs.create_many([(p, sc.json(), {self.ddl_property: str(v)}) for p, sc, v in plain],
                                     defer=defer and self.names is None)
        for (path, schema, version), ok in zip(plain, made, strict=True):
            if not ok:  # another writer made it meanwhile: as `create_table` finds it
                self.create_table(path, lambda sc=schema: sc, version)
                continue
            self._tables.add(path)
            if self.names is not None:
                self.names.created(self.spark, path)
            self.committed(path, version)

    def materialize(self, paths: list[str] | None = None) -> None:
        """The tables (of `paths`; None: all) `create_tables(defer=True)` left to their first commit, made now."""
        self.logs.materialize(paths)

    def create_log(self, path: str, schema: Any, stats: str, properties: dict[str, str] | None = None) -> None:
        """An append-only table of the consumer's, with file statistics only on the columns its readers filter
        by: statistics on every column (images, raw bytes) made each append measurably slower (see
        bench/RESULTS.md). `properties`: table properties it is created with (what the changelog keeps). A plain
        one (protocol 1/2) is made by the driver's log writer (`DeltaLogs.create_many`): Delta's CREATE TABLE
        took ~0.3-0.7 s of the JVM on a consumer's first micro-batch (twice: the dead letters and the changelog)."""
        from delta.tables import DeltaTable

        if all(features.plain_nested(f.dataType) for f in schema.fields):
            self.logs.create_many([(path, schema.json(), {"delta.dataSkippingStatsColumns": stats,
                                                          **(properties or {})})])
            return  # made, or there already (as createIfNotExists)

        b = (DeltaTable.createIfNotExists(self.spark).location(path).addColumns(schema)
             .property("delta.dataSkippingStatsColumns", stats))
        for k, v in (properties or {}).items():
            b = b.property(k, v)
        b.execute()

    def append(self, rows: DataFrame, path: str, batch_id: int, count: int | None = None) -> bool:
        """Rows appended to a log as this consumer's commit `batch_id` (once, however often it is replayed); False
        when the rows may not have been read: the log held them already (a replay), or Delta's own append took
        them (it skips a replay without reading them). `count`: how many rows at most, where known.

        On a local lake the rows are written as plain Parquet and committed by delta-rs: Spark's Delta append
        (its snapshot update, statistics, checksum and post-commit work) took about a second of each micro-batch
        beside the table writes, for a few rows (bench/RESULTS.md). On S3 (where `logs.on_store`) a known, small
        number of rows is collected to the driver and written as one file by one PUT into the log's folder, then
        committed the same way (a Spark job's files would each be copied twice on S3: at its task's commit, then
        from staging). A log whose schema is not the rows' is left to Delta's append, which says what differs."""
        if count is not None and count <= DRIVER_APPEND_ROWS and self.logs.on_store(path) \
                and self._same_schema(path, rows):
            if self.txn_version(path) >= batch_id:
                return False  # a replayed batch: its rows are in
            tf = self.logs.files(path)
            added, stats = driverfiles.put(rows.toArrow(), new_file_name,
                                           lambda n, d: self.logs.put_file(path, n, d), tf.schema_json,
                                           tf.configuration)
            self.logs.append(path, added, batch_id, self.app_id, stats)
            self.committed(path, batch_id)
            return True
        if self.logs.appends(path) and self._same_schema(path, rows):
            if self.txn_version(path) >= batch_id:
                return False  # a replayed batch: its rows are in
            stage = f"{self.staging}/{uuid.uuid4().hex}"
            try:
                self.write_staged(rows, stage)
                self.logs.append(path, self.move_files(stage, path, new_file_name), batch_id, self.app_id)
            finally:
                self.remove_own(stage)
            self.committed(path, batch_id)
            return True
        rows.write.format("delta").mode("append").option("txnAppId", self.app_id).option(
            "txnVersion", batch_id).save(path)
        return False  # (Delta skips a replay's append without reading its rows)

    def _same_schema(self, path: str, rows: DataFrame) -> bool:
        from pyspark.sql import types as T

        have = T.StructType.fromJson(orjson.loads(self.logs.files(path).schema_json))
        return [(f.name, f.dataType) for f in have.fields] == [(f.name, f.dataType) for f in rows.schema.fields]

    def move(self, src: str, dst: str) -> bool:
        """A table's folder moved (RENAME TABLE), when it is there and the new one is not; False: the file system
        refused the move."""
        fs, ps = self._fs(src)
        _, pd = self._fs(dst)
        if fs.exists(ps) and not fs.exists(pd):
            self.logs.forget(src)  # (a checkpoint of it being written waited for)
            if self.names is not None:
                self.names.moving(self.spark, src)
            fs.mkdirs(pd.getParent())
            if not fs.rename(ps, pd):
                return False
            if self.names is not None:
                self.names.moved(self.spark, dst)
            self._versions.pop(src, None)
            self._versions.pop(dst, None)
            for p in (src, dst):
                self._tables.discard(p)
                self.logs.forget(p)
        return True

    def drop(self, path: str) -> None:
        """DROP TABLE: remove the table's folder, only when it is a Delta table (what the pipeline made),
        never a folder of the user's that happens to sit at that path."""
        fs, p = self._fs(path)
        if fs.exists(p) and fs.exists(self._fs(f"{path}/_delta_log")[1]):
            self.logs.forget(path)  # (a checkpoint of it being written waited for)
            if self.names is not None:
                self.names.dropping(self.spark, path)
            fs.delete(p, True)
        self._versions.pop(path, None)
        self._tables.discard(path)
        self.logs.forget(path)

    def move_files(self, src: str, dst: str, name: Callable[[], str]) -> list[tuple[str, int, int]]:
        """The Parquet files of folder `src` moved into `dst`, each under a new `name()`: (name, size,
        modification time in ms) of each."""
        a, b = self.logs.local(src), self.logs.local(dst)
        if a is not None and b is not None:  # a few system calls, not py4j calls per file
            if not os.path.isdir(a):
                return []
            out = []
            for f in sorted(os.listdir(a)):
                if f.endswith(".parquet"):
                    n = name()
                    os.rename(os.path.join(a, f), os.path.join(b, n))
                    st = os.stat(os.path.join(b, n))
                    out.append((n, st.st_size, int(st.st_mtime * 1000)))
            return out
        fs, ps = self._fs(src)
        jvm = self.spark._jvm  # type: ignore[attr-defined]
        out = []
        if not fs.exists(ps):
            return out
        for st in fs.listStatus(ps):
            if not st.getPath().getName().endswith(".parquet"):
                continue
            n = name()
            target = jvm.org.apache.hadoop.fs.Path(dst, n)
            if not fs.rename(st.getPath(), target):
                raise ApplyError(f"cannot move {st.getPath()} to {target}")
            moved = fs.getFileStatus(target)
            out.append((n, int(moved.getLen()), int(moved.getModificationTime())))
        return out

    def write_staged(self, rows: DataFrame, folder: str, partition_by: str | None = None) -> None:
        """Rows as Parquet files in a staging folder of ours, each task's files put in place when it ends (the
        committer's version 2: no second rename per file when the job ends, which a write of one file per table
        of hundreds made a visible cost; a failed job's files stay in staging, removed with it)."""
        w = rows.write.option(STAGED_COMMITTER, "2").option(SUCCESS_MARKER, "false")
        if partition_by is not None:
            w = w.partitionBy(partition_by)
        w.parquet(folder)

    @property
    def staging(self) -> str:
        """This consumer's staging folder (its app id's: consumers of other app ids may share the lake)."""
        return f"{self.layout.staging}/{quote(self.app_id, safe='')}"

    def remove_own(self, path: str) -> None:
        """Remove a folder of the consumer's own (staging), never anything else."""
        if not path.startswith(f"{self.layout.staging}/"):
            raise ApplyError(f"{path} is not the consumer's own folder")
        fs, p = self._fs(path)
        if fs.exists(p):
            fs.delete(p, True)

    def tables_of(self, db: str) -> list[str]:
        fs, p = self._fs(self.layout.database(db))
        if not fs.exists(p):
            return []
        return [self.layout.table(db, st.getPath().getName()) for st in fs.listStatus(p) if st.isDirectory()
                and fs.exists(st.getPath().suffix("/_delta_log"))]  # Delta tables only, not the user's folders

    def all_tables(self) -> list[str]:
        """Every Delta table of the lake (`<lake>/<db>/<table>`; not the lake's own, under `_changefeed`)."""
        fs, p = self._fs(self.layout.lake)
        if not fs.exists(p):
            return []
        dbs = [st.getPath().getName() for st in fs.listStatus(p) if st.isDirectory()]
        return [t for db in sorted(dbs) if not db.startswith("_") for t in self.tables_of(db)]

    def _fs(self, path: str) -> tuple[Any, Any]:
        jvm = self.spark._jvm  # type: ignore[attr-defined]
        p = jvm.org.apache.hadoop.fs.Path(path)
        return p.getFileSystem(self.spark._jsc.hadoopConfiguration()), p  # type: ignore[attr-defined]

    # --- small files ----------------------------------------------------------------------------
    def write_json(self, folder: str, name: str, data: Any, what: str) -> None:
        """`<folder>/<name>` holding `data` as JSON, written aside and renamed (replacing an older one); `what`
        names it if that fails. On S3 (where `logs.on_store`) one PUT: an object appears whole or not at all, and
        S3A's rename is a copy (plus the delete and the looks before it: several round trips a micro-batch)."""
        if self.logs.on_store(folder):
            try:
                self.logs.put_file(folder, name, orjson.dumps(data))
            except OSError as e:
                raise ApplyError(f"cannot write {what} at {folder.rstrip('/')}/{name}: {e}") from e
            return
        fs, dir_ = self._fs(folder)
        jvm = self.spark._jvm  # type: ignore[attr-defined]
        tmp = jvm.org.apache.hadoop.fs.Path(dir_, f".{name}.tmp")
        out = fs.create(tmp, True)
        try:
            out.write(bytearray(orjson.dumps(data)))
        finally:
            out.close()
        final = jvm.org.apache.hadoop.fs.Path(dir_, name)
        if fs.exists(final):
            fs.delete(final, False)  # the same batch again (a replay): its newer outcome
        if not fs.rename(tmp, final):
            raise ApplyError(f"cannot write {what} at {final}")
