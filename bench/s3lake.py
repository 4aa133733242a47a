"""An S3 lake for the benchmarks: S3Proxy (scripts/s3) on a free port of 127.0.0.1, one bucket, and the Spark
settings that reach it (the ones docs/object-storage.md gives a user), so that a benchmark can run the same work
on a local lake and on this one back to back in one process."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ACCESS, SECRET, BUCKET = "changefeed", "changefeed-secret", "lake"
# recent AWS SDKs add CRC checksums to every request; S3-compatible servers refuse some (set before the JVM starts)
SDK_ENV = {"AWS_REQUEST_CHECKSUM_CALCULATION": "WHEN_REQUIRED", "AWS_RESPONSE_CHECKSUM_VALIDATION": "WHEN_REQUIRED"}


@dataclass(frozen=True)
class S3Lake:
    endpoint: str

    def conf(self) -> dict[str, str]:
        """Spark's settings for the store."""
        return {"spark.hadoop.fs.s3a.endpoint": self.endpoint, "spark.hadoop.fs.s3a.path.style.access": "true",
                "spark.hadoop.fs.s3a.access.key": ACCESS, "spark.hadoop.fs.s3a.secret.key": SECRET,
                "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
                "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
                "spark.hadoop.fs.s3a.multiobjectdelete.enable": "false",
                "spark.hadoop.fs.s3a.change.detection.version.required": "false"}

    def url(self, key: str) -> str:
        return f"s3a://{BUCKET}/{key}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def s3_lake(data: Path) -> Iterator[S3Lake]:
    """A running S3 API server with the bucket made, for the block's duration (its objects in its memory)."""
    from pyarrow import fs

    os.environ.update(SDK_ENV)
    port = _free_port()
    data.mkdir(parents=True, exist_ok=True)
    log = open(data / "s3proxy.log", "ab")  # noqa: SIM115 - open for the server's whole life
    proc = subprocess.Popen([str(ROOT / "scripts" / "s3"), "run", str(port), str(data)], stdout=log, stderr=log)
    try:
        s3 = fs.S3FileSystem(access_key=ACCESS, secret_key=SECRET, endpoint_override=f"127.0.0.1:{port}",
                             scheme="http", region="us-east-1", allow_bucket_creation=True)
        deadline = time.time() + 120
        while True:
            try:
                s3.create_dir(BUCKET)
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"S3Proxy did not start: {(data / 's3proxy.log').read_text()[-2000:]}") from None
                time.sleep(0.3)
        yield S3Lake(f"http://127.0.0.1:{port}")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
