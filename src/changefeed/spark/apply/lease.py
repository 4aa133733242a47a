"""One consumer per lake: an owner record in the lake's `_changefeed` folder, claimed at start, renewed each batch.

Two consumers applying to the same tables would each skip what the other committed (the tables' txn versions)
and interleave their changelog appends and progress records: neither stream would stay exactly-once. The
second one is refused in one line while the first is alive: on the same host, its process is running; on
another host, it renewed the record within `LEASE_S` seconds (a consumer idle that long, with no micro-batch
to run, is taken for gone). Decisions only here; reading and writing the record is the caller's (any file
system the lake is on).

Where the store can create an object only if it is absent (S3's conditional PUT, `If-None-Match: *`: `create`),
each claim is a new record numbered one past the last (`claim`), so that of two consumers deciding at once that the
lake is free, the store lets one create the number and refuses the other: it is then refused here in one line. A
consumer whose lake was claimed after it (it was taken for gone: silent past the lease) finds the newer claim at
its next renewal and stops, rather than interleave its commits with the new owner's.
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
OWNERS = "owners"  # where a store with conditional writes keeps the numbered claims (<n>.json)
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
                 write: Callable[[dict[str, Any]], None],
                 create: Callable[[dict[str, Any]], bool] | None = None) -> None:
        """`read`: the latest record (None: none yet); `write`: replace the record `rec["claim"]` (or the only one);
        `create`: make the record `rec["claim"]` only if absent, False when it is there (a store's conditional
        write), None where the store has none."""
        self.lake = lake
        self.app_id = app_id
        self._read = read
        self._write = write
        self._create = create
        self.me = {"host": socket.gethostname(), "pid": os.getpid(), "token": uuid.uuid4().hex, "app_id": app_id}

    def holder(self, record: dict[str, Any] | None, now: float) -> dict[str, Any] | None:
        """The other live consumer that holds the record (None: it is free, or ours)."""
        if not record or record.get("token") == self.me["token"]:
            return None
        if record.get("host") == self.me["host"]:
            pid = int(record.get("pid") or 0)
            return record if pid != self.me["pid"] and pid > 0 and _alive(pid) else None
        return record if now - float(record.get("renewed") or 0) / 1000 < LEASE_S else None

    def _refusal(self, other: dict[str, Any]) -> ApplyError:
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(other.get("since") or 0) / 1000))
        return ApplyError(f"the lake {self.lake} is in use by another consumer (pid {other.get('pid')} on "
                          f"{other.get('host')}, app id {other.get('app_id')}, since {since}): one consumer per "
                          f"lake (stop that one first, or wait {int(LEASE_S)} s after it stopped)")

    def claim(self) -> None:
        """Take the record, or refuse in one line when another live consumer holds it."""
        for _ in range(8):  # each round: another consumer claimed between our read and our write
            now = time.time()
            record = self._read()
            other = self.holder(record, now)
            if other is not None:
                raise self._refusal(other)
            self.me["since"] = int(now * 1000)
            if self._create is not None:
                self.me["claim"] = int((record or {}).get("claim", -1)) + 1
                if not self._create({**self.me, "renewed": int(time.time() * 1000)}):
                    continue  # the store refused: that number is another consumer's claim, read it
            else:
                self.renew()
            mine = self._read()  # two started at once (or a store that ignored the condition): whose record stayed
            if mine is None or mine.get("token") == self.me["token"]:
                return
        raise ApplyError(f"the lake {self.lake}: could not claim it as its consumer (other consumers kept claiming "
                         "it at the same time)")

    def renew(self) -> None:
        if self._create is not None and "claim" in self.me:
            latest = self._read()
            if latest is not None and latest.get("token") != self.me["token"] \
                    and int(latest.get("claim", -1)) > int(self.me["claim"]):
                since = time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                      time.gmtime(float(latest.get("since") or 0) / 1000))
                raise ApplyError(f"the lake {self.lake} was claimed by another consumer (pid {latest.get('pid')} on "
                                 f"{latest.get('host')}, since {since}) while this one was silent for more than "
                                 f"{int(LEASE_S)} s: this one stops (one consumer per lake)")
        self._write({**self.me, "renewed": int(time.time() * 1000)})
