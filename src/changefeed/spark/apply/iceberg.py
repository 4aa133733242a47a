"""The Iceberg side of a lake's Delta tables (`--table-format delta+iceberg`): for each table, Iceberg metadata over
the same Parquet files, kept in step with the Delta log after each micro-batch (docs/catalog.md).

No Spark here: the Delta log is read with delta-rs and the Iceberg metadata written with pyiceberg, as Apache XTable
does, but in the consumer's own process, after the batch's Delta commits and before its progress record. Each sync
of a table is one Iceberg commit whose snapshot summary records the Delta version it mirrors
(`changefeed.delta-version`): the data files Delta added since the last sync are registered (their statistics
read from the Parquet footers), the ones it removed are removed, and the schema follows the Delta schema (columns
added, dropped, widened; a change Iceberg cannot follow in place makes the mirror anew). A restart compares the
file sets again, so a crash between the Delta commit and the Iceberg one loses nothing.

The Iceberg metadata lives in `<table>/metadata/` (where Delta's UniForm keeps it) and the lake has one Iceberg
catalog, pyiceberg's SQL catalog in `<lake>/_changefeed/iceberg/catalog.db` (SQLite), with a namespace per
database. Metadata files name absolute paths, so a table that moves (RENAME TABLE) gets new metadata at its new
place; a dropped table leaves the catalog. Tables with Delta column mapping or deletion vectors are refused in one
line: their Parquet files alone do not give the table's rows under its column names (`--table-features minimal`,
which this format implies, never turns either on).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import orjson

from ...errors import ApplyError
from .iceberg_schema import columns, evolvable, new_schema, same_columns

log = logging.getLogger("changefeed.lake")

DELTA_VERSION = "changefeed.delta-version"  # the snapshot summary's record of the Delta version it mirrors
CATALOG_NAME = "changefeed"
METADATA = "metadata"
KEEP_SNAPSHOTS = 20  # Iceberg snapshots (and metadata files) kept: time travel over the last syncs only


def catalog_folder(meta: str) -> str:
    """Where the lake's Iceberg catalog is kept (`meta`: the lake's `_changefeed` folder)."""
    return f"{meta}/iceberg"


def open_catalog(meta: str) -> Any:
    """The lake's pyiceberg SQL catalog (SQLite), made on first use."""
    from pyiceberg.catalog.sql import SqlCatalog

    folder = catalog_folder(meta)
    os.makedirs(folder, exist_ok=True)
    return SqlCatalog(CATALOG_NAME, uri=f"sqlite:///{folder}/catalog.db", warehouse=f"file://{folder}/warehouse")


def file_uri(path: str) -> str:
    return f"file://{path}"


@dataclass
class Mirrored:
    """What the mirror knows of one table: the Delta version its Iceberg side holds, and its data files."""

    location: str
    table: Any = None  # the pyiceberg table as this process last committed it (the mirror is its only writer)
    delta_version: int = -1
    files: dict[str, Any] = field(default_factory=dict)  # file URI -> Iceberg DataFile


@dataclass
class SyncReport:
    """The figures of one micro-batch's sync (the cost per commit docs/catalog.md gives)."""

    tables: int = 0
    added: int = 0
    removed: int = 0
    seconds: float = 0.0


class IcebergMirror:
    """One lake's Iceberg side. `name_of(path)` gives a table's (namespace, name) from its path."""

    def __init__(self, meta: str) -> None:
        self.meta = meta
        self._catalog: Any = None
        self._known: dict[str, Mirrored] = {}
        self._delta: dict[str, Any] = {}  # path -> delta-rs table, kept open

    @property
    def catalog(self) -> Any:
        if self._catalog is None:
            self._catalog = open_catalog(self.meta)
        return self._catalog

    # --- the lake's events ------------------------------------------------------------------------
    def moving(self, src: str, name: tuple[str, str]) -> None:
        """A table is about to move (RENAME TABLE): its catalog entry goes; its metadata, which names the old
        paths, is removed after the move (`moved`) and written anew at the next sync."""
        self._forget(src, name)

    def moved(self, dst: str) -> None:
        folder = os.path.join(dst, METADATA)
        if os.path.isdir(os.path.join(dst, "_delta_log")) and os.path.isdir(folder):
            shutil.rmtree(folder)  # ours: the Iceberg metadata of the table before it moved

    def dropping(self, path: str, name: tuple[str, str]) -> None:
        """A table is about to be dropped: its catalog entry goes (its folder, metadata included, goes as today)."""
        self._forget(path, name)

    def _forget(self, path: str, name: tuple[str, str]) -> None:
        from pyiceberg.exceptions import NoSuchTableError

        self._known.pop(path, None)
        self._delta.pop(path, None)
        try:
            self.catalog.drop_table(name)  # the SQL catalog forgets the entry; no file is deleted
        except NoSuchTableError:
            pass

    # --- syncing ------------------------------------------------------------------------------------
    def _delta_table(self, path: str) -> Any:
        from deltalake import DeltaTable

        dt = self._delta.get(path)
        if dt is None:
            dt = self._delta[path] = DeltaTable(path)
        else:
            dt.update_incremental()
        return dt

    def behind(self, path: str) -> bool:
        """The Delta log has a commit the Iceberg side has not seen (one `stat`: asked of every table each batch)."""
        m = self._known.get(path)
        if m is None:
            return True
        return os.path.exists(os.path.join(path, "_delta_log", f"{m.delta_version + 1:020d}.json"))

    def sync(self, path: str, name: tuple[str, str], report: SyncReport | None = None) -> None:
        """The Iceberg side of the Delta table at `path` brought to the table's latest version; made anew when its
        metadata files went missing under this process (a VACUUM of the Delta table removes them)."""
        try:
            self._sync(path, name, report)
        except OSError:
            if self._known.pop(path, None) is None:
                raise
            self._sync(path, name, report)  # read from the catalog again: made anew if its files are gone

    def _sync(self, path: str, name: tuple[str, str], report: SyncReport | None) -> None:
        t0 = time.monotonic()
        if not os.path.isdir(os.path.join(path, "_delta_log")):
            return
        dt = self._delta_table(path)
        version = dt.version()
        m = self._known.get(path)
        if m is not None and m.delta_version == version:
            return
        table = f"{name[0]}.{name[1]}"
        self._refuse(dt, table)
        schema_json = orjson.loads(dt.schema().to_json())
        cols = columns(schema_json, table)
        import pyarrow as pa

        adds = pa.table(dt.get_add_actions(flatten=True)).select(["path"]).column(0).to_pylist()
        want = {file_uri(os.path.join(path, unquote(p))) for p in adds}
        ice, m = self._iceberg(path, name, cols)
        tx = ice.transaction()
        evolved = False
        if not same_columns(ice.schema(), cols):
            if not evolvable(ice.schema(), cols):
                self._forget(path, name)
                shutil.rmtree(os.path.join(path, METADATA), ignore_errors=True)  # ours, made anew
                ice, m = self._iceberg(path, name, cols)
                tx = ice.transaction()
            else:
                self._evolve(tx, cols)
                evolved = True
        added = sorted(want - m.files.keys())
        removed = [m.files[f] for f in m.files.keys() - want]
        if added or removed or evolved:
            from pyiceberg.io.pyarrow import parquet_file_to_data_file

            meta = tx.table_metadata  # once: each read applies the transaction's updates to a copy again
            new = [parquet_file_to_data_file(ice.io, meta, f) for f in added]
            producer = tx.update_snapshot(snapshot_properties={DELTA_VERSION: str(version)})
            with producer.overwrite() if removed else producer.fast_append() as op:
                for df in removed:
                    if not hasattr(df, "_spec_id"):  # one made here, not read from a manifest: unpartitioned
                        df.spec_id = meta.default_spec_id
                    op.delete_data_file(df)
                for df in new:
                    op.append_data_file(df)
            m.table = tx.commit_transaction()
            self._expire(m)
            for df in removed:
                m.files.pop(df.file_path, None)
            m.files.update({df.file_path: df for df in new})
            if report is not None:
                report.tables += 1
                report.added += len(new)
                report.removed += len(removed)
        m.delta_version = version
        if report is not None:
            report.seconds += time.monotonic() - t0

    def _refuse(self, dt: Any, table: str) -> None:
        conf = dt.metadata().configuration
        if conf.get("delta.columnMapping.mode", "none") != "none":
            raise ApplyError(f"{table}: the table has Delta column mapping: its Iceberg mirror is not kept "
                             "(--table-format delta+iceberg needs --table-features minimal from the table's start)")
        if str(conf.get("delta.enableDeletionVectors", "false")).lower() == "true":
            raise ApplyError(f"{table}: the table has Delta deletion vectors: its Iceberg mirror is not kept")
        if list(dt.metadata().partition_columns):
            raise ApplyError(f"{table}: the table is partitioned: its Iceberg mirror is not kept")

    def _iceberg(self, path: str, name: tuple[str, str], cols: list[tuple[str, Any]]) -> tuple[Any, Mirrored]:
        """The table's Iceberg side as the catalog has it (made when it has none), and what it holds."""
        from pyiceberg.exceptions import NoSuchTableError
        from pyiceberg.table import TableProperties

        m = self._known.get(path)
        if m is not None and m.table is not None:
            return m.table, m
        try:
            ice = self.catalog.load_table(name)
        except NoSuchTableError:
            ice = None
        except OSError:  # its metadata file is gone (a VACUUM of the Delta table removes files it does not know)
            log.warning("%s.%s: its Iceberg metadata is gone: made anew", *name)
            self.catalog.drop_table(name)
            ice = None
        if ice is None and os.path.isdir(os.path.join(path, METADATA)):
            shutil.rmtree(os.path.join(path, METADATA))  # ours, no catalog names it: it would shadow the new one
        if ice is not None and ice.location().rstrip("/") != file_uri(path):
            raise ApplyError(f"Iceberg catalog table {name[0]}.{name[1]} is at {ice.location()}, not {path}: "
                             "not replaced")
        if ice is None:
            self.catalog.create_namespace_if_not_exists(name[0])
            schema = new_schema(cols)
            ice = self.catalog.create_table(name, schema, location=file_uri(path), properties={
                TableProperties.DEFAULT_NAME_MAPPING: schema.name_mapping.model_dump_json(),
                "format-version": "2", TableProperties.METADATA_DELETE_AFTER_COMMIT_ENABLED: "true",
                TableProperties.METADATA_PREVIOUS_VERSIONS_MAX: str(KEEP_SNAPSHOTS)})
            m = None
        if m is None:  # first sight in this process: what its current snapshot holds
            m = Mirrored(ice.location(), ice)
            snap = ice.current_snapshot()
            if snap is not None:
                m.delta_version = int((snap.summary or {}).get(DELTA_VERSION, "-1"))
                m.files = {e.data_file.file_path: e.data_file for mf in snap.manifests(ice.io)
                           for e in mf.fetch_manifest_entry(ice.io, discard_deleted=True)}
            self._known[path] = m
        return ice, m

    @staticmethod
    def _expire(m: Mirrored) -> None:
        """Snapshots beyond the last `KEEP_SNAPSHOTS` expired, now and then: every commit rewrites the metadata
        file, which lists them all (its data files stay: they are Delta's, which VACUUM removes)."""
        snaps = m.table.metadata.snapshots
        if len(snaps) > 2 * KEEP_SNAPSHOTS:
            old = sorted(snaps, key=lambda s: s.timestamp_ms)[:-KEEP_SNAPSHOTS]
            current = m.table.metadata.current_snapshot_id
            m.table.maintenance.expire_snapshots().by_ids([s.snapshot_id for s in old
                                                           if s.snapshot_id != current]).commit()
            m.table = m.table.refresh()

    @staticmethod
    def _evolve(tx: Any, cols: list[tuple[str, Any]]) -> None:
        """The Iceberg schema made `cols` in place (`evolvable`), and its name mapping the new names."""
        from pyiceberg.table import TableProperties

        names = [n for n, _ in cols]
        have = {f.name: f.field_type for f in tx.table_metadata.schema().fields}
        with tx.update_schema(allow_incompatible_changes=False) as u:
            for n in have:
                if n not in names:
                    u.delete_column(n)
            for n, t in cols:
                if n not in have:
                    u.add_column(n, t)
                elif have[n] != t:
                    u.update_column(n, field_type=t)
        with tx.update_schema() as u:
            for i, n in enumerate(names):
                if i == 0:
                    u.move_first(n)
                else:
                    u.move_after(n, names[i - 1])
        tx.set_properties(**{TableProperties.DEFAULT_NAME_MAPPING:
                             tx.table_metadata.schema().name_mapping.model_dump_json()})
