"""A Delta table's log read and written from the driver, without a Spark job: what `multiwrite` needs.

A table written by `multiwrite` gets its data files from one Spark job shared by many tables; its commit is
then only actions (remove the files it rewrote, add the new ones, this consumer's txn version), made here
through Delta's own `OptimisticTransaction`, so Delta keeps writing its checksums and checkpoints and every
reader sees an ordinary commit. Which files a table holds is read from its snapshot once and then followed
through this consumer's own commits (a table whose log moved on since is read again).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

import orjson

from ...errors import ApplyError

if TYPE_CHECKING:
    from .lake import Lake

# files a rewrite may read and write again in one micro-batch: a table bigger than this keeps its MERGE
MAX_TABLE_BYTES = 64 << 20


@dataclass
class TableFiles:
    """A plain Delta table at one version: its schema (JSON), its data files (path relative to the table -> size)
    and why it cannot be written by `multiwrite` (None: it can)."""

    version: int
    schema_json: str
    files: dict[str, int] = field(default_factory=dict)
    refused: str | None = None

    @property
    def size(self) -> int:
        return sum(self.files.values())


def _refusal(protocol: dict[str, Any], metadata: dict[str, Any], adds: list[dict[str, Any]]) -> str | None:
    """Why a table's files cannot simply be rewritten by another writer: a feature whose bookkeeping only
    Delta's own writers keep (column mapping's physical names, deletion vectors, CDC files, type widening,
    constraints, partitions...). Plain tables, the ones `lake.create_table` makes, have none."""
    if protocol.get("minReaderVersion", 1) > 1 or protocol.get("minWriterVersion", 2) > 2:
        return "table features"
    if metadata.get("partitionColumns"):
        return "partitioned"
    conf = metadata.get("configuration") or {}
    for k, v in conf.items():
        if k.startswith("delta.constraints.") or (k in ("delta.enableChangeDataFeed", "delta.appendOnly")
                                                  and str(v).lower() == "true"):
            return k
        if k == "delta.columnMapping.mode" and v != "none":
            return k
    if any(a.get("deletionVector") for a in adds):
        return "deletion vectors"
    return None


class DeltaLogs:
    """The driver's view of the Delta logs `multiwrite` commits to."""

    def __init__(self, lake: Lake) -> None:
        self.lake = lake
        self._files: dict[str, TableFiles] = {}  # per table path, as of this consumer's last look or commit

    def _jvm(self) -> Any:
        return self.lake.spark._jvm  # type: ignore[attr-defined]

    def _log(self, path: str) -> Any:
        return self.lake._jvm_log(path)

    def _seq(self, actions: list[Any]) -> Any:
        """Delta actions (dicts as in the log, or parsed ones) as the Scala Seq `commit` takes."""
        jvm = self._jvm()
        batch = jvm.java.util.ArrayList()
        for a in actions:
            batch.add(a if not isinstance(a, dict) else self._action(a))
        return jvm.scala.jdk.javaapi.CollectionConverters.asScala(batch).toSeq()

    def _action(self, action: dict[str, Any]) -> Any:
        return self._jvm().org.apache.spark.sql.delta.actions.Action.fromJson(orjson.dumps(action).decode())

    def files(self, path: str) -> TableFiles:
        """The table's files at its latest version: kept from this consumer's last commit when the log has not
        moved since, else read from the snapshot (one small Spark job)."""
        jvm = self._jvm()
        none = jvm.scala.Option.empty()
        snap = self._log(path).update(False, none, none)
        version = int(snap.version())
        kept = self._files.get(path)
        if kept is not None and kept.version == version:
            return kept
        meta = orjson.loads(snap.metadata().json())["metaData"]
        protocol = orjson.loads(snap.protocol().json())["protocol"]
        kept_files = from_checksum(jvm, snap, "allFiles")
        if kept_files is not None:
            adds = [orjson.loads(a.json())["add"] for a in kept_files]
        else:  # not in the checksum (a big table, a schema change): the snapshot's state, one small job
            adds = [orjson.loads(j) for j in snap.allFiles().toJSON().collectAsList()]
        tf = TableFiles(version, meta["schemaString"], {a["path"]: int(a["size"]) for a in adds},
                        _refusal(protocol, meta, adds))
        self._files[path] = tf
        return tf

    def create(self, path: str, schema_json: str, configuration: dict[str, str]) -> bool:
        """A plain table (protocol 1/2, no features) of that schema and properties, made as Delta's CREATE TABLE
        commit, from the driver: what `DeltaTable.createIfNotExists` writes, without its planning. False: a
        table is already there."""
        jvm = self._jvm()
        txn = self._log(path).startTransaction()
        if int(txn.readVersion()) >= 0:
            return False
        meta = self._action({"metaData": {
            "id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}}, "schemaString": schema_json,
            "partitionColumns": [], "configuration": configuration, "createdTime": int(time.time() * 1000)}})
        protocol = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
        none = jvm.scala.Option.empty()
        op = getattr(jvm.org.apache.spark.sql.delta, "DeltaOperations$CreateTable")(meta, False, False, none)
        txn.commit(self._seq([meta, protocol]), op)
        return True

    def forget(self, path: str) -> None:
        self._files.pop(path, None)

    def commit(self, path: str, before: TableFiles, added: list[tuple[str, int, int]], version: int,
               app_id: str) -> None:
        """Replace every file of `before` by `added` (name in the table's folder, size, modification time), as
        this consumer's commit `version`, in one Delta commit on top of `before.version`."""
        jvm = self._jvm()
        now = int(time.time() * 1000)
        actions: list[dict[str, Any]] = [
            {"remove": {"path": p, "deletionTimestamp": now, "dataChange": True, "extendedFileMetadata": True,
                        "partitionValues": {}, "size": size}} for p, size in before.files.items()]
        actions += [{"add": {"path": quote(name), "partitionValues": {}, "size": size, "modificationTime": mtime,
                             "dataChange": True}} for name, size, mtime in added]
        actions.append({"txn": {"appId": app_id, "version": version, "lastUpdated": now}})
        txn = self._log(path).startTransaction()
        if int(txn.readVersion()) != before.version:
            self.forget(path)
            raise ApplyError(f"{path}: the table moved from version {before.version} to {txn.readVersion()} while "
                             "this consumer rewrote it (another writer?)")
        # the operation is what Delta's own overwrite records (every file replaced): not ManualUpdate, for which
        # Delta derives no checksum and rebuilds the table's state in several Spark jobs after each commit
        none = jvm.scala.Option.empty()
        op = getattr(jvm.org.apache.spark.sql.delta, "DeltaOperations$Write")(
            jvm.org.apache.spark.sql.SaveMode.Overwrite, none, none, none)
        committed = int(txn.commit(self._seq(actions), op))
        self._files[path] = TableFiles(committed, before.schema_json,
                                       {quote(n): s for n, s, _ in added}, None)


def from_checksum(jvm: Any, snapshot: Any, field: str) -> list[Any] | None:
    """A list Delta keeps in the version's checksum file (`allFiles` for small tables, `setTransactions`), read
    without the Spark job Delta 4.0's own accessors run to rebuild the table's state; None when the checksum
    does not hold it (or this Delta has no such field: the caller then asks the snapshot)."""
    from py4j.protocol import Py4JError

    try:
        crc = snapshot.checksumOpt()
        if not crc.isDefined():
            return None
        value = getattr(crc.get(), field)()
        if not value.isDefined():
            return None
        return list(jvm.scala.jdk.javaapi.CollectionConverters.asJava(value.get()))
    except Py4JError:
        return None


def new_file_name() -> str:
    """A data file's name, unique across every table (`multiwrite` finds a file's table by its name)."""
    return f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"


def file_name(relative: str) -> str:
    """The last component of a log path (URI-encoded, relative to the table), as Spark's `_metadata.file_name`
    gives it."""
    return unquote(relative).rsplit("/", 1)[-1]
