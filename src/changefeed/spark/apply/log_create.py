"""A new plain table's creation for `RustLog` (log_rs.py): its log's first file written here, many tables' at once,
or deferred to the table's first commit, which then holds the creation and the first rows as version 0 (as Delta's
CREATE TABLE AS SELECT writes it): a database's first micro-batch makes hundreds of tables, and a file per table
written once is what it costs. delta-rs makes the table where this file system takes no hard links (`direct` off).
"""

from __future__ import annotations

import time

from . import logfile
from .logstore import LocalFiles, LogFiles
from .tablefiles import TableFiles, refusal


def log_file(path: str, version: int) -> str:
    return f"{path.rstrip('/')}/_delta_log/{version:020d}.json"


LOCAL = LocalFiles()


class Creation:
    """The creation half of `RustLog`, which gives `files`, `direct` (commits written as files here) and
    `_creating` (a new table whose creation waits for its first commit: its schema and properties)."""

    direct: bool
    _creating: dict[str, tuple[str, dict[str, str]]]

    def files(self, path: str) -> LogFiles:
        raise NotImplementedError

    def created(self, schema_json: str, configuration: dict[str, str], version: int = 0) -> TableFiles:
        """The files of a table `create` has just made as the log's first file (`direct`): what reading its log
        back would give (the schema as delta-rs writes it), without opening it (a database's first micro-batch
        creates its tables: each opened after took ~0.5 ms and ~50 KB of the driver's memory). `version` -1: a
        table `defer_many` will make with its first commit."""
        from deltalake import Schema

        schema = Schema.from_json(schema_json).to_json()
        meta = {"partitionColumns": [], "configuration": configuration, "schemaString": schema}
        return TableFiles(version, schema, {}, refusal(logfile.PLAIN_PROTOCOL["protocol"], meta, []),
                          dict(configuration))

    def defer_many(self, tables: list[tuple[str, str, dict[str, str]]]) -> list[TableFiles]:
        """Plain new tables (path, schema, properties) in local folders whose creation is made by their first
        commit (`_put`, `commit_all`: version 0 holds the creation and the first rows, as Delta's CREATE TABLE AS
        SELECT writes it): their folders made, their files as `created` gives them at version -1. What is not
        committed so is made by `materialize`, which the caller runs before anything else reads these tables."""
        out = []
        for path, schema_json, configuration in tables:
            LOCAL.prepare(path)
            self._creating[path] = (schema_json, dict(configuration))
            out.append(self.created(schema_json, configuration, -1))
        return out

    def creating(self, path: str) -> bool:
        """Whether the table at `path` waits for its first commit to be made (`defer_many`)."""
        return path in self._creating

    def materialize(self, paths: list[str] | None = None) -> None:
        """The tables of `paths` (None: all) still waiting for their first commit made as `create_many` makes
        them (a table another writer made meanwhile is left as it is: its version 0 stands)."""
        todo = [p for p in (self._creating if paths is None else paths) if p in self._creating]
        if todo:
            self.create_many([(p, *self._creating.pop(p)) for p in todo])

    def _data(self, path: str, before: TableFiles, removed: dict[str, int], added: list[tuple[str, int, int]],
              version: int, app_id: str, now: int, mode: str, stats: dict[str, str] | None) -> bytes:
        """A commit's bytes on top of `before`: with the table's creation where it waits for this commit."""
        creating = self._creating.get(path) if before.version == -1 else None
        if creating is not None:
            return logfile.creation_write(creating[0], creating[1], added, app_id, version, now, stats)
        return logfile.write(removed, added, app_id, version, now, mode, stats)

    def create_many(self, tables: list[tuple[str, str, dict[str, str]]]) -> list[bool]:
        """`create` of many plain tables (path, schema, properties), their first log files written at once
        (`put_all_if_absent`: one wait for the disk, or PUTs in flight together); False where a table is there."""
        if not self.direct or not tables:
            return [self.create(*t) for t in tables]
        now = int(time.time() * 1000)
        by: dict[int, tuple[LogFiles, list[int]]] = {}  # per store (the local disk, a bucket's): its tables
        for i, (path, _, _) in enumerate(tables):
            files = self.files(path)
            files.prepare(path)
            by.setdefault(id(files), (files, []))[1].append(i)
        out = [False] * len(tables)
        for files, idx in by.values():
            try:
                made = files.put_all_if_absent([(log_file(tables[i][0], 0),
                                                 logfile.creation(tables[i][1], tables[i][2], now)) for i in idx])
            except logfile.NoLinks:
                self.direct = False  # delta-rs commits from now on
                made = [self.create(*tables[i]) for i in idx]
            for i, m in zip(idx, made, strict=True):
                out[i] = m
        return out

    def create(self, path: str, schema_json: str, configuration: dict[str, str]) -> bool:
        """A plain table (protocol 1/2) of that schema and properties; False: a table is already there."""
        from deltalake import DeltaTable, Schema
        from deltalake.exceptions import DeltaError

        files = self.files(path)
        if self.direct:
            files.prepare(path)
            try:
                return files.put_if_absent(log_file(path, 0),
                                           logfile.creation(schema_json, configuration, int(time.time() * 1000)))
            except logfile.NoLinks:
                self.direct = False  # delta-rs commits from now on
        try:
            DeltaTable.create(files.uri(path), Schema.from_json(schema_json), mode="error",
                              configuration=configuration, raise_if_key_not_exists=False,
                              storage_options=files.options)
        except DeltaError as e:
            if "already exists" in str(e):
                return False
            raise
        return True
