"""bench/soak.py's readings and verdict, without Spark: the heap read once Spark's cleaner is done, NMT's summary,
and the rule (the last tenth no worse than the first) kept apart from the last half's convergence."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_soak", ROOT / "bench" / "soak.py")
assert _spec and _spec.loader
soak = importlib.util.module_from_spec(_spec)
sys.modules["bench_soak"] = soak  # dataclasses look their module up
_spec.loader.exec_module(soak)

HISTOGRAM = """{pid}:
 num     #instances         #bytes  class name (module)
-------------------------------------------------------
   1:        120000      {page}  [J (java.base@17.0.15)
   2:          5000         240000  java.lang.String (java.base@17.0.15)
   3:             {n}           {rb}  org.apache.spark.sql.execution.joins.UnsafeHashedRelation
   4:             {t}            960  org.apache.spark.broadcast.TorrentBroadcast
   5:             1             24  org.apache.spark.sql.execution.joins.LongHashedRelation
   6:           250           6000  org.apache.spark.sql.catalyst.expressions.UnsafeRow
Total        125000      {total}
"""


def histogram(n: int, total_mb: int) -> str:
    return HISTOGRAM.format(pid=1, page=n * 8 << 20, n=n, rb=n * 40, t=n, total=total_mb << 20)


def test_a_histogram_gives_live_bytes_and_instances_per_class():
    total, counts = soak.parse_histogram(histogram(7, 300))
    assert total == 300 << 20
    assert counts["org.apache.spark.sql.execution.joins.UnsafeHashedRelation"] == 7
    assert counts["java.lang.String"] == 5000
    assert counts["[J"] == 120000


def test_the_heap_is_read_once_the_broadcasts_stop_falling():
    """GC, the cleaner removes blocks, GC again: the reading is the round whose broadcast count no longer fell."""
    seq = iter([histogram(11, 400), histogram(3, 330), histogram(3, 320), histogram(0, 100)])
    r = soak.settled_heap(lambda: next(seq), pause=0)
    assert (round(r.mb), r.broadcasts, r.rounds, r.rows) == (320, 3 + 3 + 1, 3, 250)
    # falling every round: stops at the cap, with the last round's reading
    seq = iter([histogram(n, 100 + n) for n in (9, 7, 5, 3)])
    r = soak.settled_heap(lambda: next(seq), pause=0, most=3)
    assert (round(r.mb), r.rounds) == (105, 3)
    # jcmd failing: what was read so far, or nothing
    assert soak.settled_heap(lambda: None, pause=0) is None
    # settled, but the last full GC left dead objects in place: read again at once until one compacted all
    seq = iter([histogram(5, 200), histogram(5, 190), histogram(5, 170), histogram(5, 150), histogram(5, 140)])
    said = iter([False, False, True])
    r = soak.settled_heap(lambda: next(seq), pause=0, compacted=lambda: next(said))
    assert (round(r.mb), r.rounds) == (150, 4)
    said = iter([False] * 9)  # never: `extra` rounds more, then that reading
    seq = iter([histogram(5, 200 - n) for n in range(9)])
    assert soak.settled_heap(lambda: next(seq), pause=0, compacted=lambda: next(said), extra=2).rounds == 4


PERF = """sun.gc.collector.0.invocations=412
sun.gc.collector.0.name="Copy"
sun.gc.collector.1.invocations=%d
sun.gc.collector.1.name="MSC"
sun.gc.generation.1.name="old"
"""


def test_a_full_gc_compacted_all_on_every_fourth():
    """The serial collector's dead wood: only its every 4th full GC (its count) compacts the whole old generation."""
    assert [soak.full_gcs(PERF % n) for n in (7, 8)] == [7, 8]
    assert soak.full_gcs(PERF.replace('"MSC"', '"Serial full collection pauses"') % 12) == 12  # JDK 17's name
    assert soak.full_gcs(PERF.replace('"MSC"', '"G1 Old Generation"') % 8) is None
    assert soak.full_gcs("") is None
    assert [soak.full_gc_compacted(n - 1, n) for n in (7, 8, 9)] == [False, True, False]
    assert soak.full_gc_compacted(6, 8) is False  # another full GC in between: which one compacted is unknown
    assert soak.full_gc_compacted(None, 8) is None


NMT = """Native Memory Tracking:

Total: reserved=2752250KB, committed=687502KB
       malloc: 84798KB #818836

-                 Java Heap (reserved=1048576KB, committed=387136KB)
                            (mmap: reserved=1048576KB, committed=387136KB)

-                      Code (reserved=249810KB, committed=31022KB)
                            (malloc=2122KB #13819) (peak=2136KB #13191)

-    Native Memory Tracking (reserved=12959KB, committed=12959KB)
"""


def test_native_memory_tracking_committed_per_area():
    areas = soak.parse_nmt(NMT)
    assert areas == {"Total": 687502 / 1024, "Java Heap": 387136 / 1024, "Code": 31022 / 1024,
                     "Native Memory Tracking": 12959 / 1024}


def _samples(jvm: list[float], minutes: float = 10.0) -> list:
    step = minutes * 60 / len(jvm)
    return [soak.Sample(at=(i + 1) * step - 1, lags=[2.0], python_mb=500.0, jvm_mb=m, files={"t": (1, i % 5)})
            for i, m in enumerate(jvm)]


def test_the_verdict_is_the_first_tenth_against_the_last_a_plateau_is_shown_beside():
    """Resident memory rising to a plateau over the first half: the last half is flat, the verdict still NO."""
    plateau = [700 + 140 * min(i, 5) for i in range(10) for _ in range(4)]
    rows = {r.label: r for r in soak.rows(_samples(plateau), 10.0, {}, {})}
    jvm = rows["jvm MB (resident)"]
    assert (jvm.first, jvm.last, jvm.half) == (700, 1400, 1400)
    assert not jvm.flat and jvm.flat_last_half
    assert rows["lag (s, mean)"].flat and rows["t live files (most)"].flat
    # the same within a quarter of the first tenth: flat by the rule
    level = [900 + (i % 3) * 20 for i in range(40)]
    assert all(r.flat for r in soak.rows(_samples(level), 10.0, {}, {}))


def test_the_heap_row_compares_the_first_tenths_reading_with_the_end():
    heap = {i: soak.HeapReading(mb, 0, 2) for i, mb in enumerate([150, 240, 260, 300, 280, 250, 300, 290, 270, 200], 1)}
    row = next(r for r in soak.rows(_samples([900] * 40), 10.0, heap, {}) if r.label.startswith("jvm heap"))
    assert (row.first, row.last, row.half) == (150, 200, 280)
    assert not row.flat  # 200 > 150 * 1.25 + 1
    heap[10] = soak.HeapReading(180, 0, 2)
    assert next(r for r in soak.rows(_samples([900] * 40), 10.0, heap, {}) if r.label.startswith("jvm heap")).flat
