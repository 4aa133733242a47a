from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from changefeed.config import build_config
from changefeed.eventline import EventReader

ROOT = Path(__file__).resolve().parent.parent


def load_events(path: Path) -> list:
    reader = EventReader()
    return [reader.parse(line) for line in path.read_bytes().splitlines() if line.strip()]


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


@pytest.fixture(scope="session")
def schema_registry_url():
    """A real schema registry (Apicurio, Confluent API) on 127.0.0.1; the test fails if it cannot start."""
    import subprocess
    import time
    import urllib.request

    port = _free_port()
    log = open(ROOT / ".cache" / "registry-test.log", "wb") if (ROOT / ".cache").exists() else subprocess.DEVNULL
    proc = subprocess.Popen([str(ROOT / "scripts" / "registry"), "run", str(port)], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}/apis/ccompat/v7"
    deadline = time.time() + 180
    while True:
        try:
            with urllib.request.urlopen(url + "/subjects", timeout=2):
                break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"the schema registry exited with {proc.returncode} (see .cache/registry-test.log)")
            if time.time() > deadline:
                proc.kill()
                pytest.fail("the schema registry did not answer within 180 s (see .cache/registry-test.log)")
            time.sleep(0.3)
    yield url
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


def start_kafka(port: int, ctrl: int, data: Path):
    """Run scripts/kafka on the given ports and data folder until it listens; fail the test if it cannot."""
    import socket
    import subprocess
    import time

    log = open(data / "broker.log", "ab")
    proc = subprocess.Popen([str(ROOT / "scripts" / "kafka"), "run", str(port), str(ctrl), str(data)], stdout=log,
                            stderr=log)
    deadline = time.time() + 240
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            if proc.poll() is not None:
                tail = (data / "broker.log").read_text()[-2000:]
                pytest.fail(f"the Kafka broker exited with {proc.returncode}: {tail}")
            if time.time() > deadline:
                proc.kill()
                pytest.fail("the Kafka broker did not listen within 240 s")
            time.sleep(0.3)


def stop_kafka(proc) -> None:
    import subprocess

    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


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

    session = spark_session("local[2]", "changefeed-tests")
    yield session
    session.stop()
