"""The commands in README.md and docs/*.md, run or parsed here, so the docs cannot drift from the program.

What a fenced block's info string means:
- ```sh: each command (backslash continuations joined, `#` comments dropped) runs for real with bash, in
  order, in a scratch folder where the project's `.venv`, `src`, `bench`, `scripts` and `tests` are linked in (so a
  command written for the project's root works, and what it writes lands in the scratch folder); it must
  exit 0. Except commands whose running costs a JVM, a service or the whole suite, and is covered elsewhere;
  those are parsed only (see below):
    `changefeed run|consume|verify|capture` (tests/test_job.py, tests/spark/, tests/mysql/),
    `./scripts/*` (the set-up and CI themselves, tests/spark/test_cluster.py for spark-cluster),
    `bench/*.py` other than the one-core codec benchmarks (bench/run_all runs them).
- ```sh parse-only: every command is parsed, none runs (it needs a broker, a registry or a cluster):
  `changefeed ARGS` must parse with the CLI's own parser (every option and argument exists, values convert),
  a `./scripts/X` or `bench/X.py` it names must exist. `spark-submit` lines are parsed for their changefeed part.
- ```console: `$ COMMAND` lines run (PATH starts with the project's `.venv/bin`); the lines after one, up to
  the next `$`, are its expected stdout, compared exactly.
- ```bash: shell for a reader to adapt (placeholders, a broker, a bucket): the block must pass `bash -n`, and every
  changefeed command in it is parsed as in a parse-only block (array expansions such as "${S3[@]}" left out).
- ```python: compiled (not run: the README's example starts Spark against a broker); ```json: parsed.
- ```text, ```toml and a bare fence: illustrative, not checked.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import orjson
import pytest
from typer._click import ClickException, Context  # typer 0.29 carries its own click
from typer.main import get_command

from changefeed.cli import app

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.M | re.S)
PARSED_COMMANDS = {"run", "consume", "verify", "capture"}
CHEAP_BENCH = {"bench/canal_json.py", "bench/simple.py", "bench/debezium.py", "bench/cli_codec.py"}
CHECKED = {"sh", "bash", "console", "python", "json"}
# a command line of a ```bash block that runs changefeed (directly, or after `a && `)
CHANGEFEED_LINE = re.compile(r"^(?:\S*/)?changefeed\s|&&\s*(?:\S*/)?changefeed\s")
ARRAY_WORD = re.compile(r"\$\{\w+\[[@*]\]\}")


def blocks() -> list[tuple[str, int, str, str]]:
    """(document, index, info string, body) of every fenced block that is checked."""
    found = []
    for doc in DOCS:
        for i, m in enumerate(FENCE.finditer(doc.read_text())):
            info = m.group(1).strip()
            if info.split(" ")[0] in CHECKED:
                found.append((doc.relative_to(ROOT).as_posix(), i, info, m.group(2)))
    return found


def commands(body: str) -> list[str]:
    """The block's commands: continuations joined, comment lines and trailing comments dropped."""
    out: list[str] = []
    pending = ""
    for line in body.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append(_uncomment(pending + line).strip())
        pending = ""
    return out


def _uncomment(cmd: str) -> str:
    """`cmd  # a remark` without the remark (a `#` inside quotes, or inside a word, stays)."""
    quote = ""
    for i, ch in enumerate(cmd):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or cmd[i - 1].isspace()):
            return cmd[:i]
    return cmd


def simple_commands(cmd: str) -> list[list[str]]:
    """A shell line split into its simple commands (at `|`, `&&`, `||`, `;`, `&`), each as its words."""
    lex = shlex.shlex(cmd, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    words = list(lex)
    parts: list[list[str]] = [[]]
    for w in words:
        if w in {"|", "&&", "||", ";", "&"}:
            parts.append([])
        else:
            parts[-1].append(w)
    return [p for p in parts if p]


def parse_changefeed(args: list[str]) -> None:
    """Parse `changefeed ARGS` as the CLI would, without running it."""
    group = get_command(app)
    assert args, "changefeed without a command"
    if args[0] == "--help":
        return
    sub = group.get_command(Context(group), args[0])  # type: ignore[attr-defined]
    assert sub is not None, f"no such command: changefeed {args[0]}"
    if "--help" in args:
        return
    with sub.make_context(f"changefeed {args[0]}", list(args[1:])):
        pass


def check_parsed(cmd: str) -> None:
    """Every simple command of a line parsed: changefeed's arguments, the scripts and benchmarks named."""
    for words in simple_commands(cmd):
        words = [w for w in words if not re.fullmatch(r"\w+=.*", w)] if "=" in words[0] else words
        head = words[0]
        if head.endswith("changefeed"):
            parse_changefeed(words[1:])
        elif head.startswith(("./scripts/", "scripts/", "./bench/", "bench/")):
            assert (ROOT / head).is_file(), f"{head} does not exist"
        elif head.endswith("python") and len(words) > 1 and words[1].endswith(".py"):
            assert (ROOT / words[1]).is_file(), f"{words[1]} does not exist"
        elif head == "spark-submit":
            i = next(i for i, w in enumerate(words) if w.endswith("changefeed"))
            parse_changefeed([w for w in words[i + 1:] if w != "..."])


def check_bash(body: str, where: str) -> None:
    """A ```bash block: its syntax (bash -n), then its changefeed commands parsed (see the module's docstring)."""
    done = subprocess.run(["bash", "-n"], input=body, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{where}: bash -n: {done.stderr}"
    for cmd in commands(body):
        if CHANGEFEED_LINE.search(cmd):
            check_parsed(" ".join(w for w in cmd.split(" ") if not ARRAY_WORD.fullmatch(w.strip('"'))))


def runs_for_real(cmd: str) -> bool:
    """Whether a command of a plain ```sh block runs (else it is parsed: see the module's docstring)."""
    for words in simple_commands(cmd):
        head = words[0]
        if head.endswith("changefeed") and len(words) > 1 and words[1] in PARSED_COMMANDS:
            return False
        if head.startswith(("./scripts/", "scripts/", "./bench/", "bench/")):
            return False
        if head.endswith("python") and len(words) > 1 and words[1].startswith("bench/") and \
                words[1] not in CHEAP_BENCH:
            return False
    return True


def scratch(tmp: Path) -> dict[str, str]:
    """A folder that looks like the project's root to a command, and the environment to run it in."""
    for name in (".venv", "src", "bench", "scripts", "tests"):
        (tmp / name).symlink_to(ROOT / name)
    env = dict(os.environ, PATH=f"{ROOT / '.venv' / 'bin'}:{os.environ.get('PATH', '')}", PWD=str(tmp))
    return env


def run(cmd: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(("doc", "index", "info", "body"),
                         [pytest.param(*b, id=f"{b[0]}-{b[1]}") for b in blocks()])
def test_block(doc: str, index: int, info: str, body: str, tmp_path: Path) -> None:
    kind = info.split(" ")[0]
    where = f"{doc}, block {index}"
    if kind == "python":
        compile(body, where, "exec")
    elif kind == "json":
        orjson.loads(body)
    elif kind == "bash":
        check_bash(body, where)
    elif kind == "console":
        env = scratch(tmp_path)
        for cmd, expected in console_steps(body):
            done = run(cmd, tmp_path, env)
            assert done.returncode == 0, f"{where}: {cmd!r} failed: {done.stderr}"
            assert done.stdout.rstrip("\n") == expected.rstrip("\n"), f"{where}: {cmd!r} printed otherwise"
    elif "parse-only" in info.split(" ")[1:]:
        for cmd in commands(body):
            check_parsed(cmd)
    else:
        env = scratch(tmp_path)
        for cmd in commands(body):
            if not runs_for_real(cmd):
                check_parsed(cmd)
                continue
            done = run(cmd, tmp_path, env)
            assert done.returncode == 0, f"{where}: {cmd!r} failed ({done.returncode}): {done.stderr}"


def console_steps(body: str) -> list[tuple[str, str]]:
    """A console transcript's (command, expected stdout) pairs."""
    steps: list[tuple[str, str]] = []
    cmd: str | None = None
    out: list[str] = []
    continuing = False
    for line in body.splitlines():
        if line.startswith("$ ") or continuing:
            if line.startswith("$ "):
                if cmd is not None:
                    steps.append((cmd, "\n".join(out)))
                cmd, out = "", []
                line = line[2:]
            continuing = line.rstrip().endswith("\\")
            cmd = (cmd or "") + (line.rstrip()[:-1] + " " if continuing else line)
        else:
            out.append(line)
    if cmd is not None:
        steps.append((cmd, "\n".join(out)))
    return steps


def test_readme_fits_a_screenful_and_starts_with_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    first = next(m for m in FENCE.finditer(text) if m.group(1).strip() == "sh").group(2).splitlines()
    assert first[0].startswith("./scripts/setup && .venv/bin/changefeed run ")
    assert first[1].startswith("./scripts/test ")


def test_the_checker_fails_on_drift() -> None:
    """The parser behind parse-only blocks refuses an option the CLI does not have."""
    with pytest.raises(ClickException):
        parse_changefeed(["consume", "--from", "file:///x/t?protocol=canal-json", "--lake", "l", "--no-such"])
    with pytest.raises(ClickException):
        check_bash('U="file:///x/t?protocol=canal-json"\nchangefeed consume --from "$U" --lake l --no-such\n', "b")
    with pytest.raises(AssertionError, match="bash -n"):
        check_bash("if true; then\n  changefeed encode -i a -o b\n", "b")
    check_bash('S3=(--conf a=b\n    --conf c=d)\n.venv/bin/changefeed run --lake s3a://l/d "${S3[@]}"\n', "b")
    assert not runs_for_real(".venv/bin/changefeed consume --from x --lake y")
    assert runs_for_real(".venv/bin/changefeed encode -i a -o b")
