from __future__ import annotations

import os
import tempfile
from pathlib import Path

import orjson
import pytest

from changefeed.config import build_config
from changefeed.eventline import EventReader
from changefeed.spark.session import C1_ONLY

ROOT = Path(__file__).resolve().parent.parent

# no warm-up before a stream (spark/warmup.py) in the commands the tests start: each would pay tens of seconds on
# two cores; the tests that check the warm-up ask for it (--warm-up). Subprocesses inherit it.
os.environ.setdefault("CHANGEFEED_WARM_UP", "0")
# the JIT's first tier only in the JVMs the tests launch (CHANGEFEED_JVM_OPTIONS, spark/session.py): a test's JVM
# lives seconds to minutes, and C2's compiles of Spark's generated code took a third of its CPU on two cores; with
# C1 alone a DDL-heavy consume took 124-130 CPU-s against 180-187 (bench/RESULTS.md). Code runs the same, slower at
# its peak. Subprocesses inherit it; the tests' shared in-process session (`spark`) does not.
os.environ.setdefault("CHANGEFEED_JVM_OPTIONS", C1_ONLY)
SHARED_JIT = "-XX:TieredStopAtLevel=4"  # the JVM's default (both tiers), said: the `spark` fixture's JVM


def shared_jvm_options() -> str:
    """CHANGEFEED_JVM_OPTIONS of the tests' shared session (`spark`): SHARED_JIT in place of the launched JVMs' C1
    default; what the caller's environment set otherwise."""
    given = os.environ.get("CHANGEFEED_JVM_OPTIONS", "")
    return SHARED_JIT if given == C1_ONLY else given


def load_events(path: Path) -> list:
    reader = EventReader()
    return [reader.parse(line) for line in path.read_bytes().splitlines() if line.strip()]


def produce_events(events: list, sink_uri: str, folder: Path) -> Path:
    """The events as event lines in `folder`, produced by the CLI to `sink_uri` with DDL to every partition (as
    TiCDC's MQ sink sends it); the lines' path."""
    import subprocess
    import sys

    from changefeed.eventline import EventWriter

    lines = folder / "events.jsonl"
    w = EventWriter()
    lines.write_bytes(b"".join(w.line(e) + b"\n" for e in events))
    subprocess.run([sys.executable, "-m", "changefeed.cli", "produce", "--sink-uri", sink_uri, "--input", str(lines),
                    "--ddl-to-all-partitions"], check=True, cwd=ROOT, capture_output=True)
    return lines


def load_json(path: Path):
    return orjson.loads(path.read_bytes())


@pytest.fixture
def cfg():
    def make(protocol: str = "canal-json", **opts):
        return build_config(protocol, {k.replace("_", "-"): v for k, v in opts.items()})

    return make


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_until(what: str, argv: list[str], log: Path, ready, timeout: float, env: dict[str, str] | None = None):
    """Start a real server (`argv`, its output appended to `log`) and return its process once `ready()` holds;
    the test fails with the server's exit code and the log's end if it exits or is not ready in time."""
    import subprocess
    import time

    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=out, env=env)
    deadline = time.time() + timeout
    while True:
        try:
            if ready():
                return proc
        except OSError:
            pass
        if proc.poll() is not None:
            pytest.fail(f"{what} exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
        if time.time() > deadline:
            proc.kill()
            pytest.fail(f"{what} did not answer within {timeout:.0f} s (see {log})")
        time.sleep(0.3)


def listening(port: int):
    """A readiness check: the port takes a connection."""
    import socket

    def check() -> bool:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True

    return check


def end(proc, seconds: float = 10) -> None:
    """Stop a server started by `serve_until`: SIGTERM, then SIGKILL if it lingers."""
    import subprocess

    proc.terminate()
    try:
        proc.wait(seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def schema_registry_url():
    """A real schema registry (Apicurio, Confluent API) on 127.0.0.1; the test fails if it cannot start."""
    import urllib.request

    port = _free_port()
    url = f"http://127.0.0.1:{port}/apis/ccompat/v7"
    folder = ROOT / ".cache" if (ROOT / ".cache").exists() else Path(tempfile.mkdtemp())

    def answers() -> bool:
        with urllib.request.urlopen(url + "/subjects", timeout=2):
            return True

    proc = serve_until("the schema registry", [str(ROOT / "scripts" / "registry"), "run", str(port)],
                       folder / "registry-test.log", answers, 180)
    yield url
    end(proc)


def start_kafka(port: int, ctrl: int, data: Path):
    """Run scripts/kafka on the given ports and data folder until it listens; fail the test if it cannot."""
    return serve_until("the Kafka broker", [str(ROOT / "scripts" / "kafka"), "run", str(port), str(ctrl), str(data)],
                       data / "broker.log", listening(port), 240)


def stop_kafka(proc) -> None:
    end(proc, 30)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """A real Kafka broker (KRaft, one node) on 127.0.0.1; the test fails if it cannot start."""
    port = _free_port()
    proc = start_kafka(port, _free_port(), tmp_path_factory.mktemp("kafka"))
    yield f"127.0.0.1:{port}"
    stop_kafka(proc)


@pytest.fixture(scope="session")
def spark():
    """One real local SparkSession (Delta, Kafka, Avro) for the whole test session."""
    from changefeed.spark import spark_session

    # this JVM lives the whole run: C2's compiles pay back here (the in-process tests' wall -7 to -17%, for +4 to
    # +19% CPU-s, bench/RESULTS.md 2026-11-29), so it keeps the default JIT; the JVMs the tests launch keep C1 only
    with pytest.MonkeyPatch.context() as mp:  # read at the JVM's launch only
        mp.setenv("CHANGEFEED_JVM_OPTIONS", shared_jvm_options())
        session = spark_session("local[2]", "changefeed-tests")
    yield session
    session.stop()


class S3Store:
    """A running S3 API server (scripts/s3: S3Proxy) with one bucket, and how each client reaches it."""

    ACCESS, SECRET, BUCKET = "changefeed", "changefeed-secret", "lake"

    def __init__(self, port: int) -> None:
        self.endpoint = f"http://127.0.0.1:{port}"

    def conf(self, **over: str) -> dict[str, str]:
        """Spark's settings for the store (what docs/object-storage.md tells a user to pass)."""
        c = {"spark.hadoop.fs.s3a.endpoint": self.endpoint, "spark.hadoop.fs.s3a.path.style.access": "true",
             "spark.hadoop.fs.s3a.access.key": self.ACCESS, "spark.hadoop.fs.s3a.secret.key": self.SECRET,
             "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
             "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
             "spark.hadoop.fs.s3a.multiobjectdelete.enable": "false",
             # S3Proxy's nio2 backends answer a folder marker without an ETag, which S3A's rename checks
             "spark.hadoop.fs.s3a.change.detection.version.required": "false"}
        c.update(over)
        return c

    def conf_args(self, **over: str) -> list[str]:
        """The same settings as `--conf K=V` arguments of the CLI."""
        return [a for k, v in self.conf(**over).items() for a in ("--conf", f"{k}={v}")]

    @property
    def env(self) -> dict[str, str]:
        """The environment of a process whose JVM talks to the store: the AWS SDK's request checksums only when
        the operation needs them (S3Proxy, like other S3-compatible stores, refuses some it does not implement)."""
        import os

        return dict(os.environ, AWS_REQUEST_CHECKSUM_CALCULATION="WHEN_REQUIRED",
                    AWS_RESPONSE_CHECKSUM_VALIDATION="WHEN_REQUIRED")

    @property
    def storage_options(self) -> dict[str, str]:
        """delta-rs's options for the store."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": self.ACCESS,
                "AWS_SECRET_ACCESS_KEY": self.SECRET, "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true",
                "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}

    def url(self, path: str) -> str:
        return f"s3a://{self.BUCKET}/{path}"


@pytest.fixture(scope="session")
def s3_store(tmp_path_factory):
    """A real S3 API server (S3Proxy) on 127.0.0.1 with a bucket `lake`; the test fails if it cannot start."""
    import time

    port = _free_port()
    data = tmp_path_factory.mktemp("s3")
    proc = serve_until("S3Proxy", [str(ROOT / "scripts" / "s3"), "run", str(port), str(data)], data / "server.log",
                       listening(port), 120)
    store = S3Store(port)
    from pyarrow import fs

    s3 = fs.S3FileSystem(access_key=store.ACCESS, secret_key=store.SECRET, endpoint_override=f"127.0.0.1:{port}",
                         scheme="http", region="us-east-1", allow_bucket_creation=True)
    for _ in range(50):  # the port opens a moment before the S3 API answers
        try:
            s3.create_dir(store.BUCKET)
            break
        except OSError:
            time.sleep(0.3)
    else:
        proc.kill()
        pytest.fail(f"S3Proxy did not make bucket {store.BUCKET}: {(data / 'server.log').read_text()[-2000:]}")
    yield store
    end(proc)
