"""A newcomer's first session, scripted: the commands a new user types in a folder of their own, in order, and
what they see and find afterwards. Nothing surprising: an output file named twice is replaced, a source that is
not there is an error naming it, the terminal shows changefeed's lines only (Spark's banner and the JVM's
warnings go to a log under the lake), and the folder holds only what the user asked for."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.conftest import ROOT

EXAMPLE = ROOT / "src" / "changefeed" / "examples" / "events.jsonl"
CHANGEFEED = ROOT / ".venv" / "bin" / "changefeed"
# what the JVM and Spark print on their own: none of it may reach the user's terminal
JVM_NOISE = re.compile(r"log4j|NativeCodeLoader|incubator modules|WARN |ERROR |\tat |Exception|setLogLevel|"
                       r"SparkR|Traceback")


def typed(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """One command as the user types it, in their folder."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_GATEWAY_PORT", "SPARK_MASTER")}
    return subprocess.run([str(CHANGEFEED), *args], cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def one_error_line(r: subprocess.CompletedProcess[str], *names: str) -> None:
    assert r.returncode != 0, r.stderr
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    for name in names:
        assert name in lines[0], lines[0]


def test_a_newcomers_first_session(tmp_path: Path) -> None:
    home = tmp_path / "newcomer"
    home.mkdir()
    (home / "events.jsonl").write_bytes(EXAMPLE.read_bytes())

    # encode -o, twice: the second run replaces the file the first wrote, as sort -o or curl -o would
    first = typed(home, "encode", "--option", "enable-tidb-extension=true", "-i", "events.jsonl", "-o", "msgs.jsonl")
    assert first.returncode == 0, first.stderr
    written = (home / "msgs.jsonl").read_bytes()
    again = typed(home, "encode", "--option", "enable-tidb-extension=true", "-i", "events.jsonl", "-o", "msgs.jsonl")
    assert again.returncode == 0, again.stderr
    assert again.stderr.strip() == "encoded 10 events into 10 canal-json messages"
    assert len((home / "msgs.jsonl").read_bytes().splitlines()) == len(written.splitlines()) == 10

    # sources that are not there: one line naming them, a non-zero exit, before Spark starts
    one_error_line(typed(home, "consume", "--from", "file:///no/such/topic?protocol=canal-json", "--lake", "lake/"),
                   "/no/such")
    one_error_line(typed(home, "consume", "--from", f"file://{home}/topics/orders?protocol=canal-json", "--lake",
                         "lake/"), "orders")
    one_error_line(typed(home, "decode", "-i", "missing.jsonl"), "missing.jsonl")
    one_error_line(typed(home, "tail", "--from", f"file://{home}/topics/orders?protocol=canal-json"), "orders")

    # through the file transport into Delta: changefeed's lines only on the terminal, Spark's in its log
    uri = f"file://{home}/topics/orders?protocol=canal-json&enable-tidb-extension=true"
    assert typed(home, "produce", "--sink-uri", uri + "&partition-num=2", "-i", "events.jsonl").returncode == 0
    r = typed(home, "consume", "--from", uri, "--lake", "lake/")
    assert r.returncode == 0, r.stderr
    shown = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert shown and not [ln for ln in shown if JVM_NOISE.search(ln)], shown
    assert shown[-1].startswith("consumed 5 changes into "), shown
    log = home / "lake" / "_changefeed" / "spark" / "spark.log"
    assert "log4j" in log.read_text()  # the banner went there
    assert (home / "lake" / "shop").is_dir()  # the relative lake path is where the tables are

    # the folder afterwards: what the user made and named, nothing of Spark's
    assert sorted(p.name for p in home.iterdir()) == ["events.jsonl", "lake", "msgs.jsonl", "topics"]


def test_a_fresh_clone_set_up_and_run(tmp_path: Path) -> None:
    """From `git clone` to a first `run`: the set-up script in a fresh clone (its downloads taken from this
    checkout's caches: nothing fetched again), then the commands a newcomer types in a folder of their own,
    and what is left there and in the clone afterwards."""
    clone = tmp_path / "changefeed"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    for cache in (".tools", ".cache"):  # uv and the jars, S3Proxy, niofs: set up once per machine
        (clone / cache).symlink_to(ROOT / cache)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYSPARK_GATEWAY_PORT", "SPARK_MASTER")}
    # no class-data archive for the clone: its own .venv's jars (new times) would need one of their own, a minute
    # more here, and the set-up that builds it is CI's own (.ci/run starts with ./scripts/setup on a clean clone)
    env["CHANGEFEED_CDS"] = "0"
    setup = subprocess.run([str(clone / "scripts" / "setup")], cwd=clone, capture_output=True, text=True,
                           timeout=600, env=env)
    assert setup.returncode == 0, setup.stderr[-3000:]
    exe = clone / ".venv" / "bin" / "changefeed"
    assert exe.is_file()

    home = tmp_path / "newcomer"
    home.mkdir()
    (home / "events.jsonl").write_bytes((clone / "src" / "changefeed" / "examples" / "events.jsonl").read_bytes())

    def cmd(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(exe), *args], cwd=home, capture_output=True, text=True, timeout=900, env=env)

    # the README's first command, on a small workload: verified, its closing report and chart, and Spark's noise
    # kept off the terminal
    r = subprocess.run([str(exe), "run", "--transactions", "40"], cwd=home, capture_output=True, text=True,
                       timeout=900, env=dict(env, COLUMNS="160"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "verify" in r.stdout and "passed" in r.stdout, r.stdout[-3000:]
    assert "app.users" in r.stdout and "lag" in r.stdout, r.stdout[-3000:]
    noise = [ln for ln in (r.stdout + r.stderr).splitlines() if JVM_NOISE.search(ln)]
    assert not noise, noise
    # redirected output: a line per micro-batch (changes, tables, lag, seconds) in place of the bars
    batches = re.findall(r"batch \d+: [\d,]+ changes in, \d+ tables, \d+ dead letters, \d+ DDL, applied up to .*"
                         r"\(\d+\.\d s\)", r.stderr)
    assert batches and any(", lag " in x for x in batches), r.stderr[-3000:]
    work = home / "changefeed-run"
    assert (work / "run-report.png").exists()
    assert (work / "lake" / "app" / "users" / "_delta_log").is_dir()

    # encode -o twice: the file named is replaced (not refused, not appended to)
    for _ in range(2):
        e = cmd("encode", "-i", "events.jsonl", "-o", "msgs.jsonl")
        assert e.returncode == 0 and e.stderr.strip() == "encoded 10 events into 8 canal-json messages", e.stderr
    assert len((home / "msgs.jsonl").read_bytes().splitlines()) == 8

    # a source that is not there: one line naming it
    one_error_line(cmd("consume", "--from", "file:///no/such/topic?protocol=canal-json", "--lake", "lake/"),
                   "/no/such")

    # the folder afterwards: the input, the file asked for, the run's work folder; no spark-warehouse/,
    # metastore_db/, derby.log or logs of Spark's; and the clone as cloned (nothing written into it)
    assert sorted(p.name for p in home.iterdir()) == ["changefeed-run", "events.jsonl", "msgs.jsonl"]
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True)
    assert sorted(status.stdout.split()) == sorted(["??", "??", ".cache", ".tools"]), status.stdout
