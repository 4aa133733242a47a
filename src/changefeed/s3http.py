"""The few S3 requests of the driver's Delta commits on object storage (a conditional PUT, a PUT, a GET, a HEAD),
signed here (AWS Signature V4) with static keys.

A Delta commit on object storage is the atomic creation of the log's next `N.json`: the store itself must refuse
the second of two writers racing for a version. AWS S3 (since August 2024), S3Proxy 4.0's nio2 backends and most
S3-compatible stores answer `If-None-Match: *` on PUT with 412 when the key exists. pyarrow's S3 client sends no
such header and the JVM's costs several py4j calls per commit, and the driver's commits of a window over many
tables come from several threads: here each is one HTTP request on a kept-alive connection, from any thread, with
the keys delta-rs takes (`storage_options`, as `objectstore.storage_options` derives them from the session's S3A
settings). The small data files the driver writes (`driverfiles`) go the same way: one PUT each.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import http.client
import threading
from dataclasses import dataclass
from urllib.parse import quote, urlparse

# the store refuses the header (S3Proxy's jclouds `transient`, older servers): the caller looks, then writes
NOT_IMPLEMENTED = 501


class S3Error(OSError):
    """The store answered with an error (other than "not there" or "there is one already")."""


@dataclass(frozen=True)
class S3Target:
    """Where and how to sign requests to one store (from delta-rs-style storage options)."""

    endpoint: str  # scheme://host[:port]
    region: str
    access_key: str
    secret_key: str
    session_token: str | None = None
    path_style: bool = True

    @classmethod
    def of(cls, options: dict[str, str]) -> S3Target | None:
        """The target of these storage options; None without static keys (a credentials provider: not signed
        here)."""
        key, secret = options.get("AWS_ACCESS_KEY_ID"), options.get("AWS_SECRET_ACCESS_KEY")
        if not key or not secret:
            return None
        region = options.get("AWS_REGION", "us-east-1")
        endpoint = options.get("AWS_ENDPOINT_URL") or f"https://s3.{region}.amazonaws.com"
        virtual = options.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST")
        path_style = virtual.lower() == "false" if virtual is not None else "AWS_ENDPOINT_URL" in options
        return cls(endpoint.rstrip("/"), region, key, secret, options.get("AWS_SESSION_TOKEN"), path_style)


def _sign(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


class S3Http:
    """Requests to one store; one kept-alive connection per thread."""

    def __init__(self, target: S3Target) -> None:
        self.t = target
        self._local = threading.local()
        self.supported = True  # False once the store refused the header (501)

    def _request(self, method: str, bucket: str, key: str, body: bytes = b"", conditional: bool = False
                 ) -> tuple[int, bytes]:
        u = urlparse(self.t.endpoint)
        host = u.netloc if self.t.path_style else f"{bucket}.{u.netloc}"
        path = f"/{quote(bucket)}/{quote(key)}" if self.t.path_style else f"/{quote(key)}"
        now = dt.datetime.now(dt.UTC)
        stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        payload = hashlib.sha256(body).hexdigest()
        headers = {"host": host, "x-amz-content-sha256": payload, "x-amz-date": stamp}
        if conditional:
            headers["if-none-match"] = "*"
        if self.t.session_token:
            headers["x-amz-security-token"] = self.t.session_token
        names = sorted(headers)
        canonical = "\n".join([method, path, "", *(f"{n}:{headers[n]}" for n in names), "", ";".join(names),
                               payload])
        scope = f"{day}/{self.t.region}/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
        k = _sign(_sign(_sign(_sign(f"AWS4{self.t.secret_key}".encode(), day), self.t.region), "s3"),
                  "aws4_request")
        signature = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={self.t.access_key}/{scope}, "
                                    f"SignedHeaders={';'.join(names)}, Signature={signature}")
        if method == "PUT":
            headers["content-length"] = str(len(body))
        for attempt in range(2):  # a kept-alive connection the server closed meanwhile: once more, on a new one
            conn = self._conn(host, u.scheme, fresh=attempt > 0)
            try:
                conn.request(method, path, body=body if method == "PUT" else None, headers=headers)
                resp = conn.getresponse()
                text = resp.read()
            except (http.client.HTTPException, ConnectionError) as e:
                conn.close()
                if attempt:
                    raise S3Error(f"{self.t.endpoint}: {method} {bucket}/{key}: {e}") from e
                continue
            if resp.status >= 300 and resp.status not in (404, 409, 412, NOT_IMPLEMENTED):
                raise S3Error(f"{self.t.endpoint}: {method} {bucket}/{key}: HTTP {resp.status} "
                                 f"{text[:200].decode(errors='replace')}")
            return resp.status, text
        raise AssertionError("unreachable")

    def _conn(self, host: str, scheme: str, fresh: bool) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None or fresh:
            if conn is not None:
                conn.close()
            make = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
            conn = self._local.conn = make(host, timeout=60)
        return conn

    def put_if_absent(self, bucket: str, key: str, body: bytes) -> bool:
        """Create `bucket/key` holding `body` only if no object is there: False when one is (HTTP 412; 409, AWS's
        answer to a conditional write racing another on the same key, counts as taken too). A store that refuses
        the header gets a look first (HEAD), then the PUT: not atomic, as Delta's own S3 log store."""
        if self.supported:
            status, _ = self._request("PUT", bucket, key, body, conditional=True)
            if status != NOT_IMPLEMENTED:
                return status < 300
            self.supported = False
        if self.exists(bucket, key):
            return False
        self.put(bucket, key, body)
        return True

    def put(self, bucket: str, key: str, body: bytes) -> None:
        """`bucket/key` holding `body` (whole or not at all: one PUT)."""
        status, text = self._request("PUT", bucket, key, body)
        if status >= 300:
            raise S3Error(f"{self.t.endpoint}: PUT {bucket}/{key}: HTTP {status} {text[:200]!r}")

    def get(self, bucket: str, key: str) -> bytes | None:
        """The object's bytes, None when there is none."""
        status, text = self._request("GET", bucket, key)
        if status == 404:
            return None
        if status >= 300:
            raise S3Error(f"{self.t.endpoint}: GET {bucket}/{key}: HTTP {status} {text[:200]!r}")
        return text

    def exists(self, bucket: str, key: str) -> bool:
        """Whether an object is at `bucket/key` (one HEAD)."""
        status, _ = self._request("HEAD", bucket, key)
        if status >= 300 and status != 404:
            raise S3Error(f"{self.t.endpoint}: HEAD {bucket}/{key}: HTTP {status}")
        return status < 300
