"""What executors on a cluster must have, checked before the pipeline runs.

In local mode the executors are the driver's own JVM and Python, so nothing can be missing. On a cluster
(Spark standalone, YARN, Kubernetes) each executor starts its own Python workers: the decoders run there, so
`changefeed` must import on every executor, and every path the pipeline writes (lake, checkpoint) must be
one all nodes reach. Without a check, either shows up minutes later as a task failure buried in a JVM
stack trace; `preflight` runs one small task per executor core first and says in one line what is missing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from ..errors import ClusterSetupError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SHIP_HINT = ("install it in the Python the executors run (spark.pyspark.python), or ship a packed environment "
             "with spark.archives (README: 'On a Spark cluster')")
PATH_HINT = "use a path every node reaches (a shared mount, hdfs://, s3a://)"


def is_local(spark: SparkSession) -> bool:
    return spark.sparkContext.master.startswith("local")


def local_paths(paths: Iterable[str]) -> list[str]:
    """For each path a node reaches through its own file system (file: URIs and plain paths), the nearest
    folder the driver has: the lake may not exist yet, but its parent must be shared for it to be."""
    import os

    out = []
    for p in paths:
        if p.startswith("file:"):
            p = "/" + p[len("file:"):].lstrip("/")
        elif "://" in p:
            continue
        p = os.path.abspath(p)
        while not os.path.isdir(p) and os.path.dirname(p) != p:
            p = os.path.dirname(p)
        if os.path.dirname(p) != p:  # not the root: every node has one
            out.append(p)
    return out


def probe(paths: list[str]) -> dict[str, object]:
    """What one executor sees: its host, its Python, whether changefeed imports, which paths it cannot reach.
    The paths are folders the driver has (`local_paths`)."""
    import os
    import socket
    import sys

    found: dict[str, object] = {"host": socket.gethostname(), "python": sys.executable, "missing": []}
    try:
        import changefeed  # noqa: F401
        from changefeed.spark.decode import decode  # noqa: F401  (what the decode tasks import)
        found["import"] = None
    except Exception as e:  # noqa: BLE001 - reported, not raised: the driver names it in one line
        found["import"] = f"{type(e).__name__}: {e}"
    for p in paths:
        if not os.path.isdir(p):
            found["missing"].append(p)  # type: ignore[union-attr]
    return found


def preflight(spark: SparkSession, paths: Iterable[str] = ()) -> None:
    """On a cluster, one task per executor core checks changefeed imports and `paths` (folders the driver
    has created) are visible; raises ClusterSetupError in one line naming what is missing. No-op locally."""
    if is_local(spark):
        return
    sc = spark.sparkContext
    want = local_paths(paths)
    slots = max(sc.defaultParallelism, 1)

    def task(_: Iterator[int]) -> Iterator[dict[str, object]]:
        yield probe(want)

    level = _log_level(spark)
    sc.setLogLevel("ERROR")  # a failed probe is reported below in one line, not as Spark's per-task warnings
    try:
        seen = sc.parallelize(range(slots), slots).mapPartitions(task).collect()
    except Exception as e:  # noqa: BLE001 - the Python worker itself may not start (no pyspark there)
        # the level stays ERROR: Spark's scheduler logs the failed job (with the task's traceback) from its
        # own thread, possibly after collect() has raised here
        raise ClusterSetupError(f"executors cannot run changefeed's Python tasks ({_first_line(e)}): "
                                f"{SHIP_HINT}") from None
    sc.setLogLevel(level)
    for s in seen:
        if s["import"]:
            raise ClusterSetupError(f"executors cannot import changefeed (python {s['python']} on {s['host']}: "
                                    f"{s['import']}): {SHIP_HINT}")
        if s["missing"]:
            raise ClusterSetupError(f"{', '.join(s['missing'])} is not visible on executor host {s['host']} "  # type: ignore[arg-type]
                                    f"(only the driver sees it): {PATH_HINT}")


def _log_level(spark: SparkSession) -> str:
    try:
        return str(spark.sparkContext._jvm.org.apache.logging.log4j.LogManager  # type: ignore[union-attr]
                   .getRootLogger().getLevel().toString())
    except Exception:  # noqa: BLE001 - a JVM without log4j2: Spark's default
        return "WARN"


def _first_line(e: BaseException) -> str:
    """The Python error inside a Py4J/JVM failure, or the first line of the message."""
    text = str(e)
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(("ModuleNotFoundError", "ImportError", "RuntimeError", "FileNotFoundError")) or \
                "Cannot run program" in line:
            return line
    return text.strip().splitlines()[0][:300] if text.strip() else type(e).__name__
