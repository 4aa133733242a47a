"""What the commands share around their work: files, progress, rejected lines and one-line errors."""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

import orjson
import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from .codecs import ConsumerDecoder
from .errors import ChangefeedError, DecodeError
from .eventline import Message, message_to_line
from .workdir import output_file

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
            err.print(traceback.format_exc(), markup=False, highlight=False)
        err.print(f"[bold red]error:[/] {e}", highlight=False)
        raise typer.Exit(1) from None
    except Exception as e:
        if not type(e).__module__.startswith(("pyspark", "py4j")):
            raise
        if debug:
            err.print(traceback.format_exc(), markup=False, highlight=False)
        err.print(f"[bold red]error:[/] the Spark query stopped: {spark_reason(e)} (--debug for the detail)",
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


def command_spark(master: str | None, conf: list[str] | None = None, config: Path | None = None) -> SparkSession:
    """The session a command runs on (the active one, else a new one), with the user's settings (`--conf`, the
    TOML's `[spark]`), with Spark's log down to errors: a failure is reported in one line by `reported`."""
    from .spark import spark_session
    from .spark.settings import user_settings

    spark = spark_session(master, conf=user_settings(conf, config))
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def no_password(uri: str) -> str:
    """The URI as it may be printed: a password in it is left out."""
    import re

    return re.sub(r"^(\w+://[^:/@]*):[^@/]*@", r"\1@", uri)


@contextlib.contextmanager
def open_in(path: Path | None) -> Iterator[IO[bytes]]:
    """The input file, or stdin for none or `-`."""
    if path is None or str(path) == "-":
        yield sys.stdin.buffer
    else:
        with open(path, "rb") as f:
            yield f


@contextlib.contextmanager
def open_out(path: Path | None) -> Iterator[IO[bytes]]:
    """The output file (never one changefeed did not write), or stdout for none or `-`."""
    if path is None or str(path) == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
    else:
        with open(output_file(path), "wb", buffering=1 << 20) as f:
            yield f


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


class DeadLetter:
    """Rejected input lines with why they were rejected, one JSON object per line."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.count = 0
        self._f: IO[bytes] | None = None

    def put(self, lineno: int, line: bytes, e: DecodeError) -> None:
        """Count a rejected line, and append it with its reason when there is a file to append to."""
        self.count += 1
        if self.path is None:
            return
        if self._f is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._f = open(self.path, "ab")
        rec = {"line": lineno, "error": e.reason, "field": e.field, "offset": e.offset,
               "input": line.decode("utf-8", "replace")}
        self._f.write(orjson.dumps(rec) + b"\n")

    def close(self) -> None:
        """Close the file, if a line was ever written."""
        if self._f is not None:
            self._f.close()


def bad_line(e: DecodeError, lineno: int, line: bytes, errors: str, dead: DeadLetter) -> None:
    """A line that does not parse: recorded as a dead letter, then raised (`fail`) or reported (`skip`)."""
    located = e.located(f"line {lineno}")
    dead.put(lineno, line, e)
    if errors == "fail":
        raise located
    err.print(f"[yellow]skipped:[/] {located}", highlight=False)


def finish_decoder(decoder: ConsumerDecoder, errors: str, dead: DeadLetter) -> None:
    """Messages a decoder still holds at the end (simple-protocol DML that never got its schema)."""
    try:
        decoder.finish()
    except DecodeError as e:
        if errors == "fail":
            raise
        for raw in decoder.take_pending():
            dead.put(0, message_to_line(Message(key=None, value=raw)), e)
        err.print(f"[yellow]skipped:[/] {e}", highlight=False)
