"""A warm-up before the stream: the consumer's decode and apply path run on a small synthetic stream, into a scratch
lake it creates and removes, before the real query reads its first record.

Why: a JVM Spark just launched runs its first micro-batch several times slower than its tenth. It loads ~15,000
classes, Spark generates and compiles its code (Janino), and the JIT compiles the planner's methods (Catalyst,
Delta) as they get hot: on the 2-core VM the first 250-event batch cost ~38 CPU-s against ~4.5 for a steady one,
and a stream's first DDL of each kind ~15 (bench/RESULTS.md). A consumer that starts on live traffic pays that as
lag on its first batches. Run before the query starts, as JVM services warm up before they report ready, the cost
moves to the start-up: the stream's first batches run on loaded classes and compiled code. Only worth it in a JVM
that was just launched (`should_warm_up`); the workload is the canal-json one of `changefeed run` (every type
family, each DDL kind), written to the file transport, whatever the consumer's own source and protocol: the JVM's
hot code (planning, Delta, the apply engine) is the same for all of them.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ..model import Event

ENV = "CHANGEFEED_WARM_UP"  # "0": no warm-up unless asked for on the command line (the tests' subprocesses)
PREFIX = "warm-up-"
# the synthetic stream: enough transactions for every DDL kind of the workload, sent in BATCHES micro-batches
TRANSACTIONS = 80
BATCHES = 3


@dataclass
class WarmUp:
    """What a warm-up did: its micro-batches, the changes they applied, its seconds."""

    batches: int = 0
    changes: int = 0
    seconds: float = 0.0


def default_on() -> bool:
    """The warm-up's default: on, unless the environment's CHANGEFEED_WARM_UP says 0 / false / off."""
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def should_warm_up(asked: bool | None, launched: bool, live: bool) -> bool:
    """Whether a command warms up: only a JVM it `launched` (an active session is as warm as what ran on it); then
    as `asked` (--warm-up / --no-warm-up, the TOML's `warm-up`), else by default when the query keeps running on a
    `live` stream (a processing-time trigger: its first batches' lag is what a warm-up cuts; a drain that stops at
    the stream's end would only pay for it) and the environment does not turn it off (`default_on`)."""
    if not launched:
        return False
    return asked if asked is not None else live and default_on()


def jvm_launched() -> bool:
    """Whether no Spark JVM runs in this process yet (call before a command starts its session)."""
    from pyspark import SparkContext

    return SparkContext._active_spark_context is None  # type: ignore[attr-defined]


def announce_and_warm(spark: SparkSession, under: Path, say: Any,
                      cancelled: Callable[[], bool] = lambda: False) -> WarmUp | None:
    """`warm_up` with a line before and after it on the command's output (`say`: print a line). A warm-up that fails
    is said in one line and the stream starts without it: it only ever saves time. `cancelled`: a stop was asked
    for (SIGTERM during the warm-up): it ends at once, and the stream then stops as it would."""
    say("warming up Spark before the stream: a synthetic stream into a scratch lake (--no-warm-up: not)")
    try:
        done = warm_up(spark, under, cancelled=cancelled)
    except Exception as e:  # noqa: BLE001 - the stream itself does not depend on it
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        say(f"the warm-up failed ({first[:200]}): the stream starts without it")
        return None
    if cancelled():
        say(f"the warm-up ended after {done.seconds:.0f} s: a stop was asked for")
    else:
        say(f"warmed up in {done.seconds:.0f} s ({done.batches} micro-batches, {done.changes} changes)")
    return done


def warm_up(spark: SparkSession, under: Path, batches: int = BATCHES, events: list[Event] | None = None,
            cancelled: Callable[[], bool] = lambda: False) -> WarmUp:
    """Run the synthetic stream (`events`: the workload's first TRANSACTIONS by default) through `read_changes` +
    `apply_changes` in `batches` micro-batches, in a folder made under `under` (created if missing) and removed at
    the end, whatever happens: nothing else is touched."""
    from ..job import RunOptions, default_sink
    from ..produce import open_producer
    from ..sinkconfig import codec_options
    from ..workload import Workload
    from .pipeline import apply_changes, read_changes

    t0 = time.monotonic()
    under.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=PREFIX, dir=under))  # ours alone: a new name
    out = WarmUp()
    quiet = logging.getLogger("changefeed.lake")  # the scratch tables' feature upgrades are nobody's news
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        sink = default_sink(RunOptions(work=scratch))
        protocol, codec_opts = codec_options(sink)
        if events is None:
            events = list(Workload(7, TRANSACTIONS))
        step = -(-len(events) // max(1, batches))
        chunks = [events[i:i + step] for i in range(0, len(events), step)]
        producer, transport, _ = open_producer(sink, ddl_to_all_partitions=True)
        transport.partitions(producer.router.default_topic)
        sent = [0]

        def write_next() -> None:
            """The next chunk, flushed before Spark asks the source for offsets again: one chunk a micro-batch."""
            if sent[0] < len(chunks):
                for ev in chunks[sent[0]]:
                    producer.send(ev)
                sent[0] += 1
                if sent[0] == len(chunks):
                    producer.close()  # the last watermark: every table complete
                transport.flush()

        def on_batch(rep: Any) -> None:
            out.batches += 1
            out.changes += rep.rows_in
            write_next()

        write_next()
        lake = scratch / "lake"
        changes = read_changes(spark, sink.split("?", 1)[0], protocol, codec_opts,
                               schema_store=str(scratch / "schemas"))
        query = apply_changes(changes, str(lake), checkpoint=str(scratch / "checkpoint"),
                              trigger="processing-time=0 seconds", on_batch=on_batch, app_id="changefeed-warm-up")
        try:
            deadline = time.monotonic() + 600
            while sent[0] < len(chunks) and query.exception() is None and time.monotonic() < deadline \
                    and not cancelled():
                time.sleep(0.1)
            if query.exception() is None and not cancelled():
                query.processAllAvailable()
        finally:
            query.stop()
            transport.close()
        if query.exception() is not None:
            raise RuntimeError(f"the warm-up's query failed: {query.exception()}")
    finally:
        quiet.setLevel(level)
        shutil.rmtree(scratch, ignore_errors=True)
        _forget_tables(spark)
    out.seconds = time.monotonic() - t0
    return out


def _forget_tables(spark: SparkSession) -> None:
    """Drop Delta's cached logs (the scratch lake's tables: their files are gone; the stream has not started)."""
    try:
        spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - a cache: nothing to lose when it cannot be cleared
        pass


KEEP_ARCHIVES = 2  # older archives kept beside the newest


def write_class_archive(folder: Path | None = None) -> Path | None:
    """Write the archive of the current key (none when it is there or there is no java): a JVM launched with
    `-XX:ArchiveClassesAtExit` runs the warm-up's stream, then exits, which writes it. Archives older than the
    newest few go."""
    from .classcache import FOLDER, QUIET, key

    folder = folder or FOLDER
    k = key()
    if k is None:
        print("classcache: no java: no class-data archive", file=sys.stderr)
        return None
    target = folder / f"classes-{k}.jsa"
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".classes-{k}.{os.getpid()}.jsa"
    from pyspark import SparkContext

    from .session import C1_ONLY, JVM_OPTIONS, SMALL_MACHINE, spark_session

    t0 = time.monotonic()
    # the JIT's first tier only (CHANGEFEED_JVM_OPTIONS may say otherwise): the archive holds classes, not code, and
    # this JVM's life is its start; C2's compiles took ~40% of its CPU (bench/RESULTS.md)
    jit = os.environ.get(JVM_OPTIONS, C1_ONLY)
    opts = f"{SMALL_MACHINE['spark.driver.extraJavaOptions']} {jit} -XX:ArchiveClassesAtExit={partial} {QUIET}"
    spark = spark_session("local[2]", "changefeed-classcache", conf={"spark.driver.extraJavaOptions": opts})
    spark.sparkContext.setLogLevel("ERROR")  # the set-up's output: its stopped query's job-group warnings are noise
    try:
        warm_up(spark, folder / "work")
    finally:
        spark.stop()
        gateway = SparkContext._gateway  # type: ignore[attr-defined]
        proc = getattr(gateway, "proc", None)
        if gateway is not None:
            gateway.shutdown()
        if proc is not None:  # the JVM exits when its stdin closes, and writes the archive as it does
            proc.stdin.close()
            proc.wait(timeout=900)
        shutil.rmtree(folder / "work", ignore_errors=True)
    if not partial.is_file() or partial.stat().st_size == 0:
        print(f"classcache: the JVM wrote no archive at {partial}", file=sys.stderr)
        return None
    partial.rename(target)
    # older archives (another JDK or set of jars) go, but the newest few stay: checkouts sharing one .cache each
    # keep theirs rather than deleting each other's
    older = sorted((p for p in folder.glob("classes-*.jsa") if p != target), key=lambda p: p.stat().st_mtime)
    for old in older[:-KEEP_ARCHIVES]:
        old.unlink()
    print(f"classcache: {target} ({target.stat().st_size >> 20} MB, {time.monotonic() - t0:.0f} s)", file=sys.stderr)
    return target


if __name__ == "__main__":
    write_class_archive()
