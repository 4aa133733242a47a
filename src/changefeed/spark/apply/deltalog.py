"""A Delta table's log read and written from the driver, without a Spark job: what `multiwrite` needs.

A table written by `multiwrite` gets its data files from one Spark job shared by many tables; its commit is
then only actions (remove the files it rewrote, add the new ones, this consumer's txn version), made here as an
ordinary Delta commit (Delta's WRITE, mode overwrite) that every reader follows. Two ways to make it: delta-rs
and commits written as the log's next file (`log_rs`) on a local lake and on S3 where the session's S3A settings
hold static keys (`logstore`: a conditional PUT there), Delta's own `OptimisticTransaction` through py4j
(`log_jvm`) on any other file system. Which files a table holds is read once and then followed through this
consumer's own commits (a table whose log moved on since is read again).
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast
from urllib.parse import quote, unquote, urlparse

from ...errors import ApplyError
from ...s3http import S3Target
from ..objectstore import SchemaFolder, is_s3, storage_options
from .log_jvm import JvmLog
from .logstore import LogFiles, S3Files, bucket_key
from .tablefiles import TableFiles, column_names

if TYPE_CHECKING:
    from .log_jvm import LakeSession
    from .log_rs import RustLog

# files a rewrite may read and write again in one micro-batch: a table bigger than this keeps its MERGE
MAX_TABLE_BYTES = 64 << 20
DELTA_RS = "CHANGEFEED_DELTA_RS"  # 0: commit through the JVM on a local lake too
S3_DIRECT = "CHANGEFEED_S3_DIRECT"  # 0: commit through the JVM on S3 (Delta's own S3SingleDriverLogStore)
T = TypeVar("T")


class LogWriter(Protocol):
    """One way to read and commit a table's log from the driver (`log_rs`, `log_jvm`)."""

    def read(self, path: str, kept: TableFiles | None) -> TableFiles: ...
    def txn_version(self, path: str, app_id: str, prop: str) -> int: ...
    def create(self, path: str, schema_json: str, configuration: dict[str, str]) -> bool: ...
    def commit(self, path: str, before: TableFiles, added: list[tuple[str, int, int]], version: int,
               app_id: str, stats: dict[str, str] | None = None) -> int: ...


@functools.lru_cache(maxsize=1 << 15)  # asked ~14 times a table in a window over many tables
def local_folder(path: str, default_fs: str = "file:///") -> str | None:
    """The local folder of a lake path (a file: URI, or a path without a scheme while Hadoop's default file
    system is the local one), None on any other file system."""
    u = urlparse(path)
    if u.scheme == "":
        return path if urlparse(default_fs).scheme == "file" else None
    return unquote(u.path) if u.scheme == "file" and u.netloc in ("", "localhost") else None


class DeltaLogs:
    """The driver's view of the Delta logs it commits to."""

    def __init__(self, lake: LakeSession) -> None:
        self.lake = lake
        self._files: dict[str, TableFiles] = {}  # per table path, as of this consumer's last look or commit
        self._jvm: LogWriter = JvmLog(lake)
        self._rs: RustLog | None = None
        self._s3fs: dict[str, Any] = {}  # per bucket: pyarrow's S3 client, for the footers of files added on S3
        self._s3files: dict[str, LogFiles | None] = {}  # per bucket: its files for delta-rs's commits (None: JVM)
        self._s3_direct = os.environ.get(S3_DIRECT, "1") != "0"
        conf = lake.spark._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
        self._default_fs = str(conf.get("fs.defaultFS") or "file:///")
        if os.environ.get(DELTA_RS, "1") != "0":
            try:
                from .log_rs import RustLog

                self._rs = RustLog(self._store)
            except ImportError:  # no deltalake: every commit goes through the JVM
                self._rs = None

    def local(self, path: str) -> str | None:
        """The local folder of a lake path, None on another file system."""
        return local_folder(path, self._default_fs)

    def _store(self, path: str) -> LogFiles | None:
        """The files of an s3a:// path's store for delta-rs's commits, made once per bucket; None where its requests
        cannot be signed here (no static keys in the session's S3A settings: a credentials provider)."""
        bucket = bucket_key(path)[0]
        if bucket not in self._s3files:
            options = storage_options(self.lake.spark, bucket)
            self._s3files[bucket] = S3Files(options) if S3Target.of(options) is not None else None
        return self._s3files[bucket]

    def on_store(self, path: str) -> bool:
        """Whether an s3a:// table's commits (and its small rewrites' files) are made here, over the S3 API."""
        return self._rs is not None and self._s3_direct and is_s3(path) and "%" not in path \
            and self._store(path) is not None

    def _writer(self, path: str) -> tuple[LogWriter, str]:
        folder = self.local(path) if self._rs is not None else None
        # delta-rs reads a '%' in a local path as an escape (it then looks for another folder)
        if self._rs is not None and folder is not None and "%" not in folder:
            return self._rs, folder
        if folder is None and self.on_store(path):
            return cast("RustLog", self._rs), path.rstrip("/")
        return self._jvm, path

    def _read(self, path: str, ask: Callable[[LogWriter, str], T]) -> T:
        """`ask(writer, where)` of the table's writer; of Delta's own when delta-rs cannot read the table (a
        reader feature it lacks)."""
        w, where = self._writer(path)
        try:
            return ask(w, where)
        except ApplyError:
            raise  # (a commit of ours replaced: `RustLog.read` says so)
        except Exception:  # noqa: BLE001 - Delta reads every table it wrote
            if w is self._jvm:
                raise
            return ask(self._jvm, path)

    def files(self, path: str) -> TableFiles:
        """The table's files at its latest version (kept from this consumer's last look or commit when the log
        has not moved since)."""
        kept = self._files.get(path)
        tf = self._files[path] = self._read(path, lambda w, where: w.read(where, kept))
        return tf

    def columns(self, path: str) -> list[str] | None:
        """The table's column names when delta-rs reads its log (None: ask Spark)."""
        w, _ = self._writer(path)
        if w is self._jvm:
            return None
        try:
            tf = self.files(path)
        except Exception:  # noqa: BLE001 - no table there, or one neither can read: Spark says why
            return None
        return list(column_names(tf.schema_json))

    def txn_version(self, path: str, app_id: str, prop: str) -> int:
        """The consumer's txnVersion in the table, or the DDL version in its property `prop`, the higher."""
        return self._read(path, lambda w, where: w.txn_version(where, app_id, prop))

    def create(self, path: str, schema_json: str, configuration: dict[str, str]) -> bool:
        """A plain table (protocol 1/2, no features) of that schema and properties, as Delta's CREATE TABLE
        commit; False: a table is already there."""
        w, where = self._writer(path)
        self.forget(path)
        made = w.create(where, schema_json, configuration)
        if made and self._rs is not None and w is self._rs and self._rs.direct:
            # written as the log's first file (`logfile.creation`): its files known without reading it back
            self._files[path] = self._rs.created(schema_json, configuration)
        return made

    def create_many(self, tables: list[tuple[str, str, dict[str, str]]], *, defer: bool = False) -> list[bool]:
        """`create` of many tables (path, schema, properties): those delta-rs commits, at once (`RustLog.create_many`:
        a database's first micro-batch creates its tables), the others one by one. `defer`: those in a local folder
        whose commits are written here are made by their first commit instead (`RustLog.defer_many`; `materialize`
        makes the others)."""
        out = [False] * len(tables)
        rs: list[int] = []
        deferred: list[int] = []
        for i, (path, schema_json, configuration) in enumerate(tables):
            if self._rs is not None and self._writer(path)[0] is self._rs:
                (deferred if defer and self._rs.direct and self.local(path) is not None else rs).append(i)
            else:
                out[i] = self.create(path, schema_json, configuration)
        if deferred and self._rs is not None:
            for i in deferred:
                self.forget(tables[i][0])
            got = self._rs.defer_many([(self._writer(tables[i][0])[1], tables[i][1], tables[i][2]) for i in deferred])
            for i, tf in zip(deferred, got, strict=True):
                self._files[tables[i][0]] = tf
                out[i] = True
        if rs and self._rs is not None:
            wheres = []
            for i in rs:
                self.forget(tables[i][0])
                wheres.append((self._writer(tables[i][0])[1], tables[i][1], tables[i][2]))
            for i, made in zip(rs, self._rs.create_many(wheres), strict=True):
                out[i] = made
                if made and self._rs.direct:
                    self._files[tables[i][0]] = self._rs.created(tables[i][1], tables[i][2])
        return out

    def materialize(self, paths: list[str] | None = None) -> None:
        """The tables of `paths` (None: all) whose creation waits for their first commit (`create_many(defer=True)`)
        made now: before anything but that commit reads or changes them (a MERGE, a DDL, Spark's reads)."""
        if self._rs is None:
            return
        if paths is None:
            self._rs.materialize()
            return
        wheres = [where for writer, where in map(self._writer, paths) if writer is self._rs]
        self._rs.materialize(wheres)

    def creating(self, path: str) -> bool:
        """Whether the table at `path` waits for its first commit to be made (`create_many(defer=True)`)."""
        if self._rs is None:
            return False
        w, where = self._writer(path)
        return w is self._rs and self._rs.creating(where)

    def appends(self, path: str) -> bool:
        """Whether this table's appends are committed here (by delta-rs, on a local lake)."""
        return self._writer(path)[0] is self._rs and self.local(path) is not None

    def append(self, path: str, added: list[tuple[str, int, int]], version: int, app_id: str,
               stats: dict[str, str] | None = None) -> None:
        """Files moved into the table's folder (name, size, modification time) added as this consumer's commit
        `version` (only where `appends` or `on_store`); `stats`: theirs where the caller has them."""
        w, where = self._writer(path)
        if self._rs is None or w is not self._rs:
            raise TypeError(f"{path}: appends are committed here by delta-rs only")
        before = self.files(path)
        try:
            committed = self._rs.append(where, before, added, version, app_id,
                                        stats if stats is not None else self.stats(path, before, added))
        except Exception:
            self.forget(path)
            raise
        if committed != before.version + 1:  # another writer's commit came between: read the log next time
            self.forget(path)
            return
        # followed here, not listed again from the log: a log appended every micro-batch grows without end
        self._files[path] = TableFiles(committed, before.schema_json,
                                       {**before.files, **{quote(n): s for n, s, _ in added}}, before.refused,
                                       before.configuration)

    def forget(self, path: str) -> None:
        """Nothing kept of the table at `path` (moved, dropped, created again, or a failed commit)."""
        self._files.pop(path, None)
        w, where = self._writer(path)
        if self._rs is not None and w is self._rs:
            self._rs.forget(where)

    def settle(self) -> None:
        """Wait for the Delta checkpoints queued in the background (`checkpoints.py`)."""
        if self._rs is not None:
            self._rs.settle()

    def commit(self, path: str, before: TableFiles, added: list[tuple[str, int, int]], version: int,
               app_id: str, stats: dict[str, str] | None = None) -> TableFiles:
        """Replace every file of `before` by `added` (name in the table's folder, size, modification time), as
        this consumer's commit `version`, in one Delta commit on top of `before.version`: the table as that
        commit left it. `stats`: the added files' statistics where the caller has them (else read from their
        footers)."""
        w, where = self._writer(path)
        try:
            committed = w.commit(where, before, added, version, app_id,
                                 stats if stats is not None else self.stats(path, before, added))
        except Exception:
            self.forget(path)
            raise
        tf = self._files[path] = TableFiles(committed, before.schema_json, {quote(n): s for n, s, _ in added}, None,
                                            before.configuration)
        return tf

    def commit_all(self, items: list[tuple[str, TableFiles, list[tuple[str, int, int]], int, str,
                                           dict[str, str] | None]]) -> list[TableFiles]:
        """`commit` of many tables (path, before, added, version, app id, stats): those delta-rs commits in a local
        folder with their log files made durable together (`RustLog.commit_all`: a database's first micro-batch
        commits each of its tables), the rest one by one."""
        items = list(items)
        out: list[TableFiles | None] = [None] * len(items)
        rs: list[int] = []
        wheres: list[tuple[str, TableFiles, list[tuple[str, int, int]], int, str, dict[str, str] | None]] = []
        for i, (path, before, added, version, app_id, stats) in enumerate(items):
            w, where = self._writer(path)
            if self._rs is not None and w is self._rs and self.local(path) is not None:
                rs.append(i)
                wheres.append((where, before, added, version, app_id,
                               stats if stats is not None else self.stats(path, before, added)))
        if self._rs is not None and rs:
            try:
                done = self._rs.commit_all(wheres)
            except Exception:
                for i in rs:
                    self.forget(items[i][0])
                raise
            for i, w, committed in zip(rs, wheres, done, strict=True):
                if committed is not None:
                    path, before, added = items[i][0], items[i][1], items[i][2]
                    out[i] = self._files[path] = TableFiles(committed, before.schema_json,
                                                            {quote(n): s for n, s, _ in added}, None,
                                                            before.configuration)
                    continue
                items[i] = (*items[i][:5], w[5])  # (its stats, read once)
        return [tf if tf is not None else self.commit(*items[i]) for i, tf in enumerate(out)]

    def alter(self, path: str, before: TableFiles, added: list[tuple[str, int, int]], version: int, app_id: str,
              operation: str, schema_json: str | None, *, replace: bool = False,
              stats: dict[str, str] | None = None, properties: dict[str, str] | None = None,
              features: tuple[str, ...] = ()) -> TableFiles | None:
        """A DDL's commit made here (`RustLog.alter`: a local lake's plain table): `schema_json` its new schema (None:
        unchanged), `added` files added (every file of `before` removed first with `replace`), this consumer's
        `version`, `properties` set and `features` turned on with the schema (`ddlfeatures`). The table as the log now
        holds it; None where it is not made so (nothing committed)."""
        w, where = self._writer(path)
        if self._rs is None or w is not self._rs or self.local(path) is None:
            return None
        try:
            committed = self._rs.alter(where, before, before.files if replace else {}, added, version, app_id,
                                       operation, schema_json, stats, properties, features)
        except Exception:
            self.forget(path)
            raise
        if committed is None:
            return None
        if committed != before.version + 1 or schema_json is not None:
            self._files.pop(path, None)  # read back from the log: the schema as delta-rs gives it
            return self.files(path)
        files = {} if replace else dict(before.files)
        tf = self._files[path] = TableFiles(committed, before.schema_json,
                                            {**files, **{quote(n): s for n, s, _ in added}}, before.refused,
                                            before.configuration)
        return tf

    def put_file(self, path: str, name: str, data: bytes) -> None:
        """A data file of the table at an s3a:// `path` (where `on_store`), written whole by one PUT."""
        store = self._store(path)
        if store is None:
            raise TypeError(f"{path}: files are written here on S3 only")
        store.put(f"{path.rstrip('/')}/{name}", data)

    def stats(self, path: str, before: TableFiles, added: list[tuple[str, int, int]]) -> dict[str, str] | None:
        """Each added file's `stats` JSON (by name), read from its Parquet footer: in the table's folder on a local
        lake, over the S3 API (a ranged GET of the footer, pyarrow's S3 client with the session's S3A settings) on
        an s3a:// one; elsewhere the adds go without (readers then read the file)."""
        if not added:
            return None
        folder = self.local(path)
        filesystem: Any = None
        if folder is None:
            if not is_s3(path):
                return None
            filesystem, folder = self._s3(path)
        from .filestats import of_file

        out = {}
        for n, _, _ in added:
            try:
                out[n] = of_file(f"{folder}/{n}" if filesystem is not None else os.path.join(folder, n),
                                 before.schema_json, before.configuration, filesystem)
            except Exception:  # noqa: BLE001 - stats are optional: a footer pyarrow cannot read goes without
                continue
        return out

    def _s3(self, path: str) -> tuple[Any, str]:
        """pyarrow's S3 file system for the table's bucket (made once per bucket), and the table's bucket/key."""
        bucket = urlparse(path).netloc
        fs = self._s3fs.get(bucket)
        if fs is None:
            fs = self._s3fs[bucket] = SchemaFolder(path, storage_options(self.lake.spark, bucket)).filesystem()[0]
        u = urlparse(path)
        return fs, f"{u.netloc}{unquote(u.path)}".rstrip("/")


def new_file_name() -> str:
    """A data file's name, unique across every table (`multiwrite` finds a file's table by its name)."""
    return f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"


def file_name(relative: str) -> str:
    """The last component of a log path (URI-encoded, relative to the table), as Spark's `_metadata.file_name`
    gives it."""
    return unquote(relative).rsplit("/", 1)[-1]
