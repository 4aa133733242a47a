"""The many-tables workload streamed through `changefeed run`: 1,000 tables at 5,000 events/s (issue 38 item 2).

    .venv/bin/python bench/many_stream.py [--events 300000] [--tables 1000] [--rate 5000] [--work DIR]
                                          [--profile N --profile-file FILE]

`many_tables.events(events, tables)` (a CREATE TABLE per table, then the changes round robin over them) written
once as event lines (`eventline.EventWriter`) to <work>/many.jsonl, then `changefeed run --source <work>/many.jsonl
--rate R --work <work>/run` in this process (the run's own report, lag and verification as the CLI prints them).
Beside each micro-batch of the lake: the CPU seconds of the process tree it took (this process, the JVM, Spark's
Python workers), its Spark jobs and phases; at the end the medians of the steady batches (those without DDL),
which depend less on the machine's load than the lag. `--profile N`: micro-batch N under cProfile, the stats
written to `--profile-file` (read them with `python -m pstats FILE`).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from floor import _cpu, tree_cpu  # noqa: E402
from many_tables import events  # noqa: E402


def write_events(path: Path, n: int, tables: int) -> None:
    """The workload as event lines, written once per (events, tables) (the file is reused when it is there)."""
    from changefeed.eventline import EventWriter

    if path.exists():
        return
    w = EventWriter()
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        for ev in events(n, tables):
            f.write(w.line(ev) + b"\n")
    tmp.rename(path)


def install(lake: str, rows: list[dict[str, Any]], profile: int | None, profile_file: str | None) -> None:
    """Each micro-batch of `lake` (not the warm-up's): its CPU seconds by part, Spark jobs and phases, printed and
    added to `rows`."""
    import changefeed.spark.apply as apply_mod

    original = apply_mod.ChangeApplier.process

    def process(applier: Any, changes: Any, batch_id: int) -> Any:
        if applier.lake != lake:
            return original(applier, changes, batch_id)
        sched = changes.sparkSession.sparkContext._jsc.sc().dagScheduler()
        jobs, cpu = sched.numTotalJobs(), tree_cpu(os.getpid())
        prof = cProfile.Profile() if batch_id == profile else None
        rep = original(applier, changes, batch_id) if prof is None else prof.runcall(original, applier, changes,
                                                                                      batch_id)
        if prof is not None and profile_file:
            prof.dump_stats(profile_file)
        now = tree_cpu(os.getpid())
        row = {"batch": batch_id, "changes": rep.rows_in, "ddl": rep.ddl_applied, "seconds": rep.seconds,
               "CPU-s": _cpu(now) - _cpu(cpu), "jobs": sched.numTotalJobs() - jobs,
               **{k: now[k] - cpu.get(k, 0.0) for k in ("python", "jvm", "workers")}, "phases": dict(rep.phases)}
        rows.append(row)
        print(f"  [cpu] batch {batch_id}: {rep.rows_in:,} changes, {rep.ddl_applied} DDL, {rep.seconds:.2f} s, "
              f"{row['CPU-s']:.2f} CPU-s (python {row['python']:.2f}, jvm {row['jvm']:.2f}, workers "
              f"{row['workers']:.2f}), {row['jobs']} jobs; " + ", ".join(f"{k} {v:.2f}" for k, v in rep.phases.items()),
              flush=True)
        return rep

    apply_mod.ChangeApplier.process = process  # type: ignore[method-assign]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=300_000)
    ap.add_argument("--tables", type=int, default=1000)
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--work", default="/tmp/many_stream", help="the event file and the run's folder (replaced)")
    ap.add_argument("--profile", type=int, help="this micro-batch under cProfile")
    ap.add_argument("--profile-file", default="many_stream.prof")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    source = work / f"many_{args.events}_{args.tables}.jsonl"
    write_events(source, args.events, args.tables)
    run_dir = work / "run"
    if run_dir.exists():
        shutil.rmtree(run_dir)  # this script's own folder
    rows: list[dict[str, Any]] = []
    install(str(run_dir / "lake"), rows, args.profile, args.profile_file)
    from changefeed.cli import app

    t0 = time.monotonic()
    try:
        app(["run", "--source", str(source), "--rate", str(args.rate), "--work", str(run_dir)],
            standalone_mode=False)
    finally:
        steady = [r for r in rows if r["changes"] and not r["ddl"]]
        print(f"{len(rows)} micro-batches in {time.monotonic() - t0:.1f} s; {len(steady)} steady (no DDL)")
        if steady:
            med = {k: statistics.median(r[k] for r in steady) for k in ("changes", "seconds", "CPU-s", "python",
                                                                          "jvm", "workers", "jobs")}
            phases = {k: statistics.median(r["phases"].get(k, 0.0) for r in steady) for k in steady[0]["phases"]}
            print("steady batches, median: " + ", ".join(f"{k} {v:,.2f}" for k, v in med.items()) + "; phases "
                  + ", ".join(f"{k} {v:.2f}" for k, v in phases.items()))


if __name__ == "__main__":
    main()
