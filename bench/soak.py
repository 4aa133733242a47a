"""Soak: `changefeed run` at a steady rate for minutes, and whether what it leaves behind stays flat.

    .venv/bin/python bench/soak.py [--minutes 10] [--rate 250] [--interval S] [--work DIR]

`changefeed run --rate R` (workload, file transport, Spark local[2] into Delta) runs in a subprocess, as a user
runs it; after --minutes it gets SIGTERM (its source stops at a transaction boundary, what it sent is applied
and verified, exit 0). Sampled every --interval seconds: the end-to-end lag of the micro-batches completed since
the last sample (from run's batch lines), the resident memory of the driver's Python process and of Spark's JVM
(local mode: the driver and its executors), and per table (and the bronze changelog) its data files and its
Delta log entries. Printed: the timeline, then the first tenth of the run against the last tenth (lag and memory:
their means; files and log entries: how many a minute each tenth added). Issue 37: the last tenth no worse.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAG = re.compile(r"^batch \d+: .*, lag ([0-9.]+) s")


@dataclass
class Sample:
    at: float
    lags: list[float]
    python_mb: float
    jvm_mb: float
    files: dict[str, tuple[int, int]] = field(default_factory=dict)  # table -> (data files, log entries)


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


def lake_files(lake: Path) -> dict[str, tuple[int, int]]:
    """Per table (db.table, and the changelog): data files, Delta log entries."""
    out = {}
    tables = [lake / "_changefeed" / "changelog"]
    if lake.is_dir():
        tables += [t for db in lake.iterdir() if db.is_dir() and not db.name.startswith("_")
                   for t in db.iterdir() if (t / "_delta_log").is_dir()]
    for t in tables:
        log = t / "_delta_log"
        if not log.is_dir():
            continue
        data = sum(1 for p in t.rglob("*.parquet") if "_delta_log" not in p.parts)
        entries = sum(1 for p in log.iterdir() if p.suffix in (".json", ".parquet") or p.name == "_last_checkpoint")
        name = "changelog" if t.name == "changelog" else f"{t.parent.name}.{t.name}"
        out[name] = (data, entries)
    return out


def soak(minutes: float, rate: int, interval: float, work: Path) -> tuple[list[Sample], int, str]:
    transactions = int(rate * minutes * 60)  # more than it can send in the time (a transaction has 1 to 4 rows)
    cmd = [sys.executable, "-m", "changefeed.cli", "run", "--rate", str(rate), "--transactions", str(transactions),
           "--work", str(work)]
    log = work.parent / "soak-run.log"
    lags: list[float] = []
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, stdout=err, stderr=subprocess.PIPE, text=True)

        def read() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                err.write(line)
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
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # the source stops; what it sent is applied and verified
        rc = proc.wait()
        reader.join(10)
    return samples, rc, log.read_text()


def tenths(samples: list[Sample]) -> tuple[list[Sample], list[Sample]]:
    n = max(1, len(samples) // 10)
    return samples[:n], samples[-n:]


def report(samples: list[Sample], minutes: float, rate: int) -> bool:
    print(f"soak: `changefeed run --rate {rate}` for {minutes:g} min, {len(samples)} samples")
    names = sorted({k for s in samples for k in s.files})
    head = f"{'s':>6} {'lag p50':>8} {'py MB':>7} {'jvm MB':>7} " + " ".join(f"{n[:18]:>18}" for n in names)
    print(head + "   (data files/log entries)")
    for s in samples:
        lag = f"{statistics.median(s.lags):.1f}" if s.lags else "-"
        cells = " ".join(f"{'/'.join(map(str, s.files.get(n, (0, 0)))):>18}" for n in names)
        print(f"{s.at:>6.0f} {lag:>8} {s.python_mb:>7.0f} {s.jvm_mb:>7.0f} {cells}")
    if len(samples) < 2:
        print("too few samples to compare the first and last tenth")
        return False
    first, last = tenths(samples)

    def mean(xs: list[float]) -> float:
        return statistics.fmean(xs) if xs else 0.0

    def per_minute(part: list[Sample], before: Sample | None, name: str, i: int) -> float:
        t0, v0 = (before.at, before.files.get(name, (0, 0))[i]) if before else (0.0, 0)
        t1, v1 = part[-1].at, part[-1].files.get(name, (0, 0))[i]
        return (v1 - v0) / max((t1 - t0) / 60, 1e-9)

    rows = [("lag (s, mean)", mean([x for s in first for x in s.lags]), mean([x for s in last for x in s.lags])),
            ("python MB", mean([s.python_mb for s in first]), mean([s.python_mb for s in last])),
            ("jvm MB", mean([s.jvm_mb for s in first]), mean([s.jvm_mb for s in last]))]
    before_last = samples[-len(last) - 1] if len(samples) > len(last) else None
    for n in names:
        rows.append((f"{n} files/min", per_minute(first, None, n, 0), per_minute(last, before_last, n, 0)))
        rows.append((f"{n} log/min", per_minute(first, None, n, 1), per_minute(last, before_last, n, 1)))
    print(f"{'':>32} {'first tenth':>12} {'last tenth':>12}  flat")
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
    ap.add_argument("--work", type=Path, default=None, help="keep the run's folder here (default: a temporary one)")
    args = ap.parse_args()
    interval = args.interval or max(3.0, args.minutes * 60 / 40)
    with tempfile.TemporaryDirectory(prefix="changefeed-soak-") as tmp:
        work = args.work or Path(tmp) / "w"
        work.parent.mkdir(parents=True, exist_ok=True)
        samples, rc, text = soak(args.minutes, args.rate, interval, work)
        flat = report(samples, args.minutes, args.rate)
        tail = [line.strip(" │") for line in text.splitlines() if any(w in line for w in ("verify", "error:"))]
        print(f"run exited {rc}; " + ("; ".join(tail[-3:]) or "(no verification line)"))
        print("holds flat: " + ("yes" if flat else "NO"))
        if rc != 0:
            sys.exit(rc)


if __name__ == "__main__":
    main()
