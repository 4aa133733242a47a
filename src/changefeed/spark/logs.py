"""Spark's own output kept out of a user's terminal and folder, for the sessions the CLI starts.

A JVM that PySpark launches inherits the process's stdout and stderr, so its banner ("Using Spark's default log4j
profile"), the JVM's warnings ("Using incubator modules", NativeCodeLoader) and a failed query's Java stack trace
land on the terminal before changefeed's one-line error. The launch happens here with file descriptors 1 and 2
pointing at a log file, so the JVM (and the Python workers it forks) write there for their whole life; this
process's own descriptors are restored once the session is up. Spark's default warehouse is `./spark-warehouse`,
made in whatever folder a command starts from although changefeed keeps its tables by path: it goes beside
the log. `--debug` leaves both as Spark has them, on the terminal.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .layout import META, lake_path

LOG_NAME = "spark.log"
_log: Path | None = None  # where the running session's JVM writes, if this process launched it


def spark_folder(lake: str | None) -> Path:
    """Where Spark's log and warehouse go: `<lake>/_changefeed/spark` for a local lake, else a new temporary
    folder (a lake on object storage is no place for a process's log)."""
    if lake is not None and "://" not in lake:
        return Path(lake_path(lake.removeprefix("file:"))) / META / "spark"
    return Path(tempfile.mkdtemp(prefix="changefeed-spark-"))


def current_log() -> Path | None:
    """The log file of the session this process launched, to name in an error line."""
    return _log


@contextlib.contextmanager
def quiet_launch(folder: Path | None, debug: bool = False) -> Iterator[dict[str, str]]:
    """Inside the block, a new session's JVM writes its output to `<folder>/spark.log`; the settings it yields
    (the warehouse under `folder`) are for the session's builder. No folder, or `debug`: Spark as it is."""
    global _log
    if folder is None or debug or os.environ.get("PYSPARK_GATEWAY_PORT"):  # spark-submit: the JVM is running
        yield {}
        return
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:  # type: ignore[attr-defined]
        yield {}  # a session already runs (tests, a notebook): its JVM's output is where it is
        return
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / LOG_NAME
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = os.dup(1), os.dup(2)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield {"spark.sql.warehouse.dir": str(folder / "warehouse")}
        _log = log
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for d in (fd, *saved):
            os.close(d)


METASTORE_URL = "spark.hadoop.javax.jdo.option.ConnectionURL"


def metastore_defaults(user: dict[str, str], folder: Path | None) -> dict[str, str]:
    """Where a session this process starts keeps Spark's warehouse and, with Hive support but no metastore named
    (no metastore URI, no JDBC URL, no hive-site.xml), the embedded Derby metastore: under `folder`, never the
    current folder (Hive's default `metastore_db/`, Spark's `spark-warehouse/`). The user's settings win."""
    if folder is None:
        return {}
    out = {"spark.sql.warehouse.dir": str(folder / "warehouse")}
    conf_dir = os.environ.get("SPARK_CONF_DIR") or os.path.join(os.environ.get("SPARK_HOME", ""), "conf")
    if user.get("spark.sql.catalogImplementation") == "hive" and METASTORE_URL not in user \
            and "spark.hadoop.hive.metastore.uris" not in user \
            and not os.path.exists(os.path.join(conf_dir, "hive-site.xml")):
        out[METASTORE_URL] = f"jdbc:derby:;databaseName={folder / 'metastore_db'};create=true"
    return out


def keep_derby_log(spark: object, folder: Path | None) -> None:
    """Derby's log (`derby.log`, in the current folder by default) beside Spark's log, unless the user set it: the
    embedded metastore starts at the first catalog call, after this."""
    if folder is None:
        return
    system = spark._jvm.java.lang.System  # type: ignore[attr-defined]
    if system.getProperty("derby.stream.error.file") is None and system.getProperty("derby.system.home") is None:
        folder.mkdir(parents=True, exist_ok=True)
        system.setProperty("derby.stream.error.file", str(folder / "derby.log"))
