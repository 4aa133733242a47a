"""`changefeed encode` and `decode` without typer's argument parsing, which costs ~0.14 s of CPU a run (typer 0.29
builds a pydantic adapter per option): the two codec commands are the ones run over and over in scripts.

A well-formed invocation (the commands' own options, `--name value` or `--name=value`) is read here into the
arguments of the very function typer would call (cli.main calls it); anything else (`--help`, an unknown option, a
value typer would refuse or might read otherwise) gives None, and typer reads the command line as always, errors
included."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

_COMMON = {"--protocol": "protocol", "-p": "protocol", "--option": "option", "--input": "input", "-i": "input",
           "--output": "output", "-o": "output", "--errors": "errors", "--dead-letter": "dead_letter"}
_OPTIONS = {"encode": {**_COMMON, "--build-ts": "build_ts", "--topic": "topic"}, "decode": _COMMON}
_PATHS = {"input", "output", "dead_letter"}
_INT = re.compile(r"-?[0-9]{1,19}")


def parse(argv: list[str]) -> tuple[str, dict[str, Any]] | None:
    """(command, keyword arguments of its function) for a plain invocation of encode or decode, else None."""
    if not argv or argv[0] not in _OPTIONS:
        return None
    names = _OPTIONS[argv[0]]
    kw: dict[str, Any] = {}
    options: list[str] = []
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "--debug":
            kw["debug"] = True
            i += 1
            continue
        if arg.startswith("--") and "=" in arg:
            arg, value = arg.split("=", 1)
            i += 1
        elif i + 1 < len(argv):
            value = argv[i + 1]
            i += 2
            if value.startswith("-") and value != "-":  # an option where a value should be: typer's to say
                return None
        else:
            return None
        key = names.get(arg)
        if key is None or not value or value.strip() != value:
            return None
        if key == "option":
            options.append(value)
        elif key in _PATHS:
            kw[key] = Path(value)
        elif key == "build_ts":
            if not _INT.fullmatch(value):
                return None
            kw[key] = int(value)
        else:
            kw[key] = value
    if options:
        kw["option"] = options
    return argv[0], kw


def main(full: Callable[[], None]) -> None:
    """Run the command line: what it prints goes through redact.py, so a secret in a URI, an option or another
    tool's message never reaches the terminal or a log file; a plain encode/decode runs here, anything else
    through `full` (typer's app)."""
    import sys

    from .redact import RedactingStream

    if not isinstance(sys.stdout, RedactingStream):
        sys.stdout = RedactingStream(sys.stdout)  # type: ignore[assignment]
        sys.stderr = RedactingStream(sys.stderr)  # type: ignore[assignment]
    quick = parse(sys.argv[1:])
    if quick is not None:
        code = run(*quick)
        if code is not None:
            raise SystemExit(code)
    full()


def run(command: str, kw: dict[str, Any]) -> int | None:
    """Run a parsed encode or decode as cli.py's command would (the same files, the same summary line, an error
    as the same single line, through cliio.reported, loaded only then); its exit code. None: a progress bar is
    wanted (stderr is a terminal), so the typer command runs it."""
    import os
    import sys

    if sys.stderr.isatty() or os.environ.get("FORCE_TERMINAL") or os.environ.get("FORCE_COLOR"):
        return None
    debug = kw.pop("debug", False)
    try:
        from .codeccmd import decode_file, encode_file

        args = {"protocol": "canal-json", "option": None, "input": None, "output": None, "errors": "fail",
                "dead_letter": None, **kw}
        if command == "encode":
            summary = encode_file(**{"build_ts": None, "topic": None, **args})
        else:
            summary = decode_file(**args)
    except Exception:
        import typer

        from .cliio import reported

        try:
            with reported(debug):
                raise
        except typer.Exit as e:
            return e.exit_code
    sys.stderr.write(summary + "\n")
    sys.stderr.flush()
    return 0
