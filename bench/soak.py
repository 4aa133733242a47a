"""Soak: `changefeed run` at a steady rate for minutes, and whether what it leaves behind stays flat.

    .venv/bin/python bench/soak.py [--minutes 10] [--rate 250] [--interval S] [--work DIR]

`changefeed run --rate R` (workload, file transport, Spark local[2] into Delta) runs in a subprocess, as a user
runs it; after --minutes it gets SIGTERM (its source stops at a transaction boundary, what it sent is applied
and verified, exit 0). Sampled every --interval seconds: the end-to-end lag of the micro-batches completed since
the last sample (from run's batch lines), the resident memory of the driver's Python process and of Spark's JVM
(local mode: the driver and its executors), and per table (and the bronze changelog) the data files of its current
snapshot (live files: what a reader lists) and the log entries since its last checkpoint (what a reader replays).
Files on disk grow by design without `--vacuum-retention` (removed files stay until a VACUUM; log files for the
30 days of `delta.logRetentionDuration`): the last sample's are printed for reference. The JVM's live heap is read at
the end of every tenth after full GCs (`jcmd GC.class_histogram`, each one a full GC) repeated 1.5 s apart until the
count of broadcast relations alive stops falling: a GC makes Spark's ContextCleaner see a dropped broadcast, its
thread then removes the broadcast's block, and only the next GC frees the relation (one memory page each), so a
single reading right after one GC still counts the last few micro-batches' broadcasts. The serial collector also
leaves dead objects in place (as `int[]` fillers a histogram counts live) up to 5% of the old generation except on
every 4th full GC, so the reading ends on a full GC that compacted all (`full_gc_compacted`: up to 3 more at once;
before, the `int[]` in the readings swung by 3-22 MB). A resident size that grows
while that figure holds is the heap growing into its limit, not a leak; `--nmt` runs the JVM with Native Memory
Tracking and prints what each area (Java heap, classes, code, threads, GC, other) committed, first tenth -> end.
The time from a restart to the first applied micro-batch, as the lake stood at the end of the first tenth and at the
end: each time the run's processes are stopped (SIGSTOP) while its folder is copied, as a crash would leave it (the
copy's owner record removed: its consumer is gone), and after the run `changefeed consume` is started on each copy in
turn (available-now: what the run had sent but not applied yet), timed from its start to its first micro-batch that
applied changes. The two restarts run one after the other once the run is over, on an otherwise idle consumer.
Printed: the timeline, then the first tenth of the run against the last tenth (lag and memory: their means; live
files and log entries since a checkpoint: the last tenth's most against the first half's most: held, not growing).
The verdict is issue 37's rule, every row: the last tenth no worse than the first. Beside it, for lag and memory,
the sixth tenth against the last (a figure that converges to a bound, such as the JIT's code, is flat over the last
half): shown, never the verdict.

    --conf K=V: a Spark setting for the run (repeatable), e.g. the JVM options of a before/after comparison.

    --transactions N: the workload's length (default: more than the run sends); its DDL fall at fixed fractions of
    it (`workload.LATER`: the RENAME COLUMN of app.users at 0.35), so N sets when they come.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
LAG = re.compile(r"^batch \d+: .*, lag ([0-9.]+) s")


@dataclass
class Sample:
    at: float
    lags: list[float]
    python_mb: float
    jvm_mb: float
    files: dict[str, tuple[int, int]] = field(default_factory=dict)  # table -> (live files, log since checkpoint)


def tree(pid: int) -> list[int]:
    """The process and its descendants."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def memory(pid: int) -> tuple[float, float]:
    """MB resident: the Python driver (and any Python workers), Spark's JVM."""
    py = jvm = 0.0
    for p in tree(pid):
        try:
            exe = os.readlink(f"/proc/{p}/exe")
        except OSError:
            continue
        if "java" in Path(exe).name:
            jvm += rss_mb(p)
        else:
            py += rss_mb(p)
    return py, jvm


def _tables(lake: Path) -> dict[str, Path]:
    """The lake's Delta tables (db.table) and the changelog."""
    tables = [lake / "_changefeed" / "changelog"]
    if lake.is_dir():
        tables += [t for db in lake.iterdir() if db.is_dir() and not db.name.startswith("_")
                   for t in db.iterdir() if (t / "_delta_log").is_dir()]
    return {("changelog" if t.name == "changelog" else f"{t.parent.name}.{t.name}"): t
            for t in tables if (t / "_delta_log").is_dir()}


def _since_checkpoint(log: Path) -> int:
    """Commit files after the table's last checkpoint (all of them when it has none)."""
    try:
        last = int(orjson.loads((log / "_last_checkpoint").read_bytes())["version"])
    except (OSError, ValueError, KeyError):
        last = -1
    return sum(1 for p in log.iterdir() if p.suffix == ".json" and p.stem.isdigit() and int(p.stem) > last)


def lake_files(lake: Path) -> dict[str, tuple[int, int]]:
    """Per table (db.table, and the changelog): live data files of its latest snapshot (delta-rs), log entries
    since its last checkpoint."""
    from deltalake import DeltaTable

    out = {}
    for name, t in _tables(lake).items():
        try:
            live = len(DeltaTable(str(t)).file_uris())
            out[name] = (live, _since_checkpoint(t / "_delta_log"))
        except Exception:  # noqa: BLE001 - a table dropped or renamed while read: left out of this sample
            continue
    return out


def disk_files(lake: Path) -> dict[str, tuple[int, int]]:
    """Per table: Parquet files on disk and log files on disk (growing by design without VACUUM)."""
    out = {}
    for name, t in _tables(lake).items():
        log = t / "_delta_log"
        data = sum(1 for p in t.rglob("*.parquet") if "_delta_log" not in p.parts)
        entries = sum(1 for p in log.iterdir() if p.suffix in (".json", ".parquet") or p.name == "_last_checkpoint")
        out[name] = (data, entries)
    return out


def jvm_pid(pid: int) -> int | None:
    for p in tree(pid):
        try:
            if "java" in Path(os.readlink(f"/proc/{p}/exe")).name:
                return p
        except OSError:
            continue
    return None


# what a broadcast leaves in the driver's heap until Spark's ContextCleaner removes its block: the hash relation a
# broadcast join builds (one memory page each, `spark.buffer.pageSize`), and the broadcast itself
BROADCAST_CLASSES = ("org.apache.spark.sql.execution.joins.UnsafeHashedRelation",
                     "org.apache.spark.sql.execution.joins.LongHashedRelation",
                     "org.apache.spark.broadcast.TorrentBroadcast")


# a row Spark holds on the heap: many of them at a reading are the running micro-batch's (the rows `multiwrite` kept
# of a table, sent back to the JVM as a local relation for its next rewrite: as many as the table has)
ROWS = "org.apache.spark.sql.catalyst.expressions.UnsafeRow"


def parse_histogram(text: str) -> tuple[int, dict[str, int]]:
    """`jcmd PID GC.class_histogram`: the bytes of all live objects (its Total line) and instances per class."""
    total, counts = 0, {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0].endswith(":") and parts[1].isdigit() and parts[2].isdigit():
            counts[parts[3]] = counts.get(parts[3], 0) + int(parts[1])
        elif len(parts) == 3 and parts[0] == "Total" and parts[2].isdigit():
            total = int(parts[2])
    return total, counts


@dataclass
class HeapReading:
    mb: float  # live objects after the last full GC
    broadcasts: int  # broadcast relations and broadcasts still alive then
    rounds: int  # full GCs it took for their count to stop falling
    rows: int = 0  # Spark rows materialized on the heap then (`UnsafeRow`s): a running micro-batch's local relations


def settled_heap(histogram: Callable[[], str | None], pause: float = 1.5, most: int = 6,
                 keep: Path | None = None, compacted: Callable[[], bool | None] = lambda: None,
                 extra: int = 3) -> HeapReading | None:
    """The heap after a full GC once the broadcasts that GC found unreachable are gone: a full GC (the histogram's)
    makes Spark's ContextCleaner see a dropped broadcast, its thread then removes the broadcast's block from the
    driver's store, and only the next full GC frees the relation. So: histogram, pause, again, until the count of
    broadcast objects stops falling (at least two rounds, at most `most`); the last round's live bytes. Then, while
    `compacted()` says the last full GC left dead objects in place (False; None: unknown), up to `extra` more rounds
    at once (`full_gc_compacted`: the serial GC compacts all only every few full GCs)."""
    last: HeapReading | None = None
    settled_at: int | None = None  # the round whose broadcast count no longer fell (or the cap's)
    n = 0
    while True:
        n += 1
        text = histogram()
        if text is None:
            return last
        if keep is not None:  # the last round's histogram, for a diff between tenths
            keep.write_text(text)
        total, counts = parse_histogram(text)
        now = HeapReading(total / 2**20, sum(counts.get(c, 0) for c in BROADCAST_CLASSES), n, counts.get(ROWS, 0))
        if settled_at is None and (n >= most or (last is not None and now.broadcasts >= last.broadcasts)):
            settled_at = n
        if settled_at is not None and (n - settled_at >= extra or compacted() is not False):
            return now
        last = now
        if settled_at is None:
            time.sleep(pause)


def full_gcs(perf_counters: str) -> int | None:
    """The serial collector's count of full GCs ("MSC"; JDK 17 names it "Serial full collection pauses") in `jcmd
    PerfCounter.print`; None: another collector."""
    names: dict[str, str] = {}
    counts: dict[str, int] = {}
    for line in perf_counters.splitlines():
        m = re.match(r"^sun\.gc\.collector\.(\d+)\.(name|invocations)=(.*)$", line.strip())
        if m:
            if m.group(2) == "name":
                names[m.group(1)] = m.group(3).strip('"')
            elif m.group(3).isdigit():
                counts[m.group(1)] = int(m.group(3))
    old = [k for k, v in names.items() if (v == "MSC" or v.startswith("Serial full")) and k in counts]
    return counts[old[0]] if old else None


def full_gc_compacted(before: int | None, after: int | None, always: int = 4) -> bool | None:
    """Whether the one full GC between two counts (`full_gcs`) compacted the whole old generation: the serial
    collector leaves dead objects in place as fillers (`int[]`, counted live by a histogram) up to
    `-XX:MarkSweepDeadRatio` (5%) of the old generation, except on every `-XX:MarkSweepAlwaysCompactCount`th (4th)
    full GC. Another full GC in between (the periodic one): False, read again. None: no count."""
    if before is None or after is None:
        return None
    return after == before + 1 and after % always == 0


def heap_after_gc(pid: int | None, keep: Path | None = None) -> HeapReading | None:
    """The JVM's live heap after full GCs and Spark's cleaner (`settled_heap` over `jcmd GC.class_histogram`)."""
    if pid is None or shutil.which("jcmd") is None:
        return None

    def count() -> int | None:
        try:
            return full_gcs(subprocess.run(["jcmd", str(pid), "PerfCounter.print"], capture_output=True, text=True,
                                           timeout=60, check=True).stdout)
        except (subprocess.SubprocessError, OSError):
            return None

    before: list[int | None] = [None]

    def histogram() -> str | None:
        before[0] = count()  # the full GCs before this round's own
        try:
            return subprocess.run(["jcmd", str(pid), "GC.class_histogram"], capture_output=True, text=True,
                                  timeout=120, check=True).stdout
        except (subprocess.SubprocessError, OSError):
            return None

    def compacted() -> bool | None:
        return full_gc_compacted(before[0], count())

    return settled_heap(histogram, keep=keep, compacted=compacted)


def native_memory(pid: int | None) -> dict[str, float] | None:
    """Committed MB per area of Native Memory Tracking (`jcmd VM.native_memory summary`), when the JVM runs with
    `-XX:NativeMemoryTracking=summary` (soak --nmt); None without it."""
    if pid is None or shutil.which("jcmd") is None:
        return None
    try:
        text = subprocess.run(["jcmd", str(pid), "VM.native_memory", "summary"], capture_output=True, text=True,
                              timeout=60, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return None
    return parse_nmt(text) or None


NMT_AREA = re.compile(r"^-\s+(.+?) \(reserved=\d+KB, committed=(\d+)KB\)")
NMT_TOTAL = re.compile(r"^Total: reserved=\d+KB, committed=(\d+)KB")


def parse_nmt(text: str) -> dict[str, float]:
    """NMT's summary: committed MB per area ("Java Heap", "Class", "Thread", "Code", "GC", "Other", ...) and "Total"."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        m = NMT_AREA.match(line) or NMT_TOTAL.match(line)
        if m:
            out["Total" if line.startswith("Total") else m.group(1)] = int(m.groups()[-1]) / 1024
    return out


def frozen_copy(pid: int, work: Path, dest: Path) -> None:
    """The run's folder copied to `dest` while its processes are stopped: the stream, lake and checkpoint as a crash
    at that moment leaves them (consistent with each other); the lake's owner record removed (its consumer is gone)."""
    procs = tree(pid)
    for p in procs:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGSTOP)
    try:
        shutil.copytree(work, dest, symlinks=True)
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGCONT)
    (dest / "lake" / "_changefeed" / "owner.json").unlink(missing_ok=True)


FIRST_APPLIED = re.compile(r"^batch \d+: ([0-9,]+) changes in.*\(([0-9.]+) s\)\s*$")


def restart(copy: Path, log: Path) -> tuple[float | None, float | None, str]:
    """`changefeed consume` on a frozen copy of the run: seconds from its start to its first micro-batch that applied
    changes (None: none did), the same less that batch's own seconds (how long the restart took before the batch: the
    batch's own depends on how far behind the run was), and what it said last."""
    cmd = [sys.executable, "-m", "changefeed.cli", "consume", "--from", f"file://{copy / 'stream' / 'changes'}",
           "--lake", str(copy / "lake"), "--protocol", "canal-json", "--option", "enable-tidb-extension=true"]
    t0 = time.monotonic()
    first: float | None = None
    before: float | None = None
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        last = ""
        for line in proc.stderr:
            out.write(line)
            last = line.strip() or last
            m = FIRST_APPLIED.match(line)
            if first is None and m and int(m.group(1).replace(",", "")) > 0:
                first = time.monotonic() - t0
                before = max(0.0, first - float(m.group(2)))
        rc = proc.wait()
    return first, before, (f"exit {rc}: {last}" if rc else "exit 0")


@dataclass
class Soak:
    samples: list[Sample]
    rc: int
    log: str
    heap: dict[int, HeapReading | None] = field(default_factory=dict)  # tenth (1-10, 10: the end) -> reading
    native: dict[int, dict[str, float] | None] = field(default_factory=dict)  # tenth -> NMT committed MB per area
    restarts: dict[str, float | None] = field(default_factory=dict)  # "first"/"last" -> s before its first batch


def soak(minutes: float, rate: int, interval: float, work: Path, transactions: int | None = None,
         conf: list[str] | None = None, nmt: bool = False) -> Soak:
    # more than it can send in the time (a transaction has 1 to 4 rows), unless told
    transactions = transactions or int(rate * minutes * 60)
    cmd = [sys.executable, "-m", "changefeed.cli", "run", "--rate", str(rate), "--transactions", str(transactions),
           "--work", str(work), *[a for kv in conf or [] for a in ("--conf", kv)]]
    env = dict(os.environ)
    if nmt:  # for the run's JVMs only, beside whatever extraJavaOptions the session passes
        env["JAVA_TOOL_OPTIONS"] = (env.get("JAVA_TOOL_OPTIONS", "") + " -XX:NativeMemoryTracking=summary").strip()
    log = work.parent / "soak-run.log"
    lags: list[float] = []
    out = Soak([], 0, "")
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, stdout=err, stderr=subprocess.PIPE, text=True, env=env)

        def read() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                err.write(line)
                err.flush()
                m = LAG.match(line)
                if m:
                    lags.append(float(m.group(1)))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        # the clock starts with the first micro-batch that applied something (Spark is up, the source sends)
        while not lags and proc.poll() is None:
            time.sleep(0.5)
        start = time.monotonic()
        seen = 0
        while proc.poll() is None and time.monotonic() - start < minutes * 60:
            time.sleep(interval)
            py, jvm = memory(proc.pid)
            out.samples.append(Sample(time.monotonic() - start, lags[seen:], py, jvm, lake_files(work / "lake")))
            seen = len(lags)
            tenth = int((time.monotonic() - start) // (minutes * 6))  # tenths completed
            if 1 <= tenth < 10 and tenth not in out.heap:
                pid = jvm_pid(proc.pid)
                out.native[tenth] = native_memory(pid) if nmt else None  # before the GCs: as the run left it
                out.heap[tenth] = heap_after_gc(pid, work.parent / f"histogram-{tenth}.txt")
                if tenth == 1:
                    frozen_copy(proc.pid, work, work.parent / "restart-first")
        if proc.poll() is None:
            pid = jvm_pid(proc.pid)
            out.native[10] = native_memory(pid) if nmt else None
            out.heap[10] = heap_after_gc(pid, work.parent / "histogram-10.txt")
            frozen_copy(proc.pid, work, work.parent / "restart-last")
        disk = disk_files(work / "lake")
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # the source stops; what it sent is applied and verified
        out.rc = proc.wait()
        reader.join(10)
    print("on disk at the end (data files/log files; no VACUUM, 30 days of log retention): "
          + ", ".join(f"{n} {a}/{b}" for n, (a, b) in sorted(disk.items())))
    for which in ("first", "last"):
        copy = work.parent / f"restart-{which}"
        if copy.is_dir():
            secs, before, said = restart(copy, work.parent / f"restart-{which}.log")
            out.restarts[which] = before
            print(f"restart on the lake as of the {which} tenth's end: "
                  + (f"{secs:.1f} s to the first applied micro-batch, {before:.1f} s before it started"
                     if secs is not None and before is not None else "no batch applied") + f" ({said})")
            shutil.rmtree(copy, ignore_errors=True)
    out.log = log.read_text()
    return out


def by_tenth(samples: list[Sample], minutes: float) -> list[list[Sample]]:
    """The samples in ten buckets by their time (a sample at the very end counts in the last tenth)."""
    buckets: list[list[Sample]] = [[] for _ in range(10)]
    for s in samples:
        buckets[min(9, max(0, int(s.at // (minutes * 6))))].append(s)
    return buckets


def no_worse(first: float, last: float) -> bool:
    """Issue 37's rule, per figure: the last tenth no worse than the first (within a quarter, and a unit)."""
    return last <= first * 1.25 + 1.0


@dataclass
class Row:
    label: str
    first: float  # the first tenth
    last: float  # the last tenth
    half: float | None = None  # the sixth tenth (the last half's first): a figure converging to a bound is flat after

    @property
    def flat(self) -> bool:
        return no_worse(self.first, self.last)

    @property
    def flat_last_half(self) -> bool | None:
        return None if self.half is None else no_worse(self.half, self.last)


def rows(samples: list[Sample], minutes: float, heap: dict[int, HeapReading | None],
         restarts: dict[str, float | None]) -> list[Row]:
    """What the verdict compares: lag and memory (means per tenth), the heap after full GCs (at the tenths' ends),
    the restart, and per table the live files and log entries since a checkpoint (the most: the first half's
    against the last tenth's, held not growing)."""
    tenths = by_tenth(samples, minutes)
    filled = [t for t in tenths if t]
    first, last, sixth = filled[0], filled[-1], (tenths[5] or filled[len(filled) // 2])

    def mean(xs: list[float]) -> float:
        return statistics.fmean(xs) if xs else 0.0

    def lag(t: list[Sample]) -> float:
        return mean([x for s in t for x in s.lags])

    out = [Row("lag (s, mean)", lag(first), lag(last), lag(sixth)),
           Row("python MB (resident)", mean([s.python_mb for s in first]), mean([s.python_mb for s in last]),
               mean([s.python_mb for s in sixth])),
           Row("jvm MB (resident)", mean([s.jvm_mb for s in first]), mean([s.jvm_mb for s in last]),
               mean([s.jvm_mb for s in sixth]))]
    h = {k: v.mb for k, v in heap.items() if v is not None}
    if 1 in h and 10 in h:
        out.append(Row("jvm heap MB after GC+cleaner", h[1], h[10], h.get(5)))
    if restarts:  # a restart that applied nothing: not flat
        out.append(Row("restart, s before its 1st batch", restarts.get("first") or math.nan,
                       restarts.get("last") or math.nan))
    half = samples[:max(1, len(samples) // 2)]
    for n in sorted({k for s in samples for k in s.files}):
        for i, what in ((0, "live files"), (1, "log since ckpt")):
            out.append(Row(f"{n} {what} (most)", float(max(s.files.get(n, (0, 0))[i] for s in half)),
                           float(max(s.files.get(n, (0, 0))[i] for s in last))))
    return out


def report(run: Soak, minutes: float, rate: int) -> bool:
    samples = run.samples
    print(f"soak: `changefeed run --rate {rate}` for {minutes:g} min, {len(samples)} samples")
    names = sorted({k for s in samples for k in s.files})
    head = f"{'s':>6} {'lag p50':>8} {'py MB':>7} {'jvm MB':>7} " + " ".join(f"{n[:18]:>18}" for n in names)
    print(head + "   (live files/log entries since the last checkpoint)")
    for s in samples:
        lag = f"{statistics.median(s.lags):.1f}" if s.lags else "-"
        cells = " ".join(f"{'/'.join(map(str, s.files.get(n, (0, 0)))):>18}" for n in names)
        print(f"{s.at:>6.0f} {lag:>8} {s.python_mb:>7.0f} {s.jvm_mb:>7.0f} {cells}")
    if len(samples) < 2:
        print("too few samples to compare the first and last tenth")
        return False
    heap = [run.heap.get(i) for i in range(1, 11)]
    print("jvm heap MB after full GCs and Spark's cleaner, at the end of each tenth (broadcasts alive, GCs, "
          "UnsafeRows): " + " ".join("-" if h is None else f"{h.mb:.0f} ({h.broadcasts}, {h.rounds}, {h.rows})"
                                     for h in heap))
    tenths = by_tenth(samples, minutes)
    print("jvm resident MB, mean of each tenth: "
          + " ".join(f"{statistics.fmean(s.jvm_mb for s in t):.0f}" if t else "-" for t in tenths))
    native = {k: v for k, v in run.native.items() if v}
    if native:
        a, b = native[min(native)], native[max(native)]
        print(f"native memory committed MB (NMT), end of tenth {min(native)} -> {max(native)}: "
              + ", ".join(f"{k} {a.get(k, 0):.0f} -> {b.get(k, 0):.0f}" for k in sorted(set(a) | set(b))
                          if max(a.get(k, 0), b.get(k, 0)) >= 1))
    table = rows(samples, minutes, run.heap, run.restarts)
    print(f"{'':>32} {'first tenth':>12} {'last tenth':>12}  flat   {'at half':>10}  last half flat")
    print(f"{'':>32} {'':>12} {'':>12}  (the verdict)          (a bound reached: shown, not the verdict)")
    for r in table:
        half = "" if r.half is None else f"{r.half:>10.1f}  {'yes' if r.flat_last_half else 'no'}"
        print(f"{r.label:>32} {r.first:>12.1f} {r.last:>12.1f}  {'yes' if r.flat else 'NO':<5}  {half}")
    print("(files: the first half's most against the last tenth's)")
    return all(r.flat for r in table)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=int, default=250, help="events/s the source sends")
    ap.add_argument("--interval", type=float, default=None, help="seconds between samples (default: 1/40 of it)")
    ap.add_argument("--transactions", type=int, default=None,
                    help="the workload's length (its DDL come at fractions of it; default: more than it sends)")
    ap.add_argument("--work", type=Path, default=None, help="keep the run's folder here (default: a temporary one)")
    ap.add_argument("--conf", action="append", default=[], help="a Spark setting K=V for the run (repeatable)")
    ap.add_argument("--nmt", action="store_true",
                    help="the run's JVM with Native Memory Tracking: committed memory per area at each tenth")
    args = ap.parse_args()
    interval = args.interval or max(3.0, args.minutes * 60 / 40)
    with tempfile.TemporaryDirectory(prefix="changefeed-soak-") as tmp:
        work = args.work or Path(tmp) / "w"
        work.parent.mkdir(parents=True, exist_ok=True)
        run = soak(args.minutes, args.rate, interval, work, args.transactions, args.conf, args.nmt)
        flat = report(run, args.minutes, args.rate)
        tail = [line.strip(" │") for line in run.log.splitlines() if any(w in line for w in ("verify", "error:"))]
        print(f"run exited {run.rc}; " + ("; ".join(tail[-3:]) or "(no verification line)"))
        print("holds flat: " + ("yes" if flat else "NO") + " (the last tenth no worse than the first, every row)")
        if run.rc != 0:
            sys.exit(run.rc)


if __name__ == "__main__":
    main()
