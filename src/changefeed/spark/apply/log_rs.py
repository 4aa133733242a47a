"""A Delta table's log read and committed from the driver with delta-rs (the `deltalake` package), for lakes in a
local folder or on S3 (`logstore`: the files there; delta-rs given the store's `storage_options`).

A driver-side commit through Delta's JVM classes costs several times what delta-rs takes for the same commit,
and a table's creation more still (Delta plans a query over the empty table for its first checksum): a window
over hundreds of tables pays that per table (figures in bench/RESULTS.md). A plain table's commits and creation
are written as the log's files (`logfile`: cheaper still than delta-rs's own commit), others by delta-rs; reads
and checkpoints are delta-rs's. Either way they are ordinary Delta commits (add, remove, txn, commitInfo;
checkpoints at the table's interval) that Spark's Delta reads and continues; neither writes checksum files, so
Spark rebuilds a table's state itself when it next writes one (a MERGE, a DDL), and `Lake.columns` asks delta-rs
for a table's columns rather than Spark.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import orjson

from ...errors import ApplyError
from ..objectstore import is_s3
from . import ddlfeatures, logfile
from .checkpoints import Checkpointer, due
from .log_create import LOCAL, Creation, log_file
from .logstore import LogFiles
from .tablefiles import TableFiles, refusal

DIRECT = "CHANGEFEED_DIRECT_COMMITS"  # 0: every commit through delta-rs (else plain ones are written as files)
EXPIRED_LOG_CLEANUP = "delta.enableExpiredLogCleanup"
REBASES = 5  # a rewrite re-planned on a newer version at most this often (other writers committing meanwhile)
CHECKPOINT_INTERVAL = 10  # Delta's default `delta.checkpointInterval` (delta-rs's own is 100)
# Delta's type widening: delta-rs (1.6) opens and checkpoints such a table but refuses to commit to it
WIDENING = frozenset({"typeWidening", "typeWidening-preview"})


class RustLog(Creation):
    """`JvmLog`'s interface over delta-rs; paths are local folders, or s3a:// ones where `s3` gives the store's
    files for a path. Each table's `DeltaTable` is kept between
    calls and brought up to date only when its log holds a later commit: loading one from its log took about as
    long as the commit itself (a window over hundreds of tables commits each)."""

    # tables kept open at most, the least recently used closed first: an open table holds its log's state in Rust
    # memory (~50 KB for a small table: 10,000 tables took ~500 MB of the driver's; bench/table_memory.py), and a
    # table written by this consumer's own commits needs none between its checkpoints
    KEEP = 512

    def __init__(self, s3: Callable[[str], LogFiles | None] | None = None) -> None:
        self.s3 = s3
        self._open: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()
        # a table whose kept object is brought up to its own commit after it, off the commit's path
        self._following: dict[str, Future[None]] = {}
        self._follower = ThreadPoolExecutor(1, thread_name_prefix="changefeed-deltars-follow")
        self._interval: dict[str, int] = {}  # a table's checkpoint interval, as last read
        self._cleanup: dict[str, bool] = {}  # whether its expired log files are removed after a checkpoint
        self._checkpoint: dict[str, int] = {}  # a table's last checkpoint version, as last seen (or queued)
        self._checkpoints = Checkpointer(lambda path: self._checkpoint.pop(path, None))
        # the last commit file linked here per table: (version, inode, size), to notice it replaced
        self._own: dict[str, tuple[int, int, int]] = {}
        # a new table whose creation waits for its first commit (`defer_many`): its schema and properties
        self._creating: dict[str, tuple[str, dict[str, str]]] = {}
        self.direct = os.environ.get(DIRECT, "1") != "0"

    def files(self, path: str) -> LogFiles:
        """Where the table's files are."""
        if is_s3(path):
            files = self.s3(path) if self.s3 is not None else None
            if files is None:
                raise ValueError(f"{path}: no S3 store given")
            return files
        return LOCAL

    def _table(self, path: str) -> Any:
        """The table at its latest version."""
        pending = self._following.pop(path, None)
        if pending is not None:
            pending.result()
        with self._lock:  # (writer threads open tables at once)
            dt = self._open.get(path)
            if dt is not None:
                self._open.move_to_end(path)
        files = self.files(path)
        if dt is not None:
            if files.exists(log_file(path, dt.version() + 1)):
                dt.update_incremental()
            return dt
        from deltalake import DeltaTable

        dt = DeltaTable(files.uri(path), storage_options=files.options)
        with self._lock:
            self._open[path] = dt
            while len(self._open) > self.KEEP:  # a table closed while another thread uses it stays usable
                self._open.popitem(last=False)
        return dt

    def forget(self, path: str) -> None:
        self._checkpoints.settle(path)  # (before its folder is removed or moved, as after)
        pending = self._following.pop(path, None)
        if pending is not None:
            pending.exception()  # done with it either way: the table is read anew
        with self._lock:
            self._open.pop(path, None)
        self._checkpoint.pop(path, None)
        self._own.pop(path, None)
        self._creating.pop(path, None)

    def read(self, path: str, kept: TableFiles | None) -> TableFiles:
        """The table's files at its latest version (`kept` when the log holds no later commit)."""
        self._check_own(path)
        if kept is not None and not self.files(path).exists(log_file(path, kept.version + 1)):
            return kept
        self._creating.pop(path, None)  # another writer made the table first: its version 0 stands
        dt = self._table(path)
        protocol = _protocol(dt)
        m = dt.metadata()
        schema = dt.schema().to_json()
        meta = {"partitionColumns": list(m.partition_columns), "configuration": dict(m.configuration),
                "schemaString": schema}
        self._interval[path] = int(m.configuration.get("delta.checkpointInterval") or CHECKPOINT_INTERVAL)
        self._cleanup[path] = str(m.configuration.get(EXPIRED_LOG_CLEANUP, "true")).lower() != "false"
        adds = _adds(dt)  # deletion vectors come with their table feature: refused by the protocol
        # delta-rs gives each path as the log holds it (URI-encoded already): kept as is
        files = {a["path"]: int(a["size_bytes"]) for a in adds}
        refused = refusal(protocol, meta, [])
        if refused is None and WIDENING.intersection(protocol["writerFeatures"] or ()) \
                and not (self.direct and logfile.plain(files)):
            refused = "type widening (delta-rs does not commit it: only the log files written here do)"
        return TableFiles(dt.version(), schema, files, refused, dict(m.configuration))

    def txn_version(self, path: str, app_id: str, prop: str) -> int:
        """This app's txnVersion, or the DDL version in table property `prop`, whichever is higher."""
        creating = self._creating.get(path)
        if creating is not None:  # made by its first commit, still to come
            return int(creating[1].get(prop, -1))
        dt = self._table(path)
        txn = dt.transaction_version(app_id)
        ddl = dt.metadata().configuration.get(prop)
        return max(-1 if txn is None else int(txn), -1 if ddl is None else int(ddl))

    def append(self, path: str, before: TableFiles, added: list[tuple[str, int, int]], version: int,
               app_id: str, stats: dict[str, str] | None = None) -> int:
        """Files added (none: a commit of the txn alone) to the table `before` was read of, with this app's txn
        `version`: the version committed."""
        from deltalake.transaction import CommitProperties, Transaction

        if self._direct(before, added):
            committed = self._put(path, before, {}, added, version, app_id, "Append", stats)
            if committed is not None:
                return committed
            # another writer's commit came first (or no links here): delta-rs appends on top of what is there
        self.materialize([path])
        dt = self._table(path)
        dt.create_write_transaction(_adds_of(added, stats), mode="append", schema=dt.schema(),
                                    commit_properties=CommitProperties(
                                        app_transactions=[Transaction(app_id, version, int(time.time() * 1000))]))
        dt.update_incremental()
        return dt.version()

    def commit(self, path: str, before: TableFiles, added: list[tuple[str, int, int]], version: int,
               app_id: str, stats: dict[str, str] | None = None) -> int:
        """Every file of `before` replaced by `added`, with this app's txn `version`: the version committed."""
        from deltalake.transaction import CommitProperties, Transaction

        for _ in range(REBASES):
            if not self._direct(before, added):
                break
            committed = self._put(path, before, before.files, added, version, app_id, "Overwrite", stats)
            if committed is not None:
                return committed
            if not self.direct:  # no links here: delta-rs commits it, below
                break
            before = self._rebased(path, before)
        if path in self._creating:  # no links here: the table made first, then committed to by delta-rs
            self.materialize([path])
            before = self.read(path, None)
        dt = self._table(path)
        if dt.version() != before.version:
            before = self._rebased(path, before)
            dt = self._table(path)
        now = int(time.time() * 1000)
        # an overwrite: delta-rs removes every file of the version it read (those of `before`)
        dt.create_write_transaction(_adds_of(added, stats), mode="overwrite", schema=dt.schema(),
                                    commit_properties=CommitProperties(
                                        app_transactions=[Transaction(app_id, version, now)]))
        committed = before.version + 1
        if _holds_txn(self.files(path).read(log_file(path, committed)), app_id, version):
            # the commit is the next version: the kept object follows it in the background (a window over many
            # tables commits each; the next use of this table waits for it)
            self._following[path] = self._follower.submit(dt.update_incremental)
            return committed
        dt.update_incremental()  # delta-rs retried on a later version (another writer's commit came between)
        return dt.version()

    def _rebased(self, path: str, before: TableFiles) -> TableFiles:
        """The table at its latest version, for a rewrite read at `before` that found the log moved on, when no
        commit since changed a row (Delta's rule: a compaction, a VACUUM, changes nothing a rewrite read): the
        rewrite then replaces the files there are now. Any other commit since (a DELETE, an UPDATE, an append, a
        schema or protocol change) conflicts with what the rewrite read: an error, and the restart applies the
        window again on top of it."""
        v = before.version + 1
        files = self.files(path)
        while True:
            data = files.read(log_file(path, v))
            if data is None:
                break
            actions = [orjson.loads(line) for line in data.splitlines() if line.strip()]
            for a in actions:
                kind = next(iter(a))
                if kind == "commitInfo" or (kind in ("add", "remove") and a[kind].get("dataChange") is False):
                    continue
                self.forget(path)
                raise ApplyError(f"{path}: another writer's commit {v} changed the table ({kind}) while this "
                                 f"consumer rewrote it from version {before.version}")
            v += 1
        self.forget(path)
        now = self.read(path, None)
        if now.schema_json != before.schema_json or now.refused is not None:
            raise ApplyError(f"{path}: the table changed (schema or features) at version {now.version} while this "
                             "consumer rewrote it")
        return now

    def _check_own(self, path: str) -> None:
        """Refuse to go on when the last commit file linked here is no longer ours: on a local file system a
        Delta writer in another JVM commits by rename, which replaces a file (Delta's HDFSLogStore says so), and
        this consumer's commit would be lost unseen. The restart re-applies it from the versions in the log."""
        own = self._own.get(path)
        if own is None or not self.files(path).local:  # (on S3 a commit is a conditional PUT: never replaced)
            return
        version, ino, size = own
        try:
            st = os.stat(log_file(path, version))
        except FileNotFoundError:
            return  # removed by the log's cleanup after a checkpoint
        if (st.st_ino, st.st_size) != (ino, size):
            self.forget(path)
            raise ApplyError(f"{path}: this consumer's commit {version} was replaced by another writer's (a Delta "
                             "writer in another JVM on a local lake); restart the consumer to apply it again")

    def _last_checkpoint(self, path: str) -> int:
        v = self._checkpoint.get(path)
        if v is None:
            v = self._checkpoint[path] = _read_last_checkpoint(self.files(path).read(
                f"{path.rstrip('/')}/_delta_log/_last_checkpoint"))
        return v

    def _direct(self, before: TableFiles, added: list[tuple[str, int, int]]) -> bool:
        """Whether this commit is written as a file here (`logfile`): a plain table, plain file names."""
        return self.direct and before.refused is None and logfile.plain(before.files) \
            and logfile.plain(n for n, _, _ in added)

    def _put(self, path: str, before: TableFiles, removed: dict[str, int], added: list[tuple[str, int, int]],
             version: int, app_id: str, mode: str, stats: dict[str, str] | None = None) -> int | None:
        """The commit on top of `before`, as the log's next file: the version committed (None: a commit of that
        version is there already, or the file system makes no hard links: `direct` is then off). A checkpoint
        follows at the table's interval, then the log files older than `delta.logRetentionDuration` (30 days by
        default) that the checkpoint made needless are removed (unless `delta.enableExpiredLogCleanup` is false),
        as Delta does after its checkpoints: a table committed every micro-batch keeps a bounded log."""
        committed = before.version + 1
        data = self._data(path, before, removed, added, version, app_id, int(time.time() * 1000), mode, stats)
        if self._place(path, committed, data) is None:
            return None
        self._creating.pop(path, None)
        return committed

    def _place(self, path: str, committed: int, data: bytes) -> int | None:
        """The log file of version `committed` put in place when absent, then noted as ours (`_linked`): the
        version, or None (another writer's is there, or no links here: `direct` is then off)."""
        files = self.files(path)
        try:
            if not files.put_if_absent(log_file(path, committed), data):
                return None
        except logfile.NoLinks:
            self.direct = False  # delta-rs commits from now on
            return None
        self._linked(path, committed, files)
        return committed

    def alter(self, path: str, before: TableFiles, removed: dict[str, int], added: list[tuple[str, int, int]],
              version: int, app_id: str, operation: str, schema_json: str | None,
              stats: dict[str, str] | None = None, properties: dict[str, str] | None = None,
              features: tuple[str, ...] = ()) -> int | None:
        """A DDL's commit on top of `before`, written as the log's next file (`logfile.alter`): the table's metaData
        as delta-rs reads it with `schema_json` for its schema (None: unchanged) and `properties` set, the protocol
        with `features` turned on (`ddlfeatures.protocol_with`), `removed` files removed, `added` added, this app's
        txn `version`. The version committed; None where it is not made so (not a plain table or file names, the
        log moved past `before`, a protocol not upgraded here, no links here): nothing was committed, Delta's own
        DDL does it."""
        if not self._direct(before, added) or not logfile.plain(removed):
            return None
        meta = protocol = None
        if schema_json is not None:
            dt = self._table(path)
            if dt.version() != before.version:
                return None
            if features:
                protocol = _protocol(dt)
                for feature in features:
                    protocol = ddlfeatures.protocol_with(protocol, feature) if protocol is not None else None
                if protocol is None:
                    return None
            m = dt.metadata()
            meta = {"id": m.id, "format": {"provider": "parquet", "options": {}}, "schemaString": schema_json,
                    "partitionColumns": list(m.partition_columns),
                    "configuration": {**dict(m.configuration), **(properties or {})}, "createdTime": m.created_time}
            if m.name is not None:
                meta["name"] = m.name
            if m.description is not None:
                meta["description"] = m.description
        committed = before.version + 1
        data = logfile.alter(removed, added, app_id, version, int(time.time() * 1000), operation, meta, stats,
                             protocol)
        return self._place(path, committed, data)

    def commit_all(self, items: list[tuple[str, TableFiles, list[tuple[str, int, int]], int, str,
                                           dict[str, str] | None]]) -> list[int | None]:
        """`commit` of many tables' rewrites (path, before, added, version, app id, stats) in a local folder, their
        log files made durable together (`logfile.put_all_if_absent`: one wait for the disk instead of one per
        table, no thread per commit): the version each committed, None for one not made so (not a plain table,
        or another writer's commit of that version came first): its own `commit` then makes it."""
        out: list[int | None] = [None] * len(items)
        todo: list[int] = []
        put: list[tuple[str, bytes]] = []
        now = int(time.time() * 1000)
        for i, (path, before, added, version, app_id, stats) in enumerate(items):
            if self._direct(before, added) and self.files(path).local:
                todo.append(i)
                put.append((log_file(path, before.version + 1),
                            self._data(path, before, before.files, added, version, app_id, now, "Overwrite", stats)))
        if not todo:
            return out
        try:
            made = LOCAL.put_all_if_absent(put)
        except logfile.NoLinks:
            self.direct = False  # delta-rs commits from now on
            return out
        for i, ok in zip(todo, made, strict=True):
            if ok:
                path, before = items[i][0], items[i][1]
                self._creating.pop(path, None)
                self._linked(path, before.version + 1, LOCAL)
                out[i] = before.version + 1
        return out

    def _linked(self, path: str, committed: int, files: LogFiles) -> None:
        """After this consumer's commit file `committed` is linked: it is noted as ours, and a checkpoint follows
        at the table's interval."""
        if files.local:
            st = os.stat(log_file(path, committed))
            self._own[path] = (committed, st.st_ino, st.st_size)
        # at the interval since the last checkpoint (other writers' commits, a VACUUM's, may take the versions
        # at which Delta would have made one), the first one staggered; made in the background (checkpoints.py)
        if due(path, committed, self._last_checkpoint(path), self._interval.get(path, CHECKPOINT_INTERVAL)):
            files = self.files(path)
            self._checkpoints.submit(path, files.uri(path), files.options, committed, self._cleanup.get(path, True))
            self._checkpoint[path] = committed

    def settle(self) -> None:
        """Wait for the checkpoints queued (a stop, a test reading the log's files)."""
        self._checkpoints.settle()


def _protocol(dt: Any) -> dict[str, Any]:
    """A delta-rs table's protocol as the log's action holds it."""
    p = dt.protocol()
    return {"minReaderVersion": p.min_reader_version, "minWriterVersion": p.min_writer_version,
            "readerFeatures": p.reader_features, "writerFeatures": p.writer_features}


def _read_last_checkpoint(data: bytes | None) -> int:
    """The version of the table's last checkpoint (`_last_checkpoint`'s bytes), 0 for none."""
    if data is None:
        return 0
    try:
        return int(orjson.loads(data)["version"])
    except (KeyError, ValueError, TypeError, orjson.JSONDecodeError):
        return 0


def _holds_txn(data: bytes | None, app_id: str, version: int) -> bool:
    """Whether a commit file's bytes hold this app's transaction `version` (the commit is ours)."""
    if data is None:
        return False
    try:
        for line in data.splitlines():
            txn = orjson.loads(line).get("txn") if line.strip() else None
            if txn is not None and txn.get("appId") == app_id and txn.get("version") == version:
                return True
    except orjson.JSONDecodeError:
        return False
    return False


def _adds_of(added: list[tuple[str, int, int]], stats: dict[str, str] | None = None) -> list[Any]:
    """Add actions of new data files (name in the table's folder, size, modification time in ms, stats JSON)."""
    from deltalake.transaction import AddAction

    return [AddAction(name, size, {}, mtime, True, (stats or {}).get(name)) for name, size, mtime in added]


def _adds(dt: Any) -> list[dict[str, Any]]:
    """The table's add actions (path, size_bytes)."""
    import pyarrow as pa

    t = pa.table(dt.get_add_actions(flatten=True))
    return t.select(["path", "size_bytes"]).to_pylist()


