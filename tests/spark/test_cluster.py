"""The pipeline on Spark's own standalone cluster (a master and two one-core workers started with
spark-class by scripts/spark-cluster), over Kafka into an S3 lake, a worker SIGKILLed mid-stream (where users run
it: with workers on other machines a local folder is not a lake they share; the file transport on a cluster was
a test of its own, folded away to keep CI in its budget).

Each run is a `changefeed run --master spark://...` subprocess: the cluster application needs a driver of
its own, apart from the tests' shared local session. `run` verifies the lake against the upstream state the
workload kept, and exits 1 when a table differs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "spark-cluster"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """A running master with two workers of one core each; the test fails if they cannot start."""
    env = dict(os.environ, SPARK_CLUSTER_DIR=str(tmp_path_factory.mktemp("spark-cluster")),
               SPARK_DAEMON_JAVA_OPTS=JVM)  # the master's and workers' own JVMs
    r = subprocess.run([str(SCRIPT), "start", "2", "1"], capture_output=True, text=True, env=env, timeout=180)
    assert r.returncode == 0, f"the standalone cluster did not start: {r.stderr[-2000:]}"
    url = r.stdout.strip().splitlines()[-1]
    assert url.startswith("spark://127.0.0.1:"), r.stdout
    try:
        yield url, env
    finally:
        subprocess.run([str(SCRIPT), "stop"], env=env, timeout=120)


# the JVMs of the cluster and of its applications as tests/conftest.py has the local ones: the JIT's first tier
# (CHANGEFEED_JVM_OPTIONS), a serial GC (one core each); on a cluster master changefeed passes none of its own
JVM = " ".join(("-XX:+UseSerialGC", os.environ.get("CHANGEFEED_JVM_OPTIONS", ""))).strip()
# on a cluster master changefeed sets none of its small-machine defaults: this cluster is the small machine, and
# says so the way a user does, with --conf
SMALL = ["--conf", f"spark.driver.extraJavaOptions={JVM}", "--conf", f"spark.executor.extraJavaOptions={JVM}",
         "--conf", "spark.sql.shuffle.partitions=2", "--conf", "spark.default.parallelism=2",
         "--conf", "spark.databricks.delta.snapshotPartitions=2", "--conf", "spark.driver.memory=1g",
         "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.host=127.0.0.1"]


def _run_cmd(master: str, work: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "changefeed.cli", "run", "--master", master, "--work", str(work),
            "--transactions", "60", "--seed", "21", *SMALL, *extra]


def _check_passed(r: subprocess.CompletedProcess[str] | tuple[int, str, str]) -> str:
    code, out, errout = (r.returncode, r.stdout, r.stderr) if not isinstance(r, tuple) else r
    assert code == 0, f"run failed ({code}):\n{out[-3000:]}\n{errout[-3000:]}"
    assert "Traceback" not in errout, errout[-3000:]
    for table in ("app.users", "app.orders", "app.audit"):
        assert table in out, out
    assert "passed" in out and "FAILED" not in out, out
    return out


def _landed(s3_store, key: str) -> bool:  # noqa: ANN001 - tests.conftest.S3Store
    """A commit of an `app` table is in the S3 lake (read over the S3 API, as another node would)."""
    from pyarrow import fs

    s3 = fs.S3FileSystem(access_key=s3_store.ACCESS, secret_key=s3_store.SECRET, region="us-east-1",
                         endpoint_override=s3_store.endpoint.split("://", 1)[1], scheme="http")
    infos = s3.get_file_info(fs.FileSelector(f"{s3_store.BUCKET}/{key}/app", recursive=True, allow_not_found=True))
    return any("/_delta_log/" in i.path and i.base_name.endswith(".json") for i in infos)


def test_run_on_the_cluster_over_kafka_into_an_s3_lake_survives_a_killed_worker(
        cluster: tuple[str, dict[str, str]], kafka_broker: str, s3_store, tmp_path: Path) -> None:  # noqa: ANN001
    """Three partitions, DDL mid-stream, micro-batches of 100 records, the lake on S3 (S3Proxy: every executor
    writes its data files there, the driver its commits); once the first table lands, worker 1 is SIGKILLed.
    Spark reschedules its tasks on worker 2 and the lake still equals upstream (exactly once: a task that ran
    twice must not write twice)."""
    master, env = cluster
    work = tmp_path / "w"
    key = f"cluster-{time.time_ns()}"
    uri = f"kafka://{kafka_broker}/cluster-{os.getpid()}?protocol=canal-json&partition-num=3" \
          "&enable-tidb-extension=true"
    sdk = {k: s3_store.env[k] for k in ("AWS_REQUEST_CHECKSUM_CALCULATION", "AWS_RESPONSE_CHECKSUM_VALIDATION")}
    proc = subprocess.Popen(_run_cmd(master, work, "--sink-uri", uri, "--max-records-per-trigger", "100",
                                     "--rate", "60", "--lake", s3_store.url(key), *s3_store.conf_args(),
                                     *[a for k, v in sdk.items() for a in ("--conf", f"spark.executorEnv.{k}={v}")]),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=dict(env, COLUMNS="200", **sdk))
    try:
        deadline = time.time() + 600  # (a busy machine: executors' JVMs and Python workers start slowly)
        while not _landed(s3_store, key):
            assert proc.poll() is None, f"run ended before any table landed: {proc.communicate()}"
            if time.time() > deadline:
                proc.kill()
                pytest.fail(f"no table landed on S3 within 600 s: {[t[-3000:] for t in proc.communicate()]}")
            time.sleep(0.5)
        assert proc.poll() is None, "the stream ended before the worker could be killed mid-stream"
        k = subprocess.run([str(SCRIPT), "kill-worker", "1"], capture_output=True, text=True, env=env, timeout=30)
        assert k.returncode == 0, k.stderr
        out, errout = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = _check_passed((proc.returncode, out, errout))
    status = subprocess.run([str(SCRIPT), "status"], capture_output=True, text=True, env=env, timeout=30).stdout
    assert "worker-1 dead" in status and "worker-2 pid" in status, status
    assert not (work / "lake").exists(), "the run wrote a lake in its work folder beside the S3 one"


def test_executors_without_changefeed_fail_in_one_line(cluster: tuple[str, dict[str, str]], tmp_path: Path) -> None:
    """Executors whose Python lacks the package: one line that names what is missing, no JVM stack trace."""
    master, env = cluster
    bare = _python_without_changefeed()
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "meta.json").write_bytes(b'{"partitions": 1}')  # a topic (a missing one is refused first)
    r = subprocess.run([sys.executable, "-m", "changefeed.cli", "consume", "--from",
                        f"file://{tmp_path}/t?protocol=canal-json", "--lake", str(tmp_path / "lake"),
                        "--master", master, *SMALL], capture_output=True, text=True, cwd=ROOT,
                       env=dict(env, PYSPARK_PYTHON=bare), timeout=300)
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, r.stderr[-3000:]
    assert "executors cannot" in lines[0] and "changefeed" in lines[0] and "spark.archives" in lines[0], lines
    assert "Traceback" not in r.stderr


def _python_without_changefeed() -> str:
    """The machine's own Python 3.11 (the one the venv was made from), which has no changefeed installed."""
    base = Path(sys.base_prefix) / "bin" / "python3"
    check = subprocess.run([str(base), "-c", "import changefeed"], capture_output=True)
    assert check.returncode != 0, f"{base} has changefeed installed: cannot play an executor without it"
    return str(base)
