"""When a table's Delta checkpoint is made, and making it off the commit's path.

A checkpoint is optional in Delta's protocol (a reader replays the log's JSON commits without one); Delta's writers
make one every `delta.checkpointInterval` commits. A consumer that commits hundreds of tables each micro-batch, all
created together, brought every table to its 10th version in the same batch: 1,000 checkpoints by delta-rs, ~16 ms
each, made one micro-batch take 17 s instead of 4 (bench/RESULTS.md). So here:
- a table's first checkpoint comes up to an interval early, by a fixed offset of its path: tables created together
  then take their checkpoints in different batches, each table still every interval after its first, and a log is
  never longer than Delta's own rule would leave it;
- the checkpoint (and the expired-log cleanup after it) is written by one background thread, never on the commit's
  path; one that a later checkpoint of the same table overtook in the queue is skipped. delta-rs releases the GIL
  while it works. A table's pending checkpoint is waited for before anything removes or moves the table's folder
  (`settle`), so a checkpoint never lands in a dropped table's folder.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

log = logging.getLogger("changefeed.lake")


def due(path: str, committed: int, last: int, interval: int) -> bool:
    """Whether version `committed` of the table at `path` takes a checkpoint, its last one at `last` (0: none)."""
    if last > 0:
        return committed - last >= interval
    return committed >= interval - zlib.crc32(path.encode()) % interval


class Checkpointer:
    """Checkpoints made one at a time, in order, in a background thread; a table's queued checkpoint that a later
    one of the same table overtook is skipped."""

    def __init__(self, failed: Callable[[str], None]) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="changefeed-deltars-checkpoint")
        self._pending: dict[str, Future[None]] = {}  # a table's last queued checkpoint
        self._want: dict[str, int] = {}  # the version of it
        self._failed = failed  # told the table whose checkpoint failed: its next commit past the interval tries again

    def submit(self, path: str, uri: str, options: dict[str, str] | None, version: int, cleanup: bool) -> None:
        """A checkpoint of the table's `version` queued."""
        self._want[path] = version
        self._pending[path] = self._pool.submit(self._make, path, uri, options, version, cleanup)

    def settle(self, path: str | None = None) -> None:
        """Wait for the table's pending checkpoint (every table's with None)."""
        for p in list(self._pending) if path is None else [path]:
            f = self._pending.pop(p, None)
            if f is not None:
                f.result()
                self._want.pop(p, None)

    def _make(self, path: str, uri: str, options: dict[str, str] | None, version: int, cleanup: bool) -> None:
        from deltalake import DeltaTable

        if self._want.get(path, version) > version:
            return  # a later one of the table is queued
        try:
            dt: Any = DeltaTable(uri, version=version, storage_options=options)
            dt.create_checkpoint()
            if cleanup:
                dt.cleanup_metadata()
        except Exception as e:  # noqa: BLE001 - optional work: the table is whole without it
            log.warning("%s: its Delta checkpoint at version %d failed (%s); its next commit tries again",
                        path, version, e)
            self._failed(path)
