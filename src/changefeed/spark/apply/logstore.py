"""Where the driver's Delta commits put their files: a local folder, or an S3 bucket reached over its HTTP API.

`log_rs` writes a plain table's commit as the log's next `N.json`, created only if no writer took that version
(Delta's protocol). On a local lake that is a hard link (`logfile.put_if_absent`); on S3 a conditional PUT
(`If-None-Match: *`, `s3http`): the store refuses the second of two writers, as delta-rs's own S3 commits rely on
since 1.0. Reads of the log are delta-rs's (with the store's `storage_options`); the few files read or looked for
here (a commit of ours, the next version, `_last_checkpoint`) are single GETs and HEADs.
"""

from __future__ import annotations

import os
from typing import Protocol
from urllib.parse import unquote, urlparse

from ...s3http import S3Http, S3Target
from . import logfile


class LogFiles(Protocol):
    """A table folder's files as the driver's commits use them (paths are the lake's: a folder, or s3a://)."""

    local: bool
    options: dict[str, str] | None  # delta-rs's storage options (None: a local folder)

    def uri(self, path: str) -> str: ...
    def exists(self, file: str) -> bool: ...
    def read(self, file: str) -> bytes | None: ...
    def put_if_absent(self, file: str, data: bytes) -> bool: ...
    def put_all_if_absent(self, items: list[tuple[str, bytes]]) -> list[bool]: ...
    def put(self, file: str, data: bytes) -> None: ...
    def prepare(self, path: str) -> None: ...


class LocalFiles:
    local = True
    options: dict[str, str] | None = None

    def uri(self, path: str) -> str:
        return path

    def exists(self, file: str) -> bool:
        return os.path.exists(file)

    def read(self, file: str) -> bytes | None:
        try:
            with open(file, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def put_if_absent(self, file: str, data: bytes) -> bool:
        return logfile.put_if_absent(file, data)

    def put_all_if_absent(self, items: list[tuple[str, bytes]]) -> list[bool]:
        return logfile.put_all_if_absent(items)

    def put(self, file: str, data: bytes) -> None:
        with open(file, "xb") as f:
            f.write(data)

    def prepare(self, path: str) -> None:
        os.makedirs(os.path.join(path, "_delta_log"), exist_ok=True)


PUT_THREADS = 16  # conditional PUTs in flight at once


def bucket_key(path: str) -> tuple[str, str]:
    """An s3a:// (s3://) path's bucket and key."""
    u = urlparse(path)
    return u.netloc, unquote(u.path).lstrip("/")


class S3Files:
    """Files on one S3 store, for commits of tables under s3a:// paths (`options`: delta-rs's storage options of
    the store, with static keys)."""

    local = False

    def __init__(self, options: dict[str, str]) -> None:
        target = S3Target.of(options)
        if target is None:
            raise ValueError("no static keys: the store's requests cannot be signed here")
        self.options: dict[str, str] | None = options
        self.http = S3Http(target)

    def uri(self, path: str) -> str:
        b, k = bucket_key(path)
        return f"s3://{b}/{k}".rstrip("/")

    def exists(self, file: str) -> bool:
        return self.http.exists(*bucket_key(file))

    def read(self, file: str) -> bytes | None:
        return self.http.get(*bucket_key(file))

    def put_if_absent(self, file: str, data: bytes) -> bool:
        b, k = bucket_key(file)
        return self.http.put_if_absent(b, k, data)

    def put_all_if_absent(self, items: list[tuple[str, bytes]]) -> list[bool]:
        """Each file by its own conditional PUT, several requests at once (a database's tables created)."""
        if len(items) <= 1:
            return [self.put_if_absent(f, d) for f, d in items]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(PUT_THREADS, len(items)), thread_name_prefix="changefeed-put") as pool:
            return list(pool.map(lambda item: self.put_if_absent(*item), items))

    def put(self, file: str, data: bytes) -> None:
        b, k = bucket_key(file)
        self.http.put(b, k, data)

    def prepare(self, path: str) -> None:
        """Nothing: an object store has no folders to make."""
