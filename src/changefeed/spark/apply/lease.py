"""One consumer per lake: an owner record in the lake's `_changefeed` folder, claimed at start, renewed each batch.

Two consumers applying to the same tables would each skip what the other committed (the tables' txn versions)
and interleave their changelog appends and progress records: neither stream would stay exactly-once. The
second one is refused in one line while the first is alive: on the same host, its process is running; on
another host, it renewed the record within `LEASE_S` seconds (a consumer idle that long, with no micro-batch
to run, is taken for gone). Decisions only here; reading and writing the record is the caller's (any file
system the lake is on).
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

from ...errors import ApplyError

OWNER = "owner.json"
LEASE_S = 120.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


class Lease:
    def __init__(self, lake: str, app_id: str, read: Callable[[], dict[str, Any] | None],
                 write: Callable[[dict[str, Any]], None]) -> None:
        self.lake = lake
        self.app_id = app_id
        self._read = read
        self._write = write
        self.me = {"host": socket.gethostname(), "pid": os.getpid(), "token": uuid.uuid4().hex, "app_id": app_id}

    def holder(self, record: dict[str, Any] | None, now: float) -> dict[str, Any] | None:
        """The other live consumer that holds the record (None: it is free, or ours)."""
        if not record or record.get("token") == self.me["token"]:
            return None
        if record.get("host") == self.me["host"]:
            pid = int(record.get("pid") or 0)
            return record if pid != self.me["pid"] and pid > 0 and _alive(pid) else None
        return record if now - float(record.get("renewed") or 0) / 1000 < LEASE_S else None

    def claim(self) -> None:
        """Take the record, or refuse in one line when another live consumer holds it."""
        now = time.time()
        other = self.holder(self._read(), now)
        if other is not None:
            since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(other.get("since") or 0) / 1000))
            raise ApplyError(f"the lake {self.lake} is in use by another consumer (pid {other.get('pid')} on "
                             f"{other.get('host')}, app id {other.get('app_id')}, since {since}): one consumer per "
                             f"lake (stop that one first, or wait {int(LEASE_S)} s after it stopped)")
        self.me["since"] = int(now * 1000)
        self.renew()
        mine = self._read()  # two started at once: the one whose record stayed goes on
        if mine is not None and mine.get("token") != self.me["token"]:
            self.claim()

    def renew(self) -> None:
        self._write({**self.me, "renewed": int(time.time() * 1000)})
