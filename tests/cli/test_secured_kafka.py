"""A secured Kafka (scripts/kafka run-secure: SASL_SSL with SCRAM-SHA-512, mutual TLS, a CA made at test time):
the main job over it, a `consume` that outlives a broker restart, and refusals in one line, promptly, with no
secret anywhere in what is printed or written."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from changefeed.cli import app
from tests.conftest import ROOT, _free_port, end, listening, serve_until

SECRET = "Pl4nted-" + uuid.uuid4().hex[:12]  # the SCRAM password: must never be printed or stored
REG_SECRET = "RegPl4nted-" + uuid.uuid4().hex[:8]


class SecureBroker:
    """One broker with PLAINTEXT, SASL_SSL and mutual-TLS SSL listeners, restartable on the same ports."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.plain, self.ctrl, self.sasl, self.ssl = (_free_port() for _ in range(4))
        self.tls = data / "tls"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        env = {**os.environ, "KAFKA_SCRAM_USER": "changefeed", "KAFKA_SCRAM_PASSWORD": SECRET}
        self.proc = serve_until("the secured Kafka broker", [str(ROOT / "scripts" / "kafka"), "run-secure",
                                str(self.plain), str(self.ctrl), str(self.data), str(self.sasl), str(self.ssl)],
                                self.data.parent / "broker.log", listening(self.sasl), 240, env)

    def stop(self) -> None:
        assert self.proc is not None
        end(self.proc, 60)

    def uri(self, topic: str, password: str = SECRET, ca: str = "ca.pem", protocol: str = "canal-json") -> str:
        return (f"kafka://127.0.0.1:{self.sasl}/{topic}?protocol={protocol}&enable-tidb-extension=true"
                f"&partition-num=3&enable-tls=true&ca={self.tls / ca}&sasl-mechanism=SCRAM-SHA-512"
                f"&sasl-user=changefeed&sasl-password={password}")


@pytest.fixture(scope="module")
def secure_kafka(tmp_path_factory):
    b = SecureBroker(tmp_path_factory.mktemp("secure-kafka") / "data")
    b.data.mkdir()
    b.start()
    yield b
    b.stop()


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "changefeed.cli", *args], capture_output=True, timeout=timeout,
                          text=True)


def no_secret_in(*texts: str, files: Path | None = None) -> None:
    for t in texts:
        assert SECRET not in t and REG_SECRET not in t, t[-3000:]
    if files is not None:
        for f in files.rglob("*"):
            if f.is_file():
                data = f.read_bytes()
                assert SECRET.encode() not in data and REG_SECRET.encode() not in data, f


def one_line_error(r: subprocess.CompletedProcess, *words: str) -> str:
    """The run failed with exactly one `error:` line (no traceback, no librdkafka log) that names `words`."""
    assert r.returncode != 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith("error:")]
    debug = "--debug" in r.args  # --debug adds the traceback (redacted like the rest)
    assert len(errors) == 1 and ("Traceback" not in r.stderr or debug) and "%3|" not in r.stderr, r.stderr
    for w in words:
        assert w in errors[0], errors[0]
    no_secret_in(r.stdout, r.stderr)
    return errors[0]


def test_refusals_are_one_line_prompt_and_keep_secrets(secure_kafka: SecureBroker, tmp_path: Path) -> None:
    b = secure_kafka
    where = f"127.0.0.1:{b.sasl}"
    example = str(ROOT / "src" / "changefeed" / "examples" / "events.jsonl")
    topic = f"t{uuid.uuid4().hex[:8]}"
    assert cli("produce", "--sink-uri", b.uri(topic), "-i", example).returncode == 0
    lake = str(tmp_path / "lake")
    cases = [  # (command, words the line names, the longest it may take)
        (["produce", "--sink-uri", b.uri(topic, password="wrong-" + SECRET), "-i", example],
         [where, "Authentication failed"], 20),
        (["consume", "--from", b.uri(topic, password="wrong-" + SECRET), "--lake", lake, "--debug"],
         [where, "Authentication failed"], 20),
        (["tail", "--from", b.uri(topic, ca="other-ca.pem")], [where, "certificate verify failed"], 20),
        (["consume", "--from", b.uri(topic, ca="other-ca.pem"), "--lake", lake], [where, "certificate"], 20),
        (["consume", "--from", b.uri("no_such_topic"), "--lake", lake], [where, "no topic no_such_topic"], 20),
        # mutual TLS without a client certificate
        (["produce", "--sink-uri", f"kafka://127.0.0.1:{b.ssl}/{topic}?protocol=canal-json&ca={b.tls / 'ca.pem'}",
          "-i", example], [f"127.0.0.1:{b.ssl}"], 20),
        # nobody listens: within --connect-timeout
        (["produce", "--sink-uri", f"kafka://127.0.0.1:{_free_port()}/t?protocol=canal-json&sasl-user=u"
          f"&sasl-password={SECRET}", "-i", example, "--connect-timeout", "3"], ["not reachable within 3 s"], 20),
        (["consume", "--from", f"kafka://u:{SECRET}@127.0.0.1:{_free_port()}/t?protocol=canal-json"
          f"&sasl-password={SECRET}", "--lake", lake, "--connect-timeout", "3", "--debug"],
         ["not reachable within 3 s", "Connection refused"], 20),
        # Spark as the producer: an unreachable or refusing sink is said before Spark starts
        (["transcode", "--from", b.uri(topic), "--sink-uri", f"kafka://127.0.0.1:{_free_port()}/t?protocol=debezium"
          f"&sasl-user=u&sasl-password={SECRET}", "--connect-timeout", "3", "--checkpoint", str(tmp_path / "cp")],
         ["not reachable within 3 s"], 25),
        (["replay", "--lake", str(tmp_path), "--sink-uri", b.uri(topic, password="wrong-" + SECRET)],
         [where, "Authentication failed"], 20),
        (["transcode", "--from", b.uri(topic), "--sink-uri", f"file://{tmp_path}/out/t?protocol=avro"
          f"&schema-registry=http://reg:{REG_SECRET}@127.0.0.1:{_free_port()}", "--checkpoint", str(tmp_path / "cp"),
          "--connect-timeout", "3"], ["schema registry at http://127.0.0.1:"], 25),
        # an error that quotes the whole URI (no topic in it): printed with its secrets masked
        (["produce", "--sink-uri", f"kafka://u:{SECRET}@127.0.0.1:{b.sasl}/?protocol=canal-json"
          f"&sasl-password={SECRET}", "-i", example], ["one topic name", "sasl-password=***"], 20),
        # a schema registry that is down, its credentials in its URL
        (["consume", "--from", b.uri(topic, protocol="avro") + "&schema-registry=http://reg:" + REG_SECRET
          + f"@127.0.0.1:{_free_port()}/apis", "--lake", lake, "--connect-timeout", "3"],
         ["schema registry at http://127.0.0.1:"], 30),
    ]
    for args, words, seconds in cases:
        t0 = time.monotonic()
        r = cli(*args, timeout=120)
        took = time.monotonic() - t0
        one_line_error(r, *words)
        assert took < seconds, (args[0], took, r.stderr)
    assert not (tmp_path / "lake").exists() or not any((tmp_path / "lake").rglob("*.parquet"))
    assert not (tmp_path / "cp").exists() and not (tmp_path / "out").exists()


def test_consume_over_sasl_ssl_outlives_a_broker_restart(secure_kafka: SecureBroker, spark, tmp_path: Path) -> None:
    """The workload's first half produced and consumed over SASL_SSL by a consumer that keeps running (a
    processing-time trigger); the broker is stopped after its first micro-batch and started again once the
    consumer has said so; the second half is produced after the restart. The consumer says it once, and when
    the brokers are back, takes the second half, stops cleanly on SIGTERM, and the lake verifies against the
    stream's events (read back over SASL_SSL). Nothing printed or written holds the password."""
    import signal

    import orjson

    from changefeed.spark.verify import expected_from, verify

    b = secure_kafka
    events, expected, lake = tmp_path / "events.jsonl", tmp_path / "expected.jsonl", tmp_path / "lake"
    # 200 transactions (600 until 2026-11-28): a first micro-batch (300 records at most) before the broker stops,
    # the rest of the first half and the second half after its restart; more only made more micro-batches
    r = cli("workload", "-o", str(events), "--transactions", "200", "--expected", str(expected))
    assert r.returncode == 0, r.stderr
    lines = events.read_bytes().splitlines(keepends=True)
    ts = [orjson.loads(line)["commitTs"] for line in lines]
    cut = next(i for i in range(len(lines) // 2, len(lines)) if ts[i] != ts[i - 1])  # at a transaction boundary
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_bytes(b"".join(lines[:cut]))
    second.write_bytes(b"".join(lines[cut:]))
    topic = f"t{uuid.uuid4().hex[:8]}"
    uri = b.uri(topic)
    r = cli("produce", "--sink-uri", uri, "-i", str(first))
    assert r.returncode == 0, r.stderr
    outputs = [r.stdout, r.stderr]

    consume = subprocess.Popen([sys.executable, "-m", "changefeed.cli", "consume", "--from", uri, "--lake", str(lake),
                                "--max-records-per-trigger", "300", "--trigger", "processing-time=1 second"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err: list[str] = []
    first_batch = threading.Event()

    def read() -> None:
        assert consume.stderr is not None
        for line in consume.stderr:
            err.append(line)
            if line.startswith("batch 0:"):
                first_batch.set()

    def said(words: str, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not any(words in line for line in err):
            assert consume.poll() is None, "the consumer ended:\n" + "".join(err)
            assert time.monotonic() < deadline, f"the consumer never said {words!r}:\n" + "".join(err)
            time.sleep(0.5)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert first_batch.wait(400), "".join(err)
        b.stop()
        said("not reachable", 180)  # the broker stays down until the consumer has said so
        b.start()
        said("reachable again", 180)
        r = cli("produce", "--sink-uri", uri, "-i", str(second))  # after the restart, over SASL_SSL again
        assert r.returncode == 0, r.stderr
        outputs += [r.stdout, r.stderr]
        last = max(ts)
        deadline = time.monotonic() + 400
        while True:  # the lake has applied the stream's last watermark (the status reads the progress records;
            # run in this process: it reads files only, and a Python process per poll cost a CPU-second each)
            st = CliRunner().invoke(app, ["status", "--lake", str(lake), "--json"])
            if st.exit_code == 0 and orjson.loads(st.stdout_bytes)["applied_ts"] >= last:
                break
            assert consume.poll() is None, "the consumer ended:\n" + "".join(err)
            assert time.monotonic() < deadline, st.output + "".join(err)
            time.sleep(0.5)
        consume.send_signal(signal.SIGTERM)
        # not communicate(): it reads stderr too, racing the reader thread for the last lines (the summary was
        # missing here once, with exit 0, for that reason); stdout stays near empty, read once it is closed
        consume.wait(timeout=300)
        assert consume.stdout is not None
        out = consume.stdout.read()
    finally:
        if consume.poll() is None:
            consume.kill()
    reader.join(10)
    text = "".join(err)
    assert consume.returncode == 0, text
    assert "stopped on SIGTERM" in text and "consumed " in text, text
    assert text.count("not reachable") == 1 and "reachable again" in text, text  # said once, and when back
    outputs += [out, text]

    print(text)  # what the consumer said around the restart (pytest -s shows it)
    t = cli("tail", "--from", uri)  # the stream read back over SASL_SSL by librdkafka
    assert t.returncode == 0 and t.stdout.count("\n") >= len(lines), t.stderr  # each event, DDL and watermark
    # the upstream state the workload made, verified in this process (a CLI verify would start a JVM for it)
    rep = verify(spark, str(lake), expected_from(str(events)))
    assert rep.ok, [(x.name, x.expected, x.actual, x.missing, x.extra, x.problem) for x in rep.tables if not x.ok]
    outputs += [t.stderr]
    no_secret_in(*outputs, files=tmp_path)


def test_the_main_job_over_sasl_ssl_with_registry_credentials(secure_kafka: SecureBroker, spark,
                                                              schema_registry_url: str, tmp_path: Path,
                                                              capfd: pytest.CaptureFixture[str]) -> None:
    """`run` with avro (a topic per table, read through a pattern) over SASL_SSL, the registry's URL carrying
    credentials: the lake verifies, and neither password is in what was printed or written."""
    from changefeed.job import RunOptions, run

    registry = schema_registry_url.replace("http://", f"http://cdc:{REG_SECRET}@")
    options = {"enable-tidb-extension": "true", "avro-enable-watermark": "true", "schema-registry": registry}
    uri = secure_kafka.uri(f"run{uuid.uuid4().hex[:6]}", protocol="avro").replace(
        "enable-tidb-extension=true", "&".join(f"{k}={v}" for k, v in options.items()))
    rep = run(spark, RunOptions(protocol="avro", options=options, sink_uri=uri, work=tmp_path / "w",
                                transactions=60, seed=14, max_records_per_trigger=150))
    assert rep.verification is not None and rep.verification.ok, rep.verification
    out = capfd.readouterr()
    no_secret_in(out.out, out.err, files=tmp_path)
