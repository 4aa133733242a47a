"""pycycles.CycleCollector: a collection at most once every `every_s` seconds (no Spark)."""

from __future__ import annotations

import gc

from changefeed.spark.apply.pycycles import CycleCollector, young


def test_collects_at_first_then_at_most_once_per_interval():
    now = [100.0]
    runs: list[float] = []
    c = CycleCollector(2.0, clock=lambda: now[0], collect=lambda: runs.append(now[0]))
    assert c.due()
    for t in (100.5, 101.9):
        now[0] = t
        assert not c.due()
    now[0] = 102.0
    assert c.due()
    assert runs == [100.0, 102.0]


def test_frees_an_object_only_a_cycle_kept():
    """What it is for: an object in a reference cycle (py4j's JavaObject and its JavaMember) freed by it."""
    import weakref

    class Node:
        pass

    gc.collect()
    gc.disable()  # no automatic collection in between: only the collector's
    try:
        a, b = Node(), Node()
        a.other, b.other = b, a
        alive = weakref.ref(a)
        del a, b
        assert alive() is not None  # reference counts alone never free a cycle
        assert CycleCollector(0.0).due()
        assert alive() is None
        # a cycle just made (a py4j object a call dropped): the young generations' collection frees it
        a, b = Node(), Node()
        a.other, b.other = b, a
        alive = weakref.ref(a)
        del a, b
        young()
        assert alive() is None
    finally:
        gc.enable()


def test_now_collects_whatever_the_interval_and_restarts_it():
    """A batch's end collects at once (its own objects); the next batch's start then waits out the interval."""
    now = [10.0]
    runs: list[float] = []
    c = CycleCollector(2.0, clock=lambda: now[0], collect=lambda: runs.append(now[0]))
    assert c.due()
    now[0] = 10.5
    c.now()
    now[0] = 12.1  # 2.1 s after the first, 1.6 s after the batch's end
    assert not c.due()
    now[0] = 12.5
    assert c.due()
    assert runs == [10.0, 10.5, 12.5]
