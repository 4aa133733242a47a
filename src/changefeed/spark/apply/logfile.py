"""A Delta commit's actions, and on a local lake the commit itself: the log's next version file, put there only
if no writer took that version first (Delta's protocol: a commit is the atomic put-if-absent of that file).

A window over hundreds of small tables commits each of them, and a database's first window creates them. Through
delta-rs a commit cost 5-6 ms of driver time in a 200-table run (its table object loaded and followed after each;
bench/RESULTS.md), and a creation more; either is a few lines of JSON. Only plain tables get their commits written
here (`tablefiles.refusal`: no table feature whose bookkeeping lives in the log, such as row tracking or in-commit
timestamps), with plain file names (the log's path strings are then the names themselves); other commits go
through delta-rs or Delta's own classes (`log_jvm` builds its actions here too), and reads and checkpoints stay
with delta-rs.
"""

from __future__ import annotations

import errno
import os
import re
import uuid
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

import orjson

ENGINE = "changefeed-0.1.0"
_PLAIN = re.compile(r"[A-Za-z0-9._-]+")


def plain(names: Iterable[str]) -> bool:
    """Whether every data file name is written in the log as is (no character a URI would escape, no folder)."""
    return all(_PLAIN.fullmatch(n) for n in names)


def removes(files: dict[str, int], now_ms: int) -> list[dict[str, Any]]:
    """A remove action for each file (its path in the log -> size)."""
    return [{"remove": {"path": p, "deletionTimestamp": now_ms, "dataChange": True, "extendedFileMetadata": True,
                        "partitionValues": {}, "size": s}} for p, s in files.items()]


def adds(added: list[tuple[str, int, int]], stats: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """An add action for each new data file (name in the table's folder, size, modification time in ms), with its
    `stats` JSON where `stats` (per name) has one (`filestats`)."""
    out = []
    for n, s, m in added:
        add: dict[str, Any] = {"path": quote(n), "partitionValues": {}, "size": s, "modificationTime": m,
                               "dataChange": True}
        if stats and n in stats:
            add["stats"] = stats[n]
        out.append({"add": add})
    return out


def metadata(schema_json: str, configuration: dict[str, str], now_ms: int) -> dict[str, Any]:
    """A new table's metaData action: unpartitioned Parquet of that schema and properties."""
    return {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                         "schemaString": schema_json, "partitionColumns": [], "configuration": configuration,
                         "createdTime": now_ms}}


PLAIN_PROTOCOL = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}


def _info(now_ms: int, operation: str, parameters: dict[str, Any], blind: bool,
          metrics: dict[str, str] | None = None) -> dict[str, Any]:
    info: dict[str, Any] = {"timestamp": now_ms, "operation": operation, "operationParameters": parameters,
                            "isBlindAppend": blind, "engineInfo": ENGINE, "txnId": str(uuid.uuid4())}
    if metrics is not None:
        info["operationMetrics"] = metrics
    return {"commitInfo": info}


def write(removed: dict[str, int], added: list[tuple[str, int, int]], app_id: str, version: int, now_ms: int,
          mode: str, stats: dict[str, str] | None = None) -> bytes:
    """A WRITE commit of `mode` (Append, Overwrite) as Delta's writers record it: commitInfo, this app's txn, a
    remove for each file of `removed` (path in the log -> size), an add for each of `added`."""
    metrics = {"numFiles": str(len(added)), "numRemovedFiles": str(len(removed)),
               "numOutputBytes": str(sum(s for _, s, _ in added))}
    lines = [_info(now_ms, "WRITE", {"mode": mode}, not removed and mode == "Append", metrics),
             _txn(app_id, version, now_ms),
             *removes(removed, now_ms), *adds(added, stats)]
    return _lines(lines)


def alter(removed: dict[str, int], added: list[tuple[str, int, int]], app_id: str, version: int, now_ms: int,
          operation: str, meta: dict[str, Any] | None, stats: dict[str, str] | None = None,
          protocol: dict[str, Any] | None = None) -> bytes:
    """A DDL's commit (`ddldriver`): commitInfo, this app's txn, the table's new metaData action when its schema
    changes (None: a commit of the txn alone), its new protocol when a feature is turned on, a remove for each file
    of `removed`, an add for each of `added`."""
    lines = [_info(now_ms, operation, {}, False), _txn(app_id, version, now_ms)]
    if meta is not None:
        lines.append({"metaData": meta})
    if protocol is not None:
        lines.append({"protocol": {k: v for k, v in protocol.items() if v is not None}})
    return _lines([*lines, *removes(removed, now_ms), *adds(added, stats)])


def creation(schema_json: str, configuration: dict[str, str], now_ms: int) -> bytes:
    """Version 0 of a plain table (protocol 1/2), as Delta's CREATE TABLE records it."""
    parameters = _creation_parameters(configuration)
    return _lines([_info(now_ms, "CREATE TABLE", parameters, True), PLAIN_PROTOCOL,
                   metadata(schema_json, configuration, now_ms)])


def creation_write(schema_json: str, configuration: dict[str, str], added: list[tuple[str, int, int]], app_id: str,
                   version: int, now_ms: int, stats: dict[str, str] | None = None) -> bytes:
    """Version 0 of a plain table holding its first rows, as Delta's CREATE TABLE AS SELECT records it: the
    creation's protocol and metaData, this app's txn and an add per file, in one commit (a database's first
    micro-batch creates each table and writes its first rows: one log file per table, not two)."""
    parameters = _creation_parameters(configuration)
    metrics = {"numFiles": str(len(added)), "numOutputBytes": str(sum(s for _, s, _ in added))}
    return _lines([_info(now_ms, "CREATE TABLE AS SELECT", parameters, True, metrics), PLAIN_PROTOCOL,
                   metadata(schema_json, configuration, now_ms),
                   _txn(app_id, version, now_ms), *adds(added, stats)])


def _txn(app_id: str, version: int, now_ms: int) -> dict[str, Any]:
    """This app's txn action: what a replay finds to skip the commit."""
    return {"txn": {"appId": app_id, "version": version, "lastUpdated": now_ms}}


def _creation_parameters(configuration: dict[str, str]) -> dict[str, Any]:
    """commitInfo's operationParameters of a CREATE TABLE (AS SELECT), as Delta records them."""
    return {"isManaged": "false", "description": None, "partitionBy": "[]",
            "properties": orjson.dumps(configuration).decode()}


def _lines(actions: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(a) + b"\n" for a in actions)


class NoLinks(OSError):
    """The file system makes no hard links (some network and FUSE mounts): commits go another way there."""


_NO_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EXDEV, errno.EMLINK}


SYNC_THREADS = 32  # files made durable at once: the file system's journal commits their flushes together


def put_all_if_absent(items: list[tuple[str, bytes]]) -> list[bool]:
    """`put_if_absent` of many files (a database's tables created at once), with one wait for the disk instead of
    one per file: every file written under its hidden name, all flushed at once (concurrent flushes share the
    journal's commits: 1,000 files one after another took 5.7 ms each, ~0.4 ms each at once), then each linked. A
    file is still on disk before it is a commit."""
    tmps: list[str] = []
    try:
        for target, data in items:
            folder, name = os.path.split(target)
            tmp = os.path.join(folder, f".{name}.{uuid.uuid4().hex}.tmp")
            with open(tmp, "xb") as f:
                f.write(data)
            tmps.append(tmp)
        if len(tmps) > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(min(SYNC_THREADS, len(tmps)), thread_name_prefix="changefeed-sync") as pool:
                list(pool.map(_sync, tmps))
        elif tmps:
            _sync(tmps[0])
        return [_link(tmp, target) for tmp, (target, _) in zip(tmps, items, strict=True)]
    finally:
        for tmp in tmps:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass


def _sync(file: str) -> None:
    fd = os.open(file, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _link(tmp: str, target: str) -> bool:
    """The written file `tmp` linked as `target`; False: `target` is there already."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        return False
    except OSError as e:
        if e.errno in _NO_LINKS:
            raise NoLinks(e.errno, f"{os.path.dirname(target)}: no hard links here ({e.strerror})") from e
        raise
    return True


def put_if_absent(target: str, data: bytes) -> bool:
    """`data` as file `target`, complete or not at all; False: the file is there already (another commit of that
    version). Written beside it under a hidden name, then linked: a link never replaces a file."""
    folder, name = os.path.split(target)
    tmp = os.path.join(folder, f".{name}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "xb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())  # on disk before it is the commit: a crash never leaves a linked, empty version
    try:
        return _link(tmp, target)
    finally:
        os.unlink(tmp)
