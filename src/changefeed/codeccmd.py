"""The bodies of `changefeed encode` and `decode`: files in, files out, a summary line back.

Shared by cli.py (typer, with a progress bar on a terminal) and quickcli.py (a plain command line, read and run
without typer and rich: most of a short run would be their loading)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

from .codecs import make_decoder, make_encoder
from .config import ConfigError, build_config, parse_option_pairs
from .eventline import read_lines
from .linecodec import decode_lines, encode_lines
from .linefiles import DeadLetter, open_in, open_out

Progress = Callable[[Path | None, str], AbstractContextManager[Callable[[int], None]]]


@contextlib.contextmanager
def no_progress(path: Path | None, what: str) -> Iterator[Callable[[int], None]]:
    """No progress bar (not a terminal)."""
    yield lambda n: None


def encode_file(protocol: str, option: list[str] | None, input: Path | None, output: Path | None, errors: str,
                dead_letter: Path | None, build_ts: int | None, topic: str | None,
                progress: Progress = no_progress) -> str:
    """Event lines to message lines; the summary line."""
    if errors not in ("fail", "skip"):
        raise ConfigError(f"--errors must be fail or skip, got {errors!r}")
    cfg = build_config(protocol, parse_option_pairs(option or []))
    encoder = make_encoder(cfg, clock_ms=(lambda: build_ts) if build_ts is not None else None, topic=topic)
    dead = DeadLetter(dead_letter)
    try:
        with open_in(input) as fin, open_out(output) as fout, progress(input, "encoding") as advance:
            n_events, n_msgs = encode_lines(encoder, read_lines(fin), fout, advance, errors, dead)
    finally:
        dead.close()
    skipped = f", {dead.count} rejected" if dead.count else ""
    return f"encoded {n_events} events into {n_msgs} {protocol} messages{skipped}"


def decode_file(protocol: str, option: list[str] | None, input: Path | None, output: Path | None, errors: str,
                dead_letter: Path | None, progress: Progress = no_progress) -> str:
    """Message lines to event lines; the summary line."""
    from .linecodec import finish_decoder

    if errors not in ("fail", "skip"):
        raise ConfigError(f"--errors must be fail or skip, got {errors!r}")
    cfg = build_config(protocol, parse_option_pairs(option or []))
    decoder = make_decoder(cfg)
    dead = DeadLetter(dead_letter)
    try:
        with open_in(input) as fin, open_out(output) as fout, progress(input, "decoding") as advance:
            n_msgs, kinds = decode_lines(decoder, read_lines(fin), fout, advance, errors, dead)
            finish_decoder(decoder, errors, dead)
    finally:
        dead.close()
    detail = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
    skipped = f"; {dead.count} rejected" if dead.count else ""
    return f"decoded {n_msgs} {protocol} messages into {sum(kinds.values())} events ({detail}){skipped}"
