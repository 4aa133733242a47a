"""Soak: `changefeed run` at a steady rate for minutes, and whether what it leaves behind stays flat.

    .venv/bin/python bench/soak.py [--minutes 10] [--rate 250] [--interval S] [--work DIR]

`changefeed run --rate R` (workload, file transport, Spark local[2] into Delta) runs in a subprocess, as a user
runs it; after --minutes it gets SIGTERM (its source stops at a transaction boundary, what it sent is applied
and verified, exit 0). Sampled every --interval seconds: the end-to-end lag of the micro-batches completed since
the last sample (from run's batch lines), the resident memory of the driver's Python process and of Spark's JVM
(local mode: the driver and its executors), and per table (and the bronze changelog) the data files of its current
snapshot (live files: what a reader lists) and the log entries since its last checkpoint (what a reader replays).
Files on disk grow by design without `--vacuum-retention` (removed files stay until a VACUUM; log files for the
30 days of `delta.logRetentionDuration`): the last sample's are printed for reference. The JVM's heap after a full
GC (`jcmd GC.run`, then `jstat -gc`) is read at the end of every tenth: a resident size that grows while that figure
holds is the heap growing into its limit, not a leak.
The time from a restart to the first applied micro-batch, as the lake stood at the end of the first tenth and at the
end: each time the run's processes are stopped (SIGSTOP) while its folder is copied, as a crash would leave it (the
copy's owner record removed: its consumer is gone), and after the run `changefeed consume` is started on each copy in
turn (available-now: what the run had sent but not applied yet), timed from its start to its first micro-batch that
applied changes. The two restarts run one after the other once the run is over, on an otherwise idle consumer.
Printed: the timeline, then the first tenth of the run against the last tenth (lag and memory: their means; live
files and log entries since a checkpoint: the last tenth's most against the first half's most: held, not growing).
Issue 37: the last tenth no worse.

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


def heap_after_gc(pid: int | None) -> float | None:
    """MB of the JVM's heap in use right after a full GC (`jcmd GC.run`, then `jstat -gc`): what it holds."""
    if pid is None or shutil.which("jcmd") is None or shutil.which("jstat") is None:
        return None
    try:
        subprocess.run(["jcmd", str(pid), "GC.run"], capture_output=True, timeout=120, check=True)
        out = subprocess.run(["jstat", "-gc", str(pid)], capture_output=True, text=True, timeout=60,
                             check=True).stdout.split("\n")
        head, vals = out[0].split(), out[1].split()
        row = dict(zip(head, vals, strict=False))
        return sum(float(row.get(k, 0)) for k in ("S0U", "S1U", "EU", "OU")) / 1024
    except (subprocess.SubprocessError, OSError, ValueError, IndexError):
        return None


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


def soak(minutes: float, rate: int, interval: float, work: Path,
         transactions: int | None = None) -> tuple[list[Sample], int, str, dict[str, float | None]]:
    # more than it can send in the time (a transaction has 1 to 4 rows), unless told
    transactions = transactions or int(rate * minutes * 60)
    cmd = [sys.executable, "-m", "changefeed.cli", "run", "--rate", str(rate), "--transactions", str(transactions),
           "--work", str(work)]
    log = work.parent / "soak-run.log"
    lags: list[float] = []
    heap: dict[str, float | None] = {}
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, stdout=err, stderr=subprocess.PIPE, text=True)

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
        samples: list[Sample] = []
        seen = 0
        while proc.poll() is None and time.monotonic() - start < minutes * 60:
            time.sleep(interval)
            py, jvm = memory(proc.pid)
            samples.append(Sample(time.monotonic() - start, lags[seen:], py, jvm, lake_files(work / "lake")))
            seen = len(lags)
            tenth = int((time.monotonic() - start) // (minutes * 6))  # tenths completed
            if 1 <= tenth < 10 and f"tenth {tenth}" not in heap:
                heap[f"tenth {tenth}"] = heap_after_gc(jvm_pid(proc.pid))
                if tenth == 1:
                    frozen_copy(proc.pid, work, work.parent / "restart-first")
        heap["end"] = heap_after_gc(jvm_pid(proc.pid)) if proc.poll() is None else None
        if proc.poll() is None:
            frozen_copy(proc.pid, work, work.parent / "restart-last")
        disk = disk_files(work / "lake")
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # the source stops; what it sent is applied and verified
        rc = proc.wait()
        reader.join(10)
    print("on disk at the end (data files/log files; no VACUUM, 30 days of log retention): "
          + ", ".join(f"{n} {a}/{b}" for n, (a, b) in sorted(disk.items())))
    for which in ("first", "last"):
        copy = work.parent / f"restart-{which}"
        if copy.is_dir():
            secs, before, said = restart(copy, work.parent / f"restart-{which}.log")
            heap[f"restart {which}"] = before
            print(f"restart on the lake as of the {which} tenth's end: "
                  + (f"{secs:.1f} s to the first applied micro-batch, {before:.1f} s before it started"
                     if secs is not None and before is not None else "no batch applied") + f" ({said})")
            shutil.rmtree(copy, ignore_errors=True)
    return samples, rc, log.read_text(), heap


def tenths(samples: list[Sample]) -> tuple[list[Sample], list[Sample]]:
    n = max(1, len(samples) // 10)
    return samples[:n], samples[-n:]


def report(samples: list[Sample], minutes: float, rate: int, heap: dict[str, float | None]) -> bool:
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
    first, last = tenths(samples)
    half = samples[:max(1, len(samples) // 2)]

    def mean(xs: list[float]) -> float:
        return statistics.fmean(xs) if xs else 0.0

    rows = [("lag (s, mean)", mean([x for s in first for x in s.lags]), mean([x for s in last for x in s.lags])),
            ("python MB", mean([s.python_mb for s in first]), mean([s.python_mb for s in last])),
            ("jvm MB (resident)", mean([s.jvm_mb for s in first]), mean([s.jvm_mb for s in last]))]
    tenths_heap = [heap.get(f"tenth {i}") for i in range(1, 10)] + [heap.get("end")]
    print("jvm heap MB after a full GC, at the end of each tenth: "
          + " ".join("-" if h is None else f"{h:.0f}" for h in tenths_heap))
    if tenths_heap[0] is not None and tenths_heap[-1] is not None:
        rows.append(("jvm heap MB after a full GC", tenths_heap[0], tenths_heap[-1]))
    if tenths_heap[4] is not None and tenths_heap[-1] is not None:  # a cache filling to its bound: flat after?
        rows.append(("jvm heap after GC, half -> end", tenths_heap[4], tenths_heap[-1]))
    if "restart first" in heap or "restart last" in heap:  # a restart that applied nothing: not flat
        rows.append(("restart, s before its 1st batch", heap.get("restart first") or math.nan,
                     heap.get("restart last") or math.nan))
    for n in names:
        for i, what in ((0, "live files"), (1, "log since ckpt")):
            rows.append((f"{n} {what} (most)", float(max(s.files.get(n, (0, 0))[i] for s in half)),
                         float(max(s.files.get(n, (0, 0))[i] for s in last))))
    print(f"{'':>32} {'first tenth':>12} {'last tenth':>12}  flat   (files: the first half's most)")
    flat = True
    for label, a, b in rows:
        ok = b <= a * 1.25 + 1.0  # within a quarter (and a unit) of the first tenth
        flat &= ok
        print(f"{label:>32} {a:>12.1f} {b:>12.1f}  {'yes' if ok else 'NO'}")
    return flat


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=int, default=250, help="events/s the source sends")
    ap.add_argument("--interval", type=float, default=None, help="seconds between samples (default: 1/40 of it)")
    ap.add_argument("--transactions", type=int, default=None,
                    help="the workload's length (its DDL come at fractions of it; default: more than it sends)")
    ap.add_argument("--work", type=Path, default=None, help="keep the run's folder here (default: a temporary one)")
    args = ap.parse_args()
    interval = args.interval or max(3.0, args.minutes * 60 / 40)
    with tempfile.TemporaryDirectory(prefix="changefeed-soak-") as tmp:
        work = args.work or Path(tmp) / "w"
        work.parent.mkdir(parents=True, exist_ok=True)
        samples, rc, text, heap = soak(args.minutes, args.rate, interval, work, args.transactions)
        flat = report(samples, args.minutes, args.rate, heap)
        tail = [line.strip(" │") for line in text.splitlines() if any(w in line for w in ("verify", "error:"))]
        print(f"run exited {rc}; " + ("; ".join(tail[-3:]) or "(no verification line)"))
        print("holds flat: " + ("yes" if flat else "NO"))
        if rc != 0:
            sys.exit(rc)


if __name__ == "__main__":
    main()
