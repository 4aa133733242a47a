"""Where the consumer keeps things in a lake, spelled in one place (plain strings: no Spark here).

    <lake>/<db>/<table>               a Delta table
    <lake>/_changefeed/changelog      the bronze changelog: what a restart reads (or every change: changelog=full)
    <lake>/_changefeed/dead_letters   decoded changes the lake could not take, with why
    <lake>/_changefeed/progress       one record per micro-batch (batch-<id>.json)
    <lake>/_changefeed/checkpoint     the Spark checkpoint, unless one is given
    <lake>/_changefeed/staging/<app>  data files of many tables written in one job, before each moves into its table
    <checkpoint>/schemas              the decoders' schema store

Paths are joined with `/` (they may be URIs: s3a://..., file:...); a trailing `/` on the lake is dropped.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

META = "_changefeed"  # the lake's own folder, beside the databases (a database never starts with `_` here)


@dataclass(frozen=True)
class LakeLayout:
    """The paths of one lake."""

    lake: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "lake", self.lake.rstrip("/"))

    @property
    def meta(self) -> str:
        return f"{self.lake}/{META}"

    @property
    def changelog(self) -> str:
        return f"{self.meta}/changelog"

    @property
    def dead_letters(self) -> str:
        return f"{self.meta}/dead_letters"

    @property
    def progress(self) -> str:
        return f"{self.meta}/progress"

    @property
    def checkpoint(self) -> str:
        return f"{self.meta}/checkpoint"

    @property
    def staging(self) -> str:
        return f"{self.meta}/staging"

    def database(self, database: str) -> str:
        return f"{self.lake}/{database}"

    def table(self, database: str, table: str) -> str:
        return f"{self.lake}/{database}/{table}"


def lake_path(path: str) -> str:
    """A lake or checkpoint path as the consumer spells it everywhere: a `file:` URI (`file:/abs`, `file:///abs`)
    as the absolute path it names, so that Delta sees one spelling of a table (a `file:///` URI against the
    `file:/` Spark makes of it was DELTA_AMBIGUOUS_PATHS_IN_CREATE_TABLE); a relative path made absolute (Delta
    takes a relative `location` for a table name, and refuses `lake/_changefeed/...`); any other URI
    (s3a://bucket/path, hdfs://) as given, without a trailing `/`."""
    from urllib.parse import unquote, urlparse

    u = urlparse(path)
    if u.scheme == "file" and u.netloc in ("", "localhost"):
        return os.path.abspath(unquote(u.path) or "/")
    if u.scheme and "://" in path:
        return path.rstrip("/") if path.rstrip("/") != f"{u.scheme}:/" else path
    return os.path.abspath(path)


def schema_store(checkpoint: str) -> str:
    """Where the decoders keep the schemas they learned, inside the Spark checkpoint."""
    return f"{checkpoint}/schemas"
