"""The files a line command reads and writes: its input, its output and its dead letters.

Apart from cliio.py (which re-exports them) so that `encode` and `decode` can run without rich and typer
loaded (quickcli.py): a codec command's whole run is a fraction of a second on small files."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import orjson

from .errors import ConfigError, DecodeError
from .redact import redact
from .workdir import replacing


@contextlib.contextmanager
def open_in(path: Path | None) -> Iterator[IO[bytes]]:
    """The input file, or stdin for none or `-`; a missing one is an error naming it."""
    if path is None or str(path) == "-":
        yield sys.stdin.buffer
        return
    if not path.exists():
        raise ConfigError(f"{path}: no such file (given as -i)")
    if path.is_dir():
        raise ConfigError(f"{path} is a folder (given as -i): give a file")
    with open(path, "rb") as f:
        yield f


@contextlib.contextmanager
def open_out(path: Path | None) -> Iterator[IO[bytes]]:
    """The output file (replaced when the command succeeds, never a folder), or stdout for none or `-`."""
    if path is None or str(path) == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
    else:
        with replacing(path) as f:
            yield f


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
        rec = {"line": lineno, "error": redact(e.reason), "field": e.field, "offset": e.offset,
               "input": line.decode("utf-8", "replace")}
        self._f.write(orjson.dumps(rec) + b"\n")

    def close(self) -> None:
        """Close the file, if a line was ever written."""
        if self._f is not None:
            self._f.close()
