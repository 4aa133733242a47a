"""The floor of a small micro-batch: where its seconds go, counted in what does not depend on the machine's load.

    .venv/bin/python bench/floor.py [--chunk 250] [--count 30] [--transactions 6000] [--skip 3] [--batches] [--steps]

The main workload (file transport, canal-json, Spark local[2] into Delta, verified at the end) sent in lockstep
with the consumer: each micro-batch's report writes the next `--chunk` events before Spark reads the source's
next offsets, so every batch holds one chunk (250: one second of bench/freshness.py's stream) however loaded the
machine is. Per micro-batch: the consumer's phases (`BatchReport.phases`), Spark's per-trigger durations
(`StreamingQuery.recentProgress`: the source's offsets, planning, the batch, the offset and commit logs), the time
from one batch's end to the next one's start, the Spark jobs it ran (the scheduler's job counter), its py4j calls
(GatewayClient.send_command wrapped: count and seconds, all threads) and the CPU seconds of the process tree (the
JVM, Python, Spark's Python workers). Jobs, py4j calls and CPU seconds hardly depend on the load; wall seconds do.
Printed: each batch with --batches, then medians over the batches after the first --skip (the cold start).
Issue 38: the lag bench/freshness.py measures is about one such batch plus the wait for it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


class Py4jCounter:
    """Every call from Python into the JVM, counted and timed (all threads)."""

    def __init__(self) -> None:
        self.calls = 0
        self.seconds = 0.0
        self.lock = threading.Lock()
        # with --profile: per JVM method name and per the changefeed line that made it, [calls, seconds]
        self.by_method: dict[str, list[float]] | None = None
        self.by_line: dict[str, list[float]] = {}

    def install(self) -> None:
        from py4j.java_gateway import GatewayClient

        original = GatewayClient.send_command
        me = self

        def send_command(client: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return original(client, command, *args, **kwargs)
            finally:
                d = time.perf_counter() - t
                with me.lock:
                    me.calls += 1
                    me.seconds += d
                    if me.by_method is not None and isinstance(command, str):
                        parts = command.split("\n", 3)
                        for k, table in ((f"{parts[0]}:{parts[2] if len(parts) > 2 else ''}", me.by_method),
                                         (_caller(), me.by_line)):
                            got = table.setdefault(k, [0, 0.0])
                            got[0] += 1
                            got[1] += d

        GatewayClient.send_command = send_command  # type: ignore[method-assign]

    def read(self) -> tuple[int, float]:
        with self.lock:
            return self.calls, self.seconds


def _caller() -> str:
    """The innermost line of changefeed's own code on the stack."""
    f = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        if "/src/changefeed/" in name:
            return f"{name.rsplit('/src/changefeed/', 1)[1]}:{f.f_lineno} {f.f_code.co_name}"
        f = f.f_back  # type: ignore[assignment]
    return "(elsewhere)"


_ADOPTING: list[bool] = []


def adopt_orphans() -> bool:
    """This process made the reaper of the descendants whose parent ends before them (Linux's
    PR_SET_CHILD_SUBREAPER), once: such a process then stays in the tree `tree_cpu` reads, and at its end a zombie
    holding its final CPU seconds, instead of moving to init and taking seconds already counted out of the next
    reading (a run's figure printed -50.2 CPU-s so, bench/RESULTS.md 2026-11-29 10:34). Its zombie is never waited
    for here: the benchmark's life."""
    if not _ADOPTING:
        import ctypes

        try:
            _ADOPTING.append(ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0)
        except (OSError, AttributeError):  # not Linux
            _ADOPTING.append(False)
    return _ADOPTING[0]


def tree_cpu(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) of a process and its descendants, by part: "python" (this process), "jvm" (Spark's
    JVM: the driver and its executors), "workers" (Spark's Python workers) and "ended" (descendants that ended and
    were waited for: Spark's idle Python workers end mid-run); less dependent on the machine's load than wall time.
    Read from this process, the first reading makes it the reaper of its orphans (`adopt_orphans`)."""
    if pid == os.getpid():
        adopt_orphans()
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    names: dict[int, str] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                head, tail = (d / "stat").read_text().rsplit(")", 1)
            except OSError:
                continue
            f = tail.split()
            stats[int(d.name)] = f
            names[int(d.name)] = head.split("(", 1)[1]
            children.setdefault(int(f[1]), []).append(int(d.name))
    tick = os.sysconf("SC_CLK_TCK")
    out = {"python": 0.0, "jvm": 0.0, "workers": 0.0, "ended": 0.0}
    todo = [pid]
    while todo:
        p = todo.pop()
        f = stats.get(p)
        if f is not None:
            part = "python" if p == pid else "jvm" if names[p] == "java" else "workers"
            out[part] += (int(f[11]) + int(f[12])) / tick  # utime, stime (fields 14-15 of stat)
            out["ended"] += (int(f[13]) + int(f[14])) / tick  # cutime, cstime: its children waited for
            if part == "jvm":
                for k, v in jvm_threads(p).items():
                    out[f"jvm {k}"] = out.get(f"jvm {k}", 0.0) + v
        todo.extend(children.get(p, []))
    return out


def _cpu(parts: dict[str, float]) -> float:
    return sum(parts[k] for k in ("python", "jvm", "workers", "ended"))


def jvm_threads(pid: int) -> dict[str, float]:
    """The JVM's CPU seconds by kind of thread (its threads' names, numbers left out): JIT compilers, GC, Spark's
    task threads, the stream's thread, py4j's."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for d in Path(f"/proc/{pid}/task").iterdir():
        try:
            head, tail = (d / "stat").read_text().rsplit(")", 1)
        except OSError:
            continue
        f = tail.split()
        name = head.split("(", 1)[1].rstrip("0123456789-# ").strip() or "?"
        out[name] = out.get(name, 0.0) + (int(f[11]) + int(f[12])) / tick
    return out


def by_step(sched: Any, me: int) -> tuple[list[dict[str, Any]], Any]:
    """Each DDL's apply (`DdlApplier.apply`) and each step's table writes (`TableWriters.write`) timed: Spark jobs,
    CPU seconds of the process tree and wall seconds of each call, in the order made (both run on the stream's
    thread, one at a time); and a function putting the patches back."""
    from changefeed.spark.apply.ddl import DdlApplier
    from changefeed.spark.apply.tablewrites import TableWriters

    steps: list[dict[str, Any]] = []
    was_apply, was_write = DdlApplier.apply, TableWriters.write

    def timed(what: str, fn: Any) -> Any:
        j0, c0, t0 = sched.numTotalJobs(), _cpu(tree_cpu(me)), time.monotonic()
        try:
            return fn()
        finally:
            steps.append({"what": what, "jobs": sched.numTotalJobs() - j0, "cpu": _cpu(tree_cpu(me)) - c0,
                          "s": time.monotonic() - t0})

    def apply(self: Any, d: Any, version: int) -> None:
        timed(f"ddl {d.ddl_type} {d.database}.{d.table}", lambda: was_apply(self, d, version))

    def write(self: Any, work: list[Any]) -> Any:
        names = ",".join(sorted({w.table for w in work}))
        return timed(f"write {len(work)} [{names}]", lambda: was_write(self, work))

    DdlApplier.apply = apply  # type: ignore[method-assign]
    TableWriters.write = write  # type: ignore[method-assign]

    def undo() -> None:
        DdlApplier.apply = was_apply  # type: ignore[method-assign]
        TableWriters.write = was_write  # type: ignore[method-assign]

    return steps, undo


def run(chunk: int, count: int, transactions: int, profile: int = 0,
        conf: dict[str, str] | None = None, warm: bool = False,
        steps_of: bool = False, jvm_decode: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """`count` micro-batches of `chunk` events each, in lockstep: the next chunk is written (and flushed) by the
    previous batch's report, before Spark asks the source for its next offsets, so every batch holds one chunk
    whatever the machine's load. Verified at the end. Returns the batches and the run's totals."""
    import changefeed.spark.apply as apply_mod
    from changefeed.job import RunOptions, default_sink
    from changefeed.produce import open_producer
    from changefeed.sinkconfig import codec_options
    from changefeed.spark import spark_session
    from changefeed.spark.layout import LakeLayout, schema_store
    from changefeed.spark.pipeline import apply_changes, read_changes
    from changefeed.spark.verify import verify
    from changefeed.workload import Workload

    counter = Py4jCounter()
    me = os.getpid()
    t_start = time.monotonic()
    spark = spark_session("local[2]", "changefeed-bench-floor", conf=conf)
    start = {"session s": time.monotonic() - t_start, "session CPU-s": _cpu(tree_cpu(me))}
    sched = spark.sparkContext._jsc.sc().dagScheduler()  # type: ignore[union-attr]
    jvm = spark._jvm  # type: ignore[union-attr]
    mx = jvm.java.lang.management.ManagementFactory
    janino = jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()

    def jvm_counts() -> dict[str, int]:
        """Classes the JVM loaded, Spark's code generation compiles (Janino: the codegen cache's misses) and the JIT's
        compile time (ms)."""
        return {"classes": int(mx.getClassLoadingMXBean().getTotalLoadedClassCount()),
                "janino": int(janino.getCount()), "jit_ms": int(mx.getCompilationMXBean().getTotalCompilationTime())}

    counter.install()
    steps, undo = by_step(sched, me) if steps_of else ([], lambda: None)
    starts: dict[int, float] = {}
    original_process = apply_mod.ChangeApplier.process

    def process(self: Any, changes: Any, batch_id: int) -> Any:
        starts[batch_id] = time.monotonic()
        return original_process(self, changes, batch_id)

    apply_mod.ChangeApplier.process = process  # type: ignore[method-assign]
    batches: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="changefeed-floor-") as tmp:
            if warm:  # the consumer's warm-up (spark/warmup.py) before the stream, as consume and run do
                from changefeed.spark.warmup import warm_up

                t_warm, cpu_warm = time.monotonic(), _cpu(tree_cpu(me))
                wu = warm_up(spark, Path(tmp) / "spark")
                start.update({"warm-up s": time.monotonic() - t_warm, "warm-up CPU-s": _cpu(tree_cpu(me)) - cpu_warm,
                              "warm-up batches": wu.batches})
            opts = RunOptions(work=Path(tmp) / "w", transactions=transactions)
            opts.work.mkdir()
            sink = default_sink(opts)
            protocol, codec_opts = codec_options(sink)
            producer, transport, _ = open_producer(sink, ddl_to_all_partitions=True,
                                                   watermark_interval_ms=opts.watermark_interval_ms)
            w = Workload(opts.seed, transactions)
            events = iter(w)
            written = {"chunks": 0, "done": False}

            def write_chunk() -> None:
                """The next `chunk` events, flushed; the last chunk closes the stream (its final watermark)."""
                if written["done"]:
                    return
                n = 0
                for ev in events:
                    producer.send(ev)
                    n += 1
                    if n >= chunk:
                        break
                written["chunks"] += 1
                if n < chunk or written["chunks"] >= count:
                    producer.close()
                    written["done"] = True
                transport.flush()

            cp = LakeLayout(opts.lake_location).checkpoint
            transport.partitions(producer.router.default_topic)
            write_chunk()
            last = {"jobs": sched.numTotalJobs(), "py4j": counter.read(), "end": time.monotonic(),
                    "cpu": tree_cpu(me), "jvm": jvm_counts()}

            def on_batch(rep: Any) -> None:
                if profile and rep.batch_id == profile:  # from here on: the profile of the batches after
                    counter.by_method = {}
                now = time.monotonic()
                calls, secs = counter.read()
                jobs = sched.numTotalJobs()
                cpu = tree_cpu(me)
                counts = jvm_counts()
                batches.append({"id": rep.batch_id, "job_ids": (last["jobs"], jobs), "rows": rep.rows_in,
                                "tables": len(rep.tables),
                                "seconds": rep.seconds, "phases": dict(rep.phases), "jobs": jobs - last["jobs"],
                                "py4j": calls - last["py4j"][0], "py4j_s": secs - last["py4j"][1],
                                "gap": starts.get(rep.batch_id, now) - last["end"],
                                "cpu": _cpu(cpu) - _cpu(last["cpu"]),
                                **{k: counts[k] - last["jvm"][k] for k in counts},
                                "cpu_by": {k: cpu[k] - last["cpu"].get(k, 0.0) for k in cpu},
                                "steps": list(steps)})
                steps.clear()
                write_chunk()  # before Spark's next trigger reads the offsets: one chunk a batch
                last.update(jobs=sched.numTotalJobs(), py4j=counter.read(), end=time.monotonic(), cpu=tree_cpu(me),
                            jvm=jvm_counts())

            t0 = time.monotonic()
            changes = read_changes(spark, sink.split("?", 1)[0], protocol, codec_opts,
                                   schema_store=schema_store(cp), jvm_decode=jvm_decode)
            query = apply_changes(changes, opts.lake_location, checkpoint=cp, trigger="processing-time=0 seconds",
                                  on_batch=on_batch)
            try:
                while not written["done"] and query.exception() is None:
                    time.sleep(0.2)
                query.processAllAvailable()
                progress = {int(p.batchId): dict(p.durationMs) for p in query.recentProgress}
            finally:
                query.stop()
                transport.close()
            seconds = time.monotonic() - t0
            if producer.events < sum(1 for _ in Workload(opts.seed, transactions)):
                w = Workload(opts.seed, transactions)  # the state after the events sent, not the whole workload
                from itertools import islice

                from changefeed.upstream import final_state

                state = final_state(islice(iter(w), producer.events))
            else:
                state = w.state
            v = verify(spark, opts.lake_location, state)
            if not v.ok:
                raise RuntimeError("the lake does not equal upstream: no figure")
            for b in batches:
                b["spark"] = progress.get(b["id"], {})
            if batches:  # the jobs of the last batch but one (the last closes the stream): what ran them (PySpark
                shown = batches[-2] if len(batches) > 1 else batches[-1]  # names a job by its Python caller)
                lo, hi = shown["job_ids"]
                store = spark.sparkContext._jsc.sc().statusStore()  # type: ignore[union-attr]
                for i in range(lo, hi):
                    try:
                        j = store.job(i)
                    except Exception:  # noqa: BLE001 - no longer retained: not shown
                        continue
                    print(f"  job {i} of batch {shown['id']}: {j.name()} ({j.numTasks()} tasks)")
            if counter.by_method is not None:
                n = max(1, len(batches) - profile)
                for title, table in (("JVM method", counter.by_method), ("changefeed line", counter.by_line)):
                    print(f"py4j calls per batch by {title} (batches {profile + 1}-{len(batches)}): calls, seconds")
                    for k, (c, sec) in sorted(table.items(), key=lambda kv: -kv[1][1])[:40]:
                        print(f"  {c / n:8.1f} {sec / n:7.3f}  {k}")
            return batches, {"batches": len(batches), "seconds": seconds, "events": producer.events, "start": start}
    finally:
        undo()
        spark.stop()


SPARK_KEYS = ("latestOffset", "getBatch", "queryPlanning", "walCommit", "commitOffsets", "addBatch",
              "triggerExecution")


def report(batches: list[dict[str, Any]], totals: dict[str, Any], skip: int, each: bool) -> None:
    if each:
        print(f"{'batch':>5} {'rows':>6} {'tabs':>4} {'gap':>5} {'trig':>5} {'ours':>5} "
              f"{'cpu':>5} {'jobs':>4} {'py4j':>5} {'py4j s':>6} {'class':>5} {'jan':>4} {'jit':>5}  phases (s)")
        for b in batches:
            sp = b["spark"]
            ph = " ".join(f"{k} {v:.2f}" for k, v in b["phases"].items())
            print(f"{b['id']:>5} {b['rows']:>6} {b['tables']:>4} {b['gap']:>5.2f} "
                  f"{sp.get('triggerExecution', 0) / 1000:>5.2f} {b['seconds']:>5.2f} {b['cpu']:>5.2f} {b['jobs']:>4} "
                  f"{b['py4j']:>5} {b['py4j_s']:>6.2f} {b['classes']:>5} {b['janino']:>4} {b['jit_ms']:>5}  {ph}")
    if any(b.get("steps") for b in batches):
        print("each batch's DDL and table writes (Spark jobs, CPU s of the process tree, wall s):")
        for b in batches:
            for st in b.get("steps", []):
                print(f"  batch {b['id']:>3}: {st['jobs']:>3} jobs {st['cpu']:6.2f} CPU-s {st['s']:6.2f} s  "
                      f"{st['what']}")
    print("  start: " + ", ".join(f"{k} {v:.2f}" for k, v in totals.get("start", {}).items()))
    first = batches[:3]
    print(f"  first {len(first)} batches: CPU {sum(b['cpu'] for b in first):.1f} s, ours "
          f"{sum(b['seconds'] for b in first):.1f} s, Spark's triggers "
          f"{sum(b['spark'].get('triggerExecution', 0) / 1000 for b in first):.1f} s; the query's start "
          f"(batch 0's gap) {batches[0]['gap'] if batches else 0:.1f} s")
    steady = batches[skip:] or batches
    n = len(steady)

    def med(xs: list[float]) -> float:
        return statistics.median(xs) if xs else 0.0

    print(f"{totals['batches']} micro-batches, {totals['events']:,} events, run {totals['seconds']:.0f} s; medians "
          f"over batches {skip + 1}-{len(batches)} ({n}):")
    print(f"  rows {med([b['rows'] for b in steady]):,.0f}, tables written {med([b['tables'] for b in steady]):.0f}, "
          f"Spark jobs {med([b['jobs'] for b in steady]):.0f}, py4j calls {med([b['py4j'] for b in steady]):.0f} "
          f"({med([b['py4j_s'] for b in steady]):.2f} s in them, all threads), CPU "
          f"{med([b['cpu'] for b in steady]):.2f} s (the process tree: "
          + ", ".join(f"{k} {med([b['cpu_by'].get(k, 0.0) for b in steady]):.2f}" for k in ("python", "jvm", "workers"))
          + ")")
    threads = {k: med([b["cpu_by"].get(k, 0.0) for b in steady]) for k in steady[-1]["cpu_by"] if k.startswith("jvm ")}
    print("  the JVM's CPU by thread: " + ", ".join(f"{k[4:]} {v:.2f}" for k, v in
                                                     sorted(threads.items(), key=lambda kv: -kv[1]) if v >= 0.01))
    print(f"  JVM: classes loaded {med([b['classes'] for b in steady]):.0f}, Janino compiles (codegen cache misses) "
          f"{med([b['janino'] for b in steady]):.0f}, JIT compile time {med([b['jit_ms'] for b in steady]):.0f} ms")
    print(f"  Spark's trigger {med([b['spark'].get('triggerExecution', 0) / 1000 for b in steady]):.2f} s, of it our "
          f"batch {med([b['seconds'] for b in steady]):.2f} s; between batches (end to next start) "
          f"{med([b['gap'] for b in steady]):.2f} s")
    spark = {k: med([b["spark"].get(k, 0) / 1000 for b in steady]) for k in SPARK_KEYS}
    print("  Spark's trigger: " + ", ".join(f"{k} {v:.2f}" for k, v in spark.items()))
    keys = dict.fromkeys(k for b in steady for k in b["phases"])
    print("  our phases: " + ", ".join(f"{k} {med([b['phases'].get(k, 0.0) for b in steady]):.2f}" for k in keys))
    print(f"  totals over those batches: jobs {sum(b['jobs'] for b in steady)}, py4j calls "
          f"{sum(b['py4j'] for b in steady)}, CPU {sum(b['cpu'] for b in steady):.1f} s, our batches "
          f"{sum(b['seconds'] for b in steady):.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunk", type=int, default=250, help="events a micro-batch holds (one second at 250/s)")
    ap.add_argument("--count", type=int, default=30, help="micro-batches")
    ap.add_argument("--transactions", type=int, default=6000, help="the workload's length (sets where its DDL fall)")
    ap.add_argument("--skip", type=int, default=3, help="batches left out of the medians (the cold start)")
    ap.add_argument("--batches", action="store_true", help="print every batch")
    ap.add_argument("--profile", type=int, default=0, help="py4j calls by JVM method and by caller, after batch N")
    ap.add_argument("--conf", action="append", default=[], help="a Spark setting K=V (as `changefeed run --conf`)")
    ap.add_argument("--warm-up", action="store_true", help="the consumer's warm-up (spark/warmup.py) first")
    ap.add_argument("--steps", action="store_true", help="each DDL's apply and each step's writes: jobs, CPU s")
    ap.add_argument("--jvm-decode", action="store_true", help="canal-json rows decoded on the JVM (read_changes')")
    args = ap.parse_args()
    print(f"uptime: {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f}", flush=True)
    batches, totals = run(args.chunk, args.count, args.transactions, args.profile,
                            dict(c.split("=", 1) for c in args.conf), args.warm_up, args.steps, args.jvm_decode)
    report(batches, totals, args.skip, args.batches)
    print(f"uptime: {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f}")


if __name__ == "__main__":
    main()
