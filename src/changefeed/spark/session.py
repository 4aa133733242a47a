"""A SparkSession with Delta Lake, Kafka and Avro, from the connector jars cached by the set-up.

`spark.jars.packages` cannot resolve Spark 4.0.1's Kafka connector from Maven Central (its token provider
4.0.1 was never published), so the set-up fetches the jars once with Maven (scripts/spark-jars/fetch) and
the session passes them with `spark.jars`: no download at run time. Local mode by default; any master by
argument or by SPARK_MASTER. The small-machine defaults (see ENVIRONMENT.md) apply only to a local session this
process starts, and only where the user's settings (`conf`: --conf and [spark]) and spark-defaults.conf say
nothing (spark/settings.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import SparkSetupError
from .classcache import JARS, NIOFS  # the jars, named once where the class-data archive keys on them
from .cluster import preflight
from .settings import DELTA_REQUIRED, defaults_file, is_local, read_defaults, resolve

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SMALL_MACHINE = {
    **DELTA_REQUIRED,
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.memory": "1g",
    # the serial GC (a small machine's cores go to the work), returning heap to the OS after a full GC when more than
    # 60% of it is free (the JVM's default, 70%, keeps a heap once grown toward -Xmx for good: a long run's resident
    # size then climbs to the cap though its live data stays a third of it; bench/RESULTS.md, the soak) and growing it
    # when less than 40% is (a heap 1.1-1.4x its live data, 10%/30%, took a full GC every few seconds at volume: 16
    # of ~0.26 s in a minute, against 6 with 40%/60%, and every pipeline of bench/spark_pipeline.py ran ~10% faster,
    # bench/RESULTS.md 2026-11-29 13:29); and soft
    # references (the JDK's and libraries' caches: reflection data, class path resources, thread-local buffers) kept
    # 0.1 s per MB of free heap since their last use, not the default 1 s: with ~850 MB free a cache entry used once
    # stayed ~14 minutes, so a long run's heap after a full GC kept every soft cache it ever filled (bench/soak.py)
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:MinHeapFreeRatio=40 -XX:MaxHeapFreeRatio=60 "
                                     "-XX:SoftRefLRUPolicyMSPerMB=100",
    # Spark's ContextCleaner frees a dropped broadcast, shuffle or cached block only once a GC has found it unreachable;
    # its periodic full GC (30 min by default) is what a long-running driver with a roomy heap relies on. Every minute
    # here: each micro-batch's broadcast hash relations (a memory page each) go within a minute, and the full GC is
    # what lets the heap shrink (above)
    "spark.cleaner.periodicGC.interval": "1min",
    # Tungsten's memory page, 8 MB by default in this 1 GB driver (execution memory / cores / 16): a broadcast hash
    # relation takes at least a whole page however few its rows, and a micro-batch's small joins built several, all
    # alive in the driver's heap while it runs (a soak's heap dump: 3 x 8 MB). 1 MB pages cost nothing measured at
    # 25,000 events a batch (bench/floor.py); a sort or a map of a bigger batch takes more pages, not bigger ones
    "spark.buffer.pageSize": "1m",
    # a task's result above 1 MB (Spark's default) goes through the block manager: stored, fetched by the driver,
    # removed. The driver's merge collects a big table's window as Arrow (15 MB for 250,000 changes): sent directly,
    # the collect's task took 0.45 s against 0.8-1.0 s (bench/volume_stages.py, RESULTS.md 2026-11-29 13:29). Spark
    # caps it at spark.rpc.message.maxSize (128 MB)
    "spark.task.maxDirectResultSize": "64m",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.databricks.delta.snapshotPartitions": "2",
    # Delta's VACUUM lists a table's folder in this many Spark tasks (Spark's default, 10,000: on a small machine's
    # local session thousands of near-empty tasks, minutes of a loaded VM's CPU for one small table's VACUUM, as a
    # user's job beside a consume showed in tests/spark/apply/test_maintenance.py; the consumer's own VACUUM of an
    # object store's table too). Spark's own parallel listing (past 32 paths) takes min(paths, this)
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    # timestamps as Parquet's INT64 microseconds, not the legacy INT96: a footer then holds their range, which the
    # driver's commits turn into Delta file statistics (`apply.filestats`); INT96 columns carry none
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # compiled whole-stage code, kept by its source text: Spark's default of 100 entries thrashes under a
    # consumer's per-batch plans (Delta's MERGE, windows, changelog), and recompiling took a visible share of
    # the pipeline's CPU (JFR); with 2,000 the pipeline ran faster (figures in bench/RESULTS.md)
    "spark.sql.codegen.cache.maxEntries": "2000",
    # PySpark's DataFrame debugging records the Python call site of every DataFrame and Column call: five more
    # calls into the JVM and an import attempt each, a visible share of a micro-batch's driver time (the
    # consumer builds its plans anew every batch; bench/RESULTS.md)
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # the status store keeps every finished job, stage and SQL execution up to 1,000 each by default, UI or not:
    # a consumer runs several a micro-batch, so a long run's heap after a full GC grew with them (bench/soak.py)
    "spark.ui.retainedJobs": "100",
    "spark.ui.retainedStages": "100",
    "spark.sql.ui.retainedExecutions": "50",
    "spark.sql.streaming.ui.retainedQueries": "10",
}


# the environment of a local JVM this process starts, where the user's says nothing: glibc gives each thread that
# mallocs an arena of its own (up to 8 per core), and Spark's pools run hundreds of short-lived threads, so the JVM's
# resident size outgrew what it had committed (Native Memory Tracking: +100 MB untracked by the fourth minute)
SMALL_MACHINE_ENV = {"MALLOC_ARENA_MAX": "2"}
JVM_OPTIONS = "CHANGEFEED_JVM_OPTIONS"  # flags added to a local JVM's defaults (`small_machine`)
# the JIT's first tier only: for a JVM whose life is mostly its start (the class-data archive's, a test's), where C2's
# compiles of Spark's generated code cost more than they pay back (bench/RESULTS.md, 2026-11-28 13:40)
C1_ONLY = "-XX:TieredStopAtLevel=1"


def small_machine() -> dict[str, str]:
    """The small-machine defaults, with the class-data archive of spark/classcache.py in the JVM's options when the
    set-up built one for this JVM and these jars (a launch then maps its classes instead of loading them), and
    CHANGEFEED_JVM_OPTIONS after ours: flags added to the defaults (a `spark.driver.extraJavaOptions` replaces
    them all)."""
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:  # type: ignore[attr-defined]
        return dict(SMALL_MACHINE)  # no JVM to launch
    from .classcache import java_options

    java = " ".join(o for o in (SMALL_MACHINE["spark.driver.extraJavaOptions"], java_options(),
                                os.environ.get(JVM_OPTIONS, "").strip()) if o)
    return {**SMALL_MACHINE, "spark.driver.extraJavaOptions": java}


def connector_jars(folder: Path = JARS) -> list[Path]:
    """The cached connector jars; an error that says how to fetch them when they are missing."""
    if not (folder / ".complete").exists():
        raise SparkSetupError(f"Spark's connector jars are not in {folder}: run ./scripts/setup "
                              "(or scripts/spark-jars/fetch)")
    return sorted(folder.glob("*.jar"))


def niofs_conf(folder: Path = NIOFS) -> dict[str, str]:
    """The settings that give Spark's JVM the local file system of scripts/niofs (java.nio where Hadoop would start
    a `chmod` or `readlink` process, without libhadoop: most of a small Delta commit's time, bench/RESULTS.md),
    when the set-up built it. Only for a JVM this process starts (a class path is fixed at launch); executors
    find the jar at the same path (the project's own cluster runs on this machine)."""
    if os.environ.get("CHANGEFEED_NIOFS") == "0" or os.environ.get("PYSPARK_GATEWAY_PORT"):
        return {}
    from pyspark import SparkContext

    jars = sorted(folder.glob("niofs-*.jar"))
    if not jars or SparkContext._active_spark_context is not None:  # type: ignore[attr-defined]
        return {}
    jar = str(jars[-1])
    return {"spark.hadoop.fs.file.impl": "changefeed.niofs.NioLocalFileSystem",
            "spark.hadoop.fs.AbstractFileSystem.file.impl": "changefeed.niofs.NioLocalFs",
            "spark.driver.extraClassPath": jar, "spark.executor.extraClassPath": jar}


def spark_session(master: str | None = None, app_name: str = "changefeed",
                  conf: dict[str, str] | None = None) -> SparkSession:
    """The active session if there is one, else a new one with Delta, Kafka, Avro and S3A on its classpath;
    `conf`: the user's settings, over everything of ours."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers (the decoders run in them) use this interpreter, which has changefeed installed
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    submitted = bool(os.environ.get("PYSPARK_GATEWAY_PORT"))
    user = dict(conf or {})
    defaults = read_defaults(defaults_file())
    chosen = master or user.get("spark.master") or os.environ.get("SPARK_MASTER") or defaults.get("spark.master")
    if master or not submitted:  # under spark-submit, its --master stands unless one is given here
        chosen = chosen or "local[2]"
        builder = builder.master(chosen)
    settings = resolve(small_machine(), user, defaults, master=chosen, submitted=submitted,
                       jars=[str(j) for j in connector_jars()], extra=niofs_conf())
    for k, v in settings.items():
        builder = builder.config(k, v)
    ours: list[str] = []  # set for the JVM's launch only: this process's other children keep the user's environment
    if not submitted and is_local(chosen) and SparkContext._active_spark_context is None:  # type: ignore[attr-defined]
        ours = [k for k in SMALL_MACHINE_ENV if k not in os.environ]
        os.environ.update({k: SMALL_MACHINE_ENV[k] for k in ours})  # read by the JVM at its launch (getOrCreate)
    try:
        session = builder.getOrCreate()
    finally:
        for k in ours:
            os.environ.pop(k, None)
    preflight(session)  # on a cluster: executors that cannot import changefeed fail here, in one line
    return session
