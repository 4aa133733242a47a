"""External storage for claim-check messages. Only `file://` for now (TiCDC also takes s3://, gcs://...)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlparse

from .config import ConfigError


def _local_path(uri: str) -> Path:
    u = urlparse(uri)
    if u.scheme != "file":
        raise ConfigError(f"claim-check-storage-uri {uri!r}: only file:///path is supported here")
    if u.netloc not in ("", "localhost"):
        raise ConfigError(f"claim-check-storage-uri {uri!r}: a file URI has no host (use file:///abs/path)")
    return Path(unquote(u.path))


class FileClaimCheck:
    """Writes and reads claim-check files under a local folder; locations are `file://` URIs."""

    def __init__(self, uri: str) -> None:
        self.root = _local_path(uri)
        self.uri = uri.rstrip("/")

    def write(self, name: str, data: bytes) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{name}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, self.root / name)
        return f"{self.uri}/{name}"

    def read(self, location: str) -> bytes:
        if "://" in location:
            return _local_path(location).read_bytes()
        return (self.root / location).read_bytes()
