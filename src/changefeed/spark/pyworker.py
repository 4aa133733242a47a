"""What a reused Spark Python worker pays on every task, paid once per worker instead.

Before each task a worker calls `importlib.invalidate_caches()` (pyspark's `worker_util.setup_spark_files`). On
CPython < 3.12 a zip importer's `invalidate_caches` reads its archive's whole directory again, and the workers
import pyspark from Spark's `pyspark.zip` (1,220 entries) through one importer per package folder: ~16 directory
reads a task, most of the workers' CPU for a small micro-batch (profiled: bench/RESULTS.md). CPython 3.12 made
that read lazy (gh-103200). `cheap_zip_invalidation` keeps the 3.11 behaviour where it matters (an archive whose
file changed is read again) and skips the read when the file is the one already read. Called at the start of each
of our tasks (the decoder, the file source's reader): a worker's first task pays, the ones after it do not.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

_MARK = "_changefeed_cheap"


def cheap_zip_invalidation(version: tuple[int, int] = (sys.version_info.major, sys.version_info.minor)) -> bool:
    """Make `zipimporter.invalidate_caches` read an archive's directory again only when its file changed (size or
    modification time); once per process, and only where the read is eager (CPython < 3.12). True when installed
    (now or before)."""
    import zipimport

    if version >= (3, 12):
        return False
    cls: Any = zipimport.zipimporter
    if getattr(cls.invalidate_caches, _MARK, False):
        return True
    cls.invalidate_caches = _cheap(cls.invalidate_caches, zipimport._zip_directory_cache)  # type: ignore[attr-defined]
    return True


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _cheap(original: Callable[[Any], None], directories: dict[str, Any]) -> Callable[[Any], None]:
    """`original` (an eager re-read), skipped while the archive's file is the one its directory was read from."""
    read: dict[str, tuple[int, int]] = {}  # per archive: the stamp of the file its cached directory came from

    def invalidate_caches(self: Any) -> None:
        stamp = _stamp(self.archive)
        files = directories.get(self.archive)
        if stamp is not None and files is not None and read.get(self.archive) == stamp:
            self._files = files
            return
        original(self)
        if stamp is not None:
            read[self.archive] = stamp

    setattr(invalidate_caches, _MARK, True)
    invalidate_caches.__wrapped__ = original  # type: ignore[attr-defined]
    return invalidate_caches
