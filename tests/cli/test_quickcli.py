"""encode/decode read without typer (quickcli.py): what it accepts, typer reads the same way; the rest is typer's."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer._click import Context  # typer 0.29 carries its own click
from typer.main import get_command

from changefeed.cli import app
from changefeed.quickcli import parse

ACCEPTED = [
    ["encode"],
    ["decode", "-i", "m.jsonl", "-o", "e.jsonl"],
    ["encode", "--protocol", "simple", "--option", "enable-tidb-extension=true", "--option=max-message-bytes=9",
     "--input=events.jsonl", "-o", "-", "--build-ts", "5", "--topic", "t_{table}", "--debug"],
    ["decode", "-p", "debezium", "--errors", "skip", "--dead-letter", "dead/x.jsonl", "-i", "-"],
    ["encode", "-o", "a", "-o", "b", "--errors=fail"],
]
REFUSED = [
    [], ["run"], ["encode", "--help"], ["encode", "--nope", "x"], ["decode", "--build-ts", "5"],
    ["encode", "-i"], ["encode", "-i", "--debug"], ["encode", "--build-ts", "1_000"], ["encode", "--build-ts", "x"],
    ["encode", "-ievents.jsonl"], ["encode", "--debug=true"], ["encode", "--input="], ["encode", "positional"],
    ["encode", "--", "-i", "x"], ["encode", "-i", " spaced"],
]


def typer_params(argv: list[str]) -> dict:
    group = get_command(app)
    cmd = group.get_command(Context(group), argv[0])  # type: ignore[attr-defined]
    with cmd.make_context(f"changefeed {argv[0]}", list(argv[1:])) as ctx:
        return dict(ctx.params)


@pytest.mark.parametrize("argv", ACCEPTED, ids=" ".join)
def test_what_it_reads_typer_reads_alike(argv: list[str]) -> None:
    got = parse(argv)
    assert got is not None and got[0] == argv[0]
    want = typer_params(argv)
    defaults = {k: v for k, v in typer_params([argv[0]]).items() if k not in got[1]}
    assert {**defaults, **got[1]} == want


@pytest.mark.parametrize("argv", REFUSED, ids=lambda a: " ".join(a) or "nothing")
def test_anything_else_is_left_to_typer(argv: list[str]) -> None:
    assert parse(argv) is None


def test_the_cli_runs_it(tmp_path: Path) -> None:
    """Through the entry point: an encode read here writes what typer's would (the golden example's line count),
    and an error is the usual single line."""
    import subprocess

    from tests.conftest import ROOT

    exe = ROOT / ".venv" / "bin" / "changefeed"
    example = ROOT / "src" / "changefeed" / "examples" / "events.jsonl"
    r = subprocess.run([str(exe), "encode", "-i", str(example), "-o", str(tmp_path / "m.jsonl"), "--build-ts", "7"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stderr.strip() == "encoded 10 events into 8 canal-json messages", r.stderr
    assert len((tmp_path / "m.jsonl").read_bytes().splitlines()) == 8
    bad = subprocess.run([str(exe), "decode", "-i", str(tmp_path / "none.jsonl")], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 1 and bad.stderr.strip().startswith("error: ") and len(bad.stderr.splitlines()) == 1
