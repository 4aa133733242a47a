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
    """Writes and reads claim-check files under a local folder; locations are `file://` URIs. A reader given no
    folder (`None`: a consumer without `claim-check-storage-uri`) reads each location as written."""

    def __init__(self, uri: str | None) -> None:
        self.root = _local_path(uri) if uri else None
        self.uri = uri.rstrip("/") if uri else ""

    def write(self, name: str, data: bytes) -> str:
        if self.root is None:
            raise ConfigError("claim-check needs claim-check-storage-uri (file:///path)")
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{name}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, self.root / name)
        return f"{self.uri}/{name}"

    def read(self, location: str) -> bytes:
        """The file a message's `claimCheckLocation` names, read from this consumer's own storage by its file name
        alone, as TiCDC's consumers do (`filepath.Split`): the producer's path or scheme (an `s3://` bucket, a
        folder on its host) need not exist here. Without a storage, the location itself (a `file://` URI)."""
        if self.root is None:
            return _local_path(location).read_bytes()
        name = location.rstrip("/").rsplit("/", 1)[-1]
        if not name or name in (".", ".."):
            raise OSError(f"no file name in {location!r}")
        return (self.root / name).read_bytes()
