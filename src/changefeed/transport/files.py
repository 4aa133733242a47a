"""The local file transport: the embedded default in place of Kafka.

On-disk layout, for `file:///<folder>/<default-topic>`:

    <folder>/<topic>/meta.json            {"partitions": N}
    <folder>/<topic>/partition-<p>.jsonl  one record per line, append-only

A record is a message line (`{"key", "value"}`, text or `{"$b64"}`) with its `offset` (0-based, per
partition) and `crc` (CRC32 of the key and value bytes). A line is only complete with its newline:
a torn last record (a crash mid-write) is reported and never decoded. The files are JSON Lines, so
Spark's JSON/text sources read them as they are.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

from ..config import ConfigError
from ..errors import DecodeError
from ..eventline import Message, payload_from_json, payload_to_json


def _crc(key: bytes | None, value: bytes | None) -> int:
    return zlib.crc32(value or b"", zlib.crc32(key or b""))


@dataclass
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


class FileProducer:
    """Appends messages to topic/partition files; `flush()` makes what was sent durable (fsync)."""

    def __init__(self, folder: Path, partition_num: int = 3) -> None:
        self.folder = Path(folder)
        self.partition_num = partition_num
        self._files: dict[tuple[str, int], object] = {}
        self._offsets: dict[tuple[str, int], int] = {}
        self._topics: dict[str, int] = {}

    def partitions(self, topic: str) -> int:
        n = self._topics.get(topic)
        if n is None:
            d = self.folder / topic
            meta = d / "meta.json"
            if meta.exists():
                n = int(orjson.loads(meta.read_bytes())["partitions"])
            else:
                d.mkdir(parents=True, exist_ok=True)
                n = self.partition_num
                tmp = d / ".meta.json.tmp"
                tmp.write_bytes(orjson.dumps({"partitions": n}))
                os.replace(tmp, meta)
            self._topics[topic] = n
        return n

    def topics(self) -> list[str]:
        return list(self._topics)

    def _file(self, topic: str, partition: int) -> object:
        key = (topic, partition)
        f = self._files.get(key)
        if f is None:
            path = self.folder / topic / f"partition-{partition}.jsonl"
            offset = 0
            if path.exists():
                good, _ = _scan(path)
                offset = good
                _truncate_torn(path)
            self._offsets[key] = offset
            f = self._files[key] = open(path, "ab")
        return f

    def send(self, topic: str, partition: int, key: bytes | None, value: bytes | None) -> int:
        n = self.partitions(topic)
        if not 0 <= partition < n:
            raise ConfigError(f"topic {topic} has {n} partitions; there is no partition {partition}")
        f = self._file(topic, partition)
        off = self._offsets[(topic, partition)]
        rec = {"offset": off, "key": payload_to_json(key), "value": payload_to_json(value),
               "crc": _crc(key, value)}
        f.write(orjson.dumps(rec) + b"\n")  # type: ignore[attr-defined]
        self._offsets[(topic, partition)] = off + 1
        return off

    def broadcast(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        for p in range(self.partitions(topic)):
            self.send(topic, p, key, value)

    def flush(self) -> None:
        for f in self._files.values():
            f.flush()  # type: ignore[attr-defined]
            os.fsync(f.fileno())  # type: ignore[attr-defined]

    def close(self) -> None:
        self.flush()
        for f in self._files.values():
            f.close()  # type: ignore[attr-defined]
        self._files.clear()


def _scan(path: Path) -> tuple[int, int | None]:
    """(complete records, byte offset of a torn tail or None)."""
    data = path.read_bytes()
    if not data:
        return 0, None
    complete = data.count(b"\n")
    torn = None if data.endswith(b"\n") else data.rfind(b"\n") + 1
    return complete, torn


def _truncate_torn(path: Path) -> None:
    """Before appending after a crash: drop the torn last record (it was never acknowledged)."""
    _, torn = _scan(path)
    if torn is not None:
        with open(path, "r+b") as f:
            f.truncate(torn)


def read_topic(folder: Path, topic: str, partition: int | None = None) -> Iterator[Record]:
    """Every record of a topic, partition by partition, in offset order. A torn last record raises."""
    d = Path(folder) / topic
    meta = d / "meta.json"
    if not meta.exists():
        raise ConfigError(f"no topic {topic!r} in {folder} (no {meta.name})")
    n = int(orjson.loads(meta.read_bytes())["partitions"])
    for p in range(n) if partition is None else [partition]:
        path = d / f"partition-{p}.jsonl"
        if not path.exists():
            continue
        with open(path, "rb") as f:
            pos = 0
            for lineno, line in enumerate(f):
                where = f"{path.name} offset {lineno} (byte {pos})"
                if not line.endswith(b"\n"):
                    raise DecodeError("a torn last record (an interrupted write): not decoded", where=where,
                                      offset=pos)
                pos += len(line)
                try:
                    obj = orjson.loads(line)
                    key = payload_from_json(obj.get("key"), "key")
                    value = payload_from_json(obj.get("value"), "value")
                except (orjson.JSONDecodeError, DecodeError, AttributeError) as e:
                    raise DecodeError(f"not a record: {e}", where=where, offset=pos - len(line)) from None
                if obj.get("crc") != _crc(key, value):
                    raise DecodeError("checksum mismatch: the record is damaged", where=where, field="crc")
                yield Record(topic, p, obj.get("offset", lineno), key, value)


def message_of(r: Record) -> Message:
    return Message(key=r.key, value=r.value, topic=r.topic, partition=r.partition)
