"""Python's reference cycles collected between micro-batches: what lets the JVM free what earlier batches used.

py4j's JavaObject and the JavaMembers it caches refer to each other, so a JVM object the driver called a method on
(a DataFrame, a Column, a DeltaTable) is released (py4j's `m d` command) only when Python's cycle collector frees
the pair, and a process holding many long-lived objects runs a full collection rarely. Until then the JVM keeps the
object and all it reaches: a DataFrame's plans, its broadcast hash relations (an 8 MB page each, in the driver's
block store) and local relations (the rows `multiwrite` keeps of a table). In `bench/soak.py`, after 20 micro-batches
the driver's JVM held 192 such DataFrames and 11 hashed relations, and its heap after a full GC kept growing
(bench/RESULTS.md). A full collection costs ~50 ms of CPU here (100k objects): at most one every `every_s` seconds
at a batch's start, and one at its end (`now`): what the batch itself used is then released before the consumer
waits for the next trigger, not kept through the wait and the next batch's start (a heap dump of the soak's driver
late in a run: its 8 MB broadcast hash relations held by the last batch's DataFrames through py4j).

Every JavaObject passed to a JVM call is in such a cycle too (py4j's `is_python_proxy` reads its `Java` attribute,
which caches a JavaMember on it): `createDataFrame` of an Arrow table passes the JVM an iterator over the table's
Arrow IPC bytes, drops it at once, and the JVM kept those bytes beside the local relation built from them for the
whole micro-batch (`young`, after it: a collection of the youngest generations, ~0.1-0.5 ms).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

EVERY_S = 2.0


class CycleCollector:
    """Runs `gc.collect()` when asked, at most once every `every_s` seconds (by `clock`)."""

    def __init__(self, every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic,
                 collect: Callable[[], object] = gc.collect) -> None:
        self.every_s = every_s
        self.clock = clock
        self.collect = collect
        self.last: float | None = None

    def now(self) -> None:
        """Collect at once (a batch's end: its own objects are unreachable from here on)."""
        self.collect()
        self.last = self.clock()

    def due(self) -> bool:
        """Collect if the last collection is `every_s` old (or there was none); whether it collected."""
        now = self.clock()
        if self.last is not None and now - self.last < self.every_s:
            return False
        self.collect()
        self.last = self.clock()
        return True


def young() -> None:
    """Collect the two youngest generations (~0.1-0.5 ms, not a full collection): the py4j objects a call just made
    and dropped (in a cycle) released at once; what an automatic collection promoted since waits for `now`."""
    gc.collect(1)
