"""A lake on an object store (s3a://): what differs from a local folder, in one place.

- The Spark checkpoint: Spark's default checkpoint file manager creates files through Hadoop's FileContext, which
  looks for the parent folder first; an object store has no folders (S3A fakes them with marker objects, which
  S3-compatible servers keep unevenly: S3Proxy's filesystem backend turns one into an empty folder it then does
  not list), so the query did not start (FileNotFoundException on the checkpoint). On s3a:// the consumer uses
  Spark's FileSystem-based manager unless the user chose one (`spark.sql.streaming.checkpointFileManagerClass`):
  a file written aside then renamed, which S3A does by one copy, so a checkpoint file appears whole or not at all.
  spark-hadoop-cloud's AbortableStreamBasedCheckpointFileManager (in the set-up's jars) writes in place with no
  copy; it needs the folder markers, which AWS S3 keeps: a user on AWS may choose it with --conf.
- The decoders' schema store is written by Python tasks, which have no JVM: they reach the store through pyarrow's
  S3 client, with the endpoint and credentials of the session's S3A settings (`SchemaFolder`).
- The storage options delta-rs (and pyarrow) take, from the same S3A settings (`storage_options`), so that a
  reader of the lake needs nothing but the session's settings.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

S3_SCHEMES = ("s3a", "s3", "s3n")
CHECKPOINT_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
ABORTABLE_MANAGER = "org.apache.spark.internal.io.cloud.AbortableStreamBasedCheckpointFileManager"
FS_MANAGER = "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager"


def is_s3(path: str) -> bool:
    """A path on S3 (or an S3-compatible store) through Hadoop's S3A."""
    return urlparse(path).scheme in S3_SCHEMES and "://" in path


def store_name(path: str) -> str:
    """How an error names the store of a path: its scheme and bucket (s3a://bucket)."""
    u = urlparse(path)
    return f"{u.scheme}://{u.netloc}"


def _hadoop(spark: SparkSession) -> Any:
    return spark._jsc.hadoopConfiguration()  # type: ignore[attr-defined]


def storage_options(spark: SparkSession, bucket: str = "") -> dict[str, str]:
    """delta-rs's `storage_options` for the session's S3A settings (per-bucket `fs.s3a.bucket.<b>.*` first)."""
    conf = _hadoop(spark)

    def get(key: str) -> str | None:
        v = conf.get(f"fs.s3a.bucket.{bucket}.{key}") if bucket else None
        v = v if v is not None else conf.get(f"fs.s3a.{key}")
        return None if v is None else str(v)

    out: dict[str, str] = {}
    endpoint = get("endpoint")
    if endpoint:
        ssl = (get("connection.ssl.enabled") or "true").lower() != "false"
        if "://" not in endpoint:
            endpoint = f"{'https' if ssl else 'http'}://{endpoint}"
        out["AWS_ENDPOINT_URL"] = endpoint
        if endpoint.startswith("http://"):
            out["AWS_ALLOW_HTTP"] = "true"
    for key, opt in (("access.key", "AWS_ACCESS_KEY_ID"), ("secret.key", "AWS_SECRET_ACCESS_KEY"),
                     ("session.token", "AWS_SESSION_TOKEN")):
        v = get(key)
        if v:
            out[opt] = v
    out["AWS_REGION"] = get("endpoint.region") or get("region") or "us-east-1"
    if (get("path.style.access") or "false").lower() == "true":
        out["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
    return out


@dataclass(frozen=True)
class SchemaFolder:
    """A folder on S3 that Python tasks write (the schema store): its URI and delta-rs-style storage options."""

    uri: str
    options: dict[str, str] = field(default_factory=dict)

    def filesystem(self) -> Any:
        """pyarrow's S3 file system for the store, and the folder's path in it (bucket/key)."""
        from pyarrow import fs

        o = self.options
        endpoint = o.get("AWS_ENDPOINT_URL", "")
        u = urlparse(endpoint) if endpoint else None
        s3 = fs.S3FileSystem(access_key=o.get("AWS_ACCESS_KEY_ID"), secret_key=o.get("AWS_SECRET_ACCESS_KEY"),
                             session_token=o.get("AWS_SESSION_TOKEN"), region=o.get("AWS_REGION", "us-east-1"),
                             endpoint_override=u.netloc if u else None, scheme=u.scheme if u else "https",
                             force_virtual_addressing=False)
        p = urlparse(self.uri)
        return s3, f"{p.netloc}{p.path}".rstrip("/")


def schema_folder(spark: SparkSession, store: str) -> str | SchemaFolder:
    """The schema store as the decoders' tasks reach it: a local path as it is, an S3 one with its options."""
    if not is_s3(store):
        return store
    return SchemaFolder(store, storage_options(spark, urlparse(store).netloc))


def prepare_checkpoint(spark: SparkSession, checkpoint: str) -> None:
    """A checkpoint on S3: Spark's FileSystem-based checkpoint file manager, unless the user set one."""
    if is_s3(checkpoint) and spark.conf.get(CHECKPOINT_MANAGER, None) in (None, ""):
        spark.conf.set(CHECKPOINT_MANAGER, FS_MANAGER)


def _root_cause(e: BaseException) -> str:
    """The innermost Java cause of a py4j error, as `Class: first line` (else the Python error's first line)."""
    j = getattr(e, "java_exception", None)
    if j is None:
        return (str(e).strip().splitlines() or [type(e).__name__])[0]
    while j.getCause() is not None and j.getCause() != j:
        j = j.getCause()
    name = str(j.getClass().getSimpleName())
    text = (str(j.getMessage() or "").strip().splitlines() or [""])[0]
    return f"{name}: {text[:300]}" if text else name


def _endpoint(spark: SparkSession, path: str) -> tuple[str, int] | None:
    """The host and port the store of an s3a:// path is reached at, when the session names an endpoint."""
    ep = storage_options(spark, urlparse(path).netloc).get("AWS_ENDPOINT_URL") if is_s3(path) else None
    if not ep:
        return None
    u = urlparse(ep)
    return (u.hostname or "", u.port or (80 if u.scheme == "http" else 443)) if u.hostname else None


def _tcp_probe(host: str, port: int, timeout: float) -> str | None:
    """Why nothing answers at host:port within the timeout (a refused connection at once), or None."""
    import socket

    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((host, port), timeout=max(0.1, min(5.0, deadline - time.monotonic()))).close()
            return None
        except ConnectionRefusedError as e:
            return f"{type(e).__name__}: {e.strerror or e}"
        except OSError as e:
            if time.monotonic() >= deadline:
                return f"not reachable within {timeout:g} s ({type(e).__name__}: {e.strerror or e})"
            time.sleep(0.2)


def check_store(spark: SparkSession, path: str, option: str = "--lake", timeout: float | None = None) -> None:
    """Reach the store of a path on another file system than the local one before any work starts: a wrong
    endpoint, bad credentials or a missing bucket is one line that names the store, promptly, not a JVM stack trace
    minutes into the run. S3A retries a refused connection for minutes: its endpoint is probed first, and its
    answer is waited for no longer than the connect timeout (--connect-timeout, 30 s by default)."""
    from ..errors import StorageError
    from ..transport.reach import connect_timeout

    if "://" not in path or path.startswith("file:"):
        return
    wait = connect_timeout() if timeout is None else timeout
    where = _endpoint(spark, path)
    if where is not None and (why := _tcp_probe(*where, wait)) is not None:
        raise StorageError(f"cannot reach {store_name(path)} at {where[0]}:{where[1]} ({option} {path}): {why}")
    jvm = spark._jvm  # type: ignore[attr-defined]
    answer: list[BaseException | None] = []

    def ask() -> None:
        try:
            p = jvm.org.apache.hadoop.fs.Path(path)
            p.getFileSystem(_hadoop(spark)).exists(p)
            answer.append(None)
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            answer.append(e)

    asker = threading.Thread(target=ask, name="changefeed-store-check", daemon=True)
    asker.start()
    asker.join(wait)
    if not answer:
        raise StorageError(f"cannot reach {store_name(path)} ({option} {path}): no answer within {wait:g} s "
                           "(--connect-timeout sets the wait)")
    e = answer[0]
    if e is None:
        return
    if not type(e).__module__.startswith(("py4j", "pyspark")):
        raise e
    raise StorageError(f"cannot reach {store_name(path)} ({option} {path}): {_root_cause(e)}") from None


def put_if_absent(spark: SparkSession, path: str, data: bytes) -> bool:
    """Create the object at an s3a:// path only if no object is there (a conditional PUT, `If-None-Match: *`):
    False when one is (HTTP 412). Made with the session's own S3A client (its endpoint, credentials and retries),
    so the store itself decides between two writers racing for the same key: AWS S3 and S3-compatible stores that
    implement conditional writes answer it atomically. A store that refuses the header (HTTP 501), or a file system
    without S3A's client, gets Hadoop's create-unless-there instead (look, then write); a store that ignores the
    header overwrites (the caller reads back what it wrote to catch that)."""
    from py4j.protocol import Py4JError

    jvm = spark._jvm  # type: ignore[attr-defined]
    p = jvm.org.apache.hadoop.fs.Path(path)
    fs = p.getFileSystem(_hadoop(spark))
    u = urlparse(path)
    try:
        client = fs.getS3AInternals().getAmazonS3Client("changefeed: conditional put")
    except Py4JError:  # not S3A
        return _create_unless_there(jvm, fs, p, data)
    model = jvm.software.amazon.awssdk.services.s3.model
    req = model.PutObjectRequest.builder().bucket(u.netloc).key(u.path.lstrip("/")).ifNoneMatch("*") \
        .contentLength(len(data)).build()
    try:
        client.putObject(req, jvm.software.amazon.awssdk.core.sync.RequestBody.fromBytes(bytearray(data)))
    except Exception as e:  # noqa: BLE001 - py4j carries the store's answer
        j = getattr(e, "java_exception", None)
        status = getattr(j, "statusCode", None) if j is not None else None
        if status is not None and int(status()) == 412:
            return False
        if status is not None and int(status()) == 501:
            return _create_unless_there(jvm, fs, p, data)
        raise
    return True


def _create_unless_there(jvm: Any, fs: Any, p: Any, data: bytes) -> bool:
    """Hadoop's create without overwrite: refused when the file is there (checked first, not atomic on S3)."""
    from py4j.protocol import Py4JJavaError

    try:
        out = fs.create(p, False)
    except Py4JJavaError as e:
        if "FileAlreadyExistsException" in str(e.java_exception.getClass().getName()):
            return False
        raise
    try:
        out.write(bytearray(data))
    finally:
        out.close()
    return True


def put(spark: SparkSession, path: str, data: bytes) -> None:
    """Write (or replace) one object in place: on S3 a PUT makes the object appear whole or not at all, so the
    local way (write aside, delete the old one, rename) would only open a moment where it is missing."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    p = jvm.org.apache.hadoop.fs.Path(path)
    out = p.getFileSystem(_hadoop(spark)).create(p, True)
    try:
        out.write(bytearray(data))
    finally:
        out.close()
