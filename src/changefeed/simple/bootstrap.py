"""When the simple protocol sends BOOTSTRAP messages (TiCDC's pkg/sink/codec/bootstraper.go).

A table gets a BOOTSTRAP before its first DML; then again once `send-bootstrap-interval-in-sec` has
passed or `send-bootstrap-in-msg-count` DMLs have gone out since the last one; a table with no DML for
30 minutes is forgotten until its next DML (which then brings a BOOTSTRAP first). Both settings at 0
(TiCDC: either at 0) turn bootstraps off. The clock is injected, so tests need no sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..model import Event, Kind, TableInfo

MAX_INACTIVE_SECONDS = 30 * 60


@dataclass(slots=True)
class _TableState:
    table: TableInfo
    counter: int
    last_send: float
    last_row: float


class Bootstrapper:
    def __init__(
        self,
        interval_s: int = 120,
        msg_count: int = 10000,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_inactive_s: float = MAX_INACTIVE_SECONDS,
    ) -> None:
        self.interval_s = interval_s
        self.msg_count = msg_count
        self.enabled = interval_s > 0 and msg_count > 0
        self._clock = clock
        self._max_inactive = max_inactive_s
        self._tables: dict[tuple, _TableState] = {}

    @staticmethod
    def _key(t: TableInfo) -> tuple:
        return (t.table_id,) if t.table_id else (t.schema, t.table)

    def _bootstrap(self, st: _TableState, now: float) -> Event:
        st.last_send = now
        st.counter = 0
        return Event(kind=Kind.BOOTSTRAP, commit_ts=0, table=st.table)

    def before_row(self, ev: Event) -> list[Event]:
        """BOOTSTRAP events to send before this DML (usually none)."""
        if not self.enabled or ev.table is None:
            return []
        table = ev.selected_from or ev.table  # the whole schema, not the column selector's view of it
        now = self._clock()
        key = self._key(table)
        st = self._tables.get(key)
        if st is None or now - st.last_row > self._max_inactive:
            st = _TableState(table, 1, float("-inf"), now)
            self._tables[key] = st
            return [self._bootstrap(st, now)]
        st.counter += 1
        st.last_row = now
        if st.table is not table and not st.table.same_definition(table):
            st.table = table  # a DDL changed it: later bootstraps carry the new schema
        if now - st.last_send >= self.interval_s or st.counter >= self.msg_count:
            return [self._bootstrap(st, now)]
        return []

    def tick(self) -> list[Event]:
        """Bootstraps due by time alone (TiCDC checks every 5 s); forgets tables idle for 30 minutes."""
        if not self.enabled:
            return []
        now = self._clock()
        out = []
        for key, st in list(self._tables.items()):
            if now - st.last_row > self._max_inactive:
                del self._tables[key]
            elif now - st.last_send >= self.interval_s or st.counter >= self.msg_count:
                out.append(self._bootstrap(st, now))
        return out


class BootstrappingEncoder:
    """A simple-protocol encoder with the BOOTSTRAP cadence in front of it (the producer side)."""

    def __init__(self, encoder: Any, bootstrapper: Bootstrapper, to_all_partitions: bool = True) -> None:
        self.encoder = encoder
        self.bootstrapper = bootstrapper
        self.to_all_partitions = to_all_partitions

    def _boot(self, events: list[Event]) -> list[Any]:
        out = []
        for b in events:
            for m in self.encoder.encode(b):
                if not self.to_all_partitions:
                    m.partition = 0  # send-bootstrap-to-all-partition=false: the first partition only
                out.append(m)
        return out

    def encode(self, ev: Event) -> list[Any]:
        if ev.is_row:
            return self._boot(self.bootstrapper.before_row(ev)) + self.encoder.encode(ev)
        if ev.kind is Kind.WATERMARK:
            return self._boot(self.bootstrapper.tick()) + self.encoder.encode(ev)
        return self.encoder.encode(ev)
