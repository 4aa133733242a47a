"""A client of the Confluent Schema Registry REST API (Confluent's server, Apicurio's ccompat API, ...).

Registers key/value schemas under `<topic>-key` / `<topic>-value` (TopicNameStrategy), caches ids both
ways, retries transient failures (5xx, timeouts, refused connections) with exponential backoff, and turns
a compatibility refusal (HTTP 409) into an error that carries the registry's own message. Credentials may
sit in the URL (`https://user:pass@host/`, URL-encoded); they go into an Authorization header and never
into a message or log.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from ..errors import SchemaRegistryError
from ..redact import remember
from ..security import registry_ssl_context

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def redact(url: str) -> str:
    """The URL without its credentials, for messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class SchemaRegistry:
    def __init__(self, url: str, *, timeout_s: float = 10.0, retries: int = 5, backoff_s: float = 0.2,
                 sleep: Callable[[float], None] = time.sleep, ca: str = "", cert: str = "", key: str = "",
                 insecure: bool = False) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SchemaRegistryError(f"schema-registry {redact(url)!r}: expected http(s)://[user:password@]host:port")
        self._auth = None
        if parts.username is not None:
            user, pw = unquote(parts.username), unquote(parts.password or "")
            remember(pw)
            remember(parts.password)
            self._auth = "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode("ascii")
        host = parts.hostname + (f":{parts.port}" if parts.port else "")
        self.base = urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self._sleep = sleep
        self._ssl = registry_ssl_context(ca, cert, key, insecure) if parts.scheme == "https" else None
        self._ids: dict[tuple[str, str], int] = {}
        self._schemas: dict[int, str] = {}

    def __repr__(self) -> str:
        return f"SchemaRegistry({self.base!r})"

    # ------------------------------------------------------------------------------------------
    def _request(self, method: str, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            req = urllib.request.Request(self.base + path, data=data, method=method)
            req.add_header("Accept", CONTENT_TYPE)
            if data is not None:
                req.add_header("Content-Type", CONTENT_TYPE)
            if self._auth:
                req.add_header("Authorization", self._auth)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s, context=self._ssl) as resp:
                    return json.loads(resp.read() or b"{}")
            except urllib.error.HTTPError as e:
                raw = e.read()
                try:
                    detail = json.loads(raw)
                except ValueError:
                    detail = {"message": raw.decode("utf-8", "replace")[:300]}
                if e.code >= 500 or e.code == 429:
                    last = SchemaRegistryError(f"{method} {path}: HTTP {e.code} {detail.get('message', '')}",
                                               e.code, detail.get("error_code"))
                elif e.code in (401, 403):
                    raise SchemaRegistryError(f"schema registry at {self.base}: HTTP {e.code}, credentials refused "
                                              f"({detail.get('message', '')})", e.code,
                                              detail.get("error_code")) from None
                else:
                    raise SchemaRegistryError(str(detail.get("message") or detail), e.code,
                                              detail.get("error_code")) from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
                last = SchemaRegistryError(f"{method} {path}: {getattr(e, 'reason', e)}")
            if attempt < self.retries:
                self._sleep(self.backoff_s * (2 ** attempt))
        raise SchemaRegistryError(f"schema registry at {self.base} unavailable after {self.retries + 1} tries: "
                                  f"{last}")

    # ------------------------------------------------------------------------------------------
    def register(self, subject: str, schema: str) -> int:
        """The id of `schema` under `subject`, registering it as a new version when needed."""
        key = (subject, schema)
        sid = self._ids.get(key)
        if sid is None:
            resp = self._request("POST", f"/subjects/{quote(subject, safe='')}/versions", {"schema": schema})
            sid = int(resp["id"])
            self._ids[key] = sid
            self._schemas[sid] = schema
        return sid

    def schema(self, schema_id: int) -> str:
        """The schema text registered under an id (cached)."""
        text = self._schemas.get(schema_id)
        if text is None:
            resp = self._request("GET", f"/schemas/ids/{schema_id}")
            text = resp["schema"]
            self._schemas[schema_id] = text
        return text

    def set_compatibility(self, level: str, subject: str | None = None) -> None:
        path = "/config" if subject is None else f"/config/{quote(subject, safe='')}"
        self._request("PUT", path, {"compatibility": level})

    def subjects(self) -> list[str]:
        return list(self._request("GET", "/subjects"))  # type: ignore[arg-type]
