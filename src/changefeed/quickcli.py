"""`changefeed encode` and `decode` without typer's argument parsing, which costs ~0.14 s of CPU a run (typer 0.29
builds a pydantic adapter per option): the two codec commands are the ones run over and over in scripts.

A well-formed invocation (the commands' own options, `--name value` or `--name=value`) is read here into the
arguments of the very function typer would call (cli.main calls it); anything else (`--help`, an unknown option, a
value typer would refuse or might read otherwise) gives None, and typer reads the command line as always, errors
included."""

from __future__ import annotations

import re
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
