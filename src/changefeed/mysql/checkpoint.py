"""The capture's checkpoint: the binlog position acknowledged by the transport, and what resuming there needs.

Written only after the transport's flush returned (everything before it acknowledged), atomically (a temp file
then rename), so a crash leaves the previous checkpoint: a restart replays from there (at-least-once, no gap).
The table definitions at that position are kept with it, so rows after it are read with the schema they were
written with, not today's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..config import ConfigError
from ..eventline import EventReader, event_to_obj, table_from_json, table_to_json
from ..model import Event, TableInfo
from .uri import MySQLURI


@dataclass
class Position:
    """Where the next transaction starts: binlog file and offset (and the GTID state, for information)."""

    file: str
    pos: int
    gtid: str | None = None

    def key(self) -> tuple[int, int]:
        """Order of positions: the file's sequence number, then the offset."""
        suffix = self.file.rsplit(".", 1)[-1]
        return (int(suffix) if suffix.isdigit() else 0, self.pos)

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}" + (f" (gtid {self.gtid})" if self.gtid else "")


@dataclass
class Checkpoint:
    position: Position
    last_ts: int  # the commit ts given to the last transaction before the position (ts stay increasing)
    tables: list[TableInfo] = field(default_factory=list)
    # XA transactions prepared before the position and not yet ended there: their rows, by XID (gtrid, bqual,
    # formatID); their XA COMMIT, after the position, brings them out on a resume
    prepared: dict[tuple[bytes, bytes, int], list[Event]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        obj: dict[str, Any] = {
            "position": {"file": self.position.file, "pos": self.position.pos, "gtid": self.position.gtid},
            "last_ts": self.last_ts,
            "tables": [table_to_json(t) for t in self.tables],
        }
        if self.prepared:
            obj["xa_prepared"] = [{"xid": [g.hex(), b.hex(), f], "events": [event_to_obj(e) for e in evs]}
                                  for (g, b, f), evs in self.prepared.items()]
        return orjson.dumps(obj, option=orjson.OPT_INDENT_2)


def save(path: Path, cp: Checkpoint) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(cp.to_json())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load(path: Path) -> Checkpoint | None:
    """The checkpoint at `path`, or None when there is none yet."""
    if not path.exists():
        return None
    try:
        obj = orjson.loads(path.read_bytes())
        p = obj["position"]
        pos = Position(str(p["file"]), int(p["pos"]), p.get("gtid"))
        tables = [table_from_json(t, f"tables[{i}]") for i, t in enumerate(obj.get("tables", []))]
        reader = EventReader()
        prepared = {(bytes.fromhex(x["xid"][0]), bytes.fromhex(x["xid"][1]), int(x["xid"][2])):
                    [reader.from_obj(e) for e in x["events"]] for x in obj.get("xa_prepared", [])}
        return Checkpoint(pos, int(obj["last_ts"]), tables, prepared)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"checkpoint {path}: unreadable ({e}); remove it to start from the current position") \
            from None


def load_checkpoint(uri: MySQLURI) -> Checkpoint | None:
    return load(uri.checkpoint) if uri.checkpoint is not None else None
