"""The `mysql://user:password@host:port/?server-id=N&tables=db.*` source URI.

Kept apart from the I/O so a bad URI is reported (one line, naming the parameter) before anything connects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from ..config import ConfigError
from ..tablefilter import TableFilter

_KNOWN = {"server-id", "tables", "snapshot", "checkpoint", "flush-interval-ms", "flavor"}
# schemas no capture ever wants (the server's own bookkeeping)
SYSTEM_SCHEMAS = ("mysql", "information_schema", "performance_schema", "sys")


@dataclass
class MySQLURI:
    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "root"
    password: str = ""
    server_id: int = 1001  # the replica id this capture registers with (must differ from the server's)
    tables: list[str] = field(default_factory=lambda: ["*.*"])
    snapshot: bool = True  # on a fresh start (no checkpoint), read the existing rows first (inserts, one commit ts)
    checkpoint: Path | None = None  # where the acknowledged binlog position is kept
    flush_interval_ms: int = 1000  # how often the transport is flushed and the position checkpointed
    flavor: str | None = None  # mariadb or mysql (None: asked from the server's version)
    filter: TableFilter = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.filter = TableFilter(self.tables)

    def wants(self, schema: str, table: str) -> bool:
        return schema.lower() not in SYSTEM_SCHEMAS and self.filter.match(schema, table)

    @property
    def where(self) -> str:
        """How errors name the server (never with the password)."""
        return f"mysql://{self.user}@{self.host}:{self.port}"

    def connect_args(self) -> dict[str, object]:
        return {"host": self.host, "port": self.port, "user": self.user, "passwd": self.password}


def _bool(name: str, v: str) -> bool:
    lv = v.lower()
    if lv in ("1", "true", "yes", "on"):
        return True
    if lv in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"mysql source URI: {name}={v!r} is not true or false")


def _int(name: str, v: str, lo: int, hi: int) -> int:
    try:
        i = int(v)
    except ValueError:
        raise ConfigError(f"mysql source URI: {name}={v!r} is not an integer") from None
    if not lo <= i <= hi:
        raise ConfigError(f"mysql source URI: {name}={i} is out of range {lo}..{hi}")
    return i


def is_mysql_uri(text: str) -> bool:
    return text.lower().startswith(("mysql://", "mariadb://"))


def parse_mysql_uri(text: str) -> MySQLURI:
    """`mysql://user:password@host:port/?server-id=N&tables=db.*,db2.t&snapshot=true&checkpoint=FILE`."""
    if not is_mysql_uri(text):
        raise ConfigError(f"mysql source URI {text!r}: expected mysql://user:password@host:port/?...")
    try:
        u = urlsplit(text)
        port = u.port
    except ValueError as e:
        raise ConfigError(f"mysql source URI: {e}") from None
    out = MySQLURI(host=u.hostname or "127.0.0.1", port=port or 3306, user=unquote(u.username or "root"),
                   password=unquote(u.password or ""))
    if u.scheme.lower() == "mariadb":
        out.flavor = "mariadb"
    if u.path not in ("", "/"):
        raise ConfigError(f"mysql source URI: unexpected path {u.path!r} (name tables with ?tables=db.*)")
    for k, v in parse_qsl(u.query, keep_blank_values=True):
        if k not in _KNOWN:
            raise ConfigError(f"mysql source URI: unknown parameter {k!r} (known: {', '.join(sorted(_KNOWN))})")
        if k == "server-id":
            out.server_id = _int(k, v, 1, (1 << 32) - 1)
        elif k == "tables":
            out.tables = [t.strip() for t in v.split(",") if t.strip()]
            if not out.tables:
                raise ConfigError("mysql source URI: tables= names no table (e.g. tables=db.*)")
        elif k == "snapshot":
            out.snapshot = _bool(k, v)
        elif k == "checkpoint":
            out.checkpoint = Path(v)
        elif k == "flush-interval-ms":
            out.flush_interval_ms = _int(k, v, 0, 3_600_000)
        elif k == "flavor":
            if v not in ("mariadb", "mysql"):
                raise ConfigError(f"mysql source URI: flavor={v!r} is not mariadb or mysql")
            out.flavor = v
    out.filter = TableFilter(out.tables)
    return out
