"""What the commands share around their work: files, progress, rejected lines and one-line errors."""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from .errors import ChangefeedError, ConfigError, DecodeError
from .linefiles import DeadLetter, open_in, open_out  # noqa: F401 - re-exported: the commands' files
from .redact import redact

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

err = Console(stderr=True, soft_wrap=True)  # an error stays one line, however long


@contextlib.contextmanager
def reported(debug: bool) -> Iterator[None]:
    """Errors become one readable line (and exit 1); --debug adds the traceback."""
    try:
        yield
    except (ChangefeedError, OSError) as e:
        if debug:
            err.print(redact(traceback.format_exc()), markup=False, highlight=False)
        err.print(f"[bold red]error:[/] {escape(redact(str(e)))}", highlight=False)
        raise typer.Exit(1) from None
    except Exception as e:
        if type(e).__module__.startswith(("confluent_kafka", "cimpl")):  # a client error: one line too
            if debug:
                err.print(redact(traceback.format_exc()), markup=False, highlight=False)
            err.print(f"[bold red]error:[/] kafka: {escape(redact(str(e)))}", highlight=False)
            raise typer.Exit(1) from None
        if not type(e).__module__.startswith(("pyspark", "py4j")):
            raise
        if debug:
            err.print(redact(traceback.format_exc()), markup=False, highlight=False)
        from .spark.logs import current_log

        log = current_log()
        where = f"--debug for the detail, or Spark's log {escape(str(log))}" if log else "--debug for the detail"
        err.print(f"[bold red]error:[/] the Spark query stopped: {escape(redact(spark_reason(e)))} ({where})",
                  highlight=False)
        raise typer.Exit(1) from None


def spark_reason(e: Exception) -> str:
    """The line of a Spark error that says what went wrong: the Python error raised in a micro-batch, else the
    first line of the JVM's message."""
    import re

    text = getattr(e, "desc", None) or str(e)
    named = re.findall(r"^\s*((?:[\w.]+\.)?\w*(?:Error|Exception): .+)$", text, flags=re.M)
    py = [x for x in named if not x.startswith(("org.", "java.", "scala.", "py4j."))]
    line = (py or named or [x for x in text.splitlines() if x.strip()] or [type(e).__name__])[-1 if py else 0]
    return line.strip()


def command_spark(master: str | None, folder: Path | None = None, debug: bool = False,
                  conf: list[str] | None = None, config: Path | None = None) -> SparkSession:
    """The session a command runs on (the active one, else a new one), with the user's settings (`--conf`, the
    TOML's `[spark]`) and Spark's log down to errors: a failure is reported in one line by `reported`. A session
    it starts writes the JVM's output and Spark's warehouse under `folder` (spark/logs.py), not on the terminal
    or in the current folder; `debug` keeps them as Spark has them."""
    from .spark import spark_session
    from .spark.logs import keep_derby_log, metastore_defaults, quiet_launch
    from .spark.settings import user_settings

    user = user_settings(conf, config)
    with quiet_launch(folder, debug) as launch:
        spark = spark_session(master, conf={**launch, **metastore_defaults(user, folder), **user})
    keep_derby_log(spark, folder)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def no_password(uri: str) -> str:
    """The URI as it may be printed: its secrets (user-info password, sasl-password=, ...) masked."""
    return redact(uri)


def require_source(uri: str, waits: bool = False) -> None:
    """A `file://` source that is not there is an error naming it (else a consumer reads nothing and says it
    consumed 0 changes): its folder must exist, and each topic named (not a pattern) must have been created,
    unless the consumer `waits` for it (a processing-time trigger: a producer may create it later). Kafka
    topics are Spark's source's to find."""
    from urllib.parse import urlparse

    if not uri.startswith("file:"):
        return
    path = Path(urlparse(uri).path)
    folder = path.parent
    if not folder.is_dir():
        raise ConfigError(f"no such folder {folder} (given as --from {uri})")
    if waits:
        return
    for topic in path.name.split(","):
        if not any(c in topic for c in "*?[") and not (folder / topic / "meta.json").is_file():
            raise ConfigError(f"no topic {topic!r} in {folder} (no {folder / topic / 'meta.json'}; given as "
                              f"--from {uri})")


@contextlib.contextmanager
def byte_progress(path: Path | None, what: str) -> Iterator[Callable[[int], None]]:
    """A byte-progress bar on a terminal for file inputs; a no-op otherwise."""
    if path is None or str(path) == "-" or not err.is_terminal:
        yield lambda n: None
        return
    total = path.stat().st_size
    with Progress(TextColumn(what), BarColumn(), TransferSpeedColumn(), TimeRemainingColumn(), console=err,
                  transient=True) as prog:
        task = prog.add_task(what, total=total)
        yield lambda n: prog.advance(task, n)


def bad_line(e: DecodeError, lineno: int, line: bytes, errors: str, dead: DeadLetter) -> None:
    """A line that does not parse: recorded as a dead letter, then raised (`fail`) or reported (`skip`)."""
    located = e.located(f"line {lineno}")
    dead.put(lineno, line, e)
    if errors == "fail":
        raise located
    err.print(f"[yellow]skipped:[/] {located}", highlight=False)
