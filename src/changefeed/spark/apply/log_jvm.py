"""A Delta table's log read and committed from the driver through Delta's own `OptimisticTransaction` (py4j):
the way for lakes delta-rs cannot reach (any Hadoop file system the session can). Delta then writes its
checksums and checkpoints itself."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from ...errors import ApplyError
from . import logfile
from .tablefiles import TableFiles, refusal

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class LakeSession(Protocol):
    """What the log writers use of the lake (`lake.Lake`, which sits above them): the calling thread's session
    and Delta's `DeltaLog` of a table."""

    @property
    def spark(self) -> SparkSession: ...
    def _jvm_log(self, path: str) -> Any: ...


class JvmLog:
    def __init__(self, lake: LakeSession) -> None:
        self.lake = lake

    def _jvm(self) -> Any:
        return self.lake.spark._jvm  # type: ignore[attr-defined]

    def _snapshot(self, path: str) -> Any:
        none = self._jvm().scala.Option.empty()
        return self.lake._jvm_log(path).update(False, none, none)

    def _seq(self, actions: list[Any]) -> Any:
        """Delta actions (dicts as in the log, or parsed ones) as the Scala Seq `commit` takes."""
        jvm = self._jvm()
        batch = jvm.java.util.ArrayList()
        for a in actions:
            batch.add(a if not isinstance(a, dict) else self._action(a))
        return jvm.scala.jdk.javaapi.CollectionConverters.asScala(batch).toSeq()

    def _action(self, action: dict[str, Any]) -> Any:
        return self._jvm().org.apache.spark.sql.delta.actions.Action.fromJson(orjson.dumps(action).decode())

    def read(self, path: str, kept: TableFiles | None) -> TableFiles:
        """The table's files at its latest version (`kept` when the log has not moved past it)."""
        jvm = self._jvm()
        snap = self._snapshot(path)
        version = int(snap.version())
        if kept is not None and kept.version == version:
            return kept
        meta = orjson.loads(snap.metadata().json())["metaData"]
        protocol = orjson.loads(snap.protocol().json())["protocol"]
        kept_files = from_checksum(jvm, snap, "allFiles")
        if kept_files is not None:
            adds = [orjson.loads(a.json())["add"] for a in kept_files]
        else:  # not in the checksum (a big table, a schema change): the snapshot's state, one small job
            adds = [orjson.loads(j) for j in snap.allFiles().toJSON().collectAsList()]
        return TableFiles(version, meta["schemaString"], {a["path"]: int(a["size"]) for a in adds},
                          refusal(protocol, meta, adds), dict(meta.get("configuration") or {}))

    def txn_version(self, path: str, app_id: str, prop: str) -> int:
        """This app's txnVersion, or the DDL version in table property `prop`, whichever is higher."""
        jvm = self._jvm()
        snap = self._snapshot(path)
        kept = from_checksum(jvm, snap, "setTransactions")
        if kept is not None:  # from the version's checksum file: no Spark job
            txn = max((int(t.version()) for t in kept if t.appId() == app_id), default=-1)
        else:
            v = snap.transactions().get(app_id)
            txn = int(v.get()) if v.isDefined() else -1
        p = snap.metadata().configuration().get(prop)
        return max(txn, int(p.get()) if p.isDefined() else -1)

    def create(self, path: str, schema_json: str, configuration: dict[str, str]) -> bool:
        """Delta's CREATE TABLE commit of a plain table (protocol 1/2), without planning a statement; False: a
        table is already there."""
        jvm = self._jvm()
        txn = self.lake._jvm_log(path).startTransaction()
        if int(txn.readVersion()) >= 0:
            return False
        meta = self._action(logfile.metadata(schema_json, configuration, int(time.time() * 1000)))
        protocol = logfile.PLAIN_PROTOCOL
        none = jvm.scala.Option.empty()
        op = getattr(jvm.org.apache.spark.sql.delta, "DeltaOperations$CreateTable")(meta, False, False, none)
        txn.commit(self._seq([meta, protocol]), op)
        return True

    def commit(self, path: str, before: TableFiles, added: list[tuple[str, int, int]], version: int,
               app_id: str, stats: dict[str, str] | None = None) -> int:
        """Every file of `before` replaced by `added`, with this app's txn `version`: the version committed."""
        jvm = self._jvm()
        now = int(time.time() * 1000)
        actions = [*logfile.removes(before.files, now), *logfile.adds(added, stats)]
        actions.append({"txn": {"appId": app_id, "version": version, "lastUpdated": now}})
        txn = self.lake._jvm_log(path).startTransaction()
        if int(txn.readVersion()) != before.version:
            raise ApplyError(f"{path}: the table moved from version {before.version} to {txn.readVersion()} while "
                             "this consumer rewrote it (another writer?)")
        # what the rewrite read, declared to Delta's conflict checker: every file of the table (a concurrent
        # change to any of them conflicts), and this app's txn version (a concurrent commit of it conflicts)
        txn.readWholeTable()
        txn.txnVersion(app_id)
        # the operation is what Delta's own overwrite records (every file replaced): not ManualUpdate, for which
        # Delta derives no checksum and rebuilds the table's state in several Spark jobs after each commit
        none = jvm.scala.Option.empty()
        op = getattr(jvm.org.apache.spark.sql.delta, "DeltaOperations$Write")(
            jvm.org.apache.spark.sql.SaveMode.Overwrite, none, none, none)
        return int(txn.commit(self._seq(actions), op))


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
