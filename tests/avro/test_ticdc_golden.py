"""Against TiCDC's own avro encoder (tests/avro/golden/ticdc/README.md): the exact schema text registered
under each subject, and the exact Avro bytes after the 5-byte Confluent header.

Schema ids are left out: TiCDC's test registry and a real one number schemas differently. The registry
here is an in-memory stand-in (the format is under test; tests/avro/test_avro.py uses a real registry).
"""

from __future__ import annotations

import base64
from pathlib import Path

import orjson
import pytest

from changefeed.avro import AvroEncoder
from changefeed.config import build_config
from changefeed.eventline import EventReader

GOLDEN = Path(__file__).parent / "golden" / "ticdc"
CONFIGS = sorted(p.name.removesuffix(".messages.jsonl") for p in GOLDEN.glob("*.messages.jsonl"))


class MemoryRegistry:
    def __init__(self) -> None:
        self.registered: list[tuple[str, str]] = []
        self.ids: dict[tuple[str, str], int] = {}

    def register(self, subject: str, schema: str) -> int:
        key = (subject, schema)
        if key not in self.ids:
            self.ids[key] = len(self.ids) + 1
            self.registered.append(key)
        return self.ids[key]


def _events():
    reader = EventReader()
    return [(orjson.loads(x)["id"], reader.from_obj(orjson.loads(x)))
            for x in (GOLDEN / "events.jsonl").read_bytes().splitlines()]


def _b(v):
    return None if v is None else base64.b64decode(v["$b64"])


@pytest.mark.parametrize("config", CONFIGS)
def test_against_ticdc(config):
    expected = [orjson.loads(x) for x in (GOLDEN / f"{config}.messages.jsonl").read_bytes().splitlines()]
    schemas = [orjson.loads(x) for x in (GOLDEN / f"{config}.schemas.jsonl").read_bytes().splitlines()]
    cfg = build_config("avro", expected[0]["options"])
    reg = MemoryRegistry()
    enc = AvroEncoder(cfg, reg, topic="golden.{schema}.{table}")  # type: ignore[arg-type]
    got = []
    for eid, ev in _events():
        got.extend((eid, m) for m in enc.encode(ev))
    assert [e for e, _ in got] == [m["event"] for m in expected]
    for (eid, m), ref in zip(got, expected, strict=True):
        for part in ("key", "value"):
            ours, theirs = getattr(m, part), _b(ref[part])
            if theirs is None or ours is None:
                assert ours is theirs is None, (eid, part)
            elif theirs[:1] == b"\x00":
                assert ours[:1] == b"\x00" and ours[5:] == theirs[5:], (eid, part)
            else:  # watermark / DDL messages: no header
                assert ours == theirs, (eid, part)
    # the same schema text under the same subject, in the same order (TiCDC re-sends on a new table version)
    theirs = []
    for s in schemas:
        if (s["subject"], s["schemaText"]) not in theirs:
            theirs.append((s["subject"], s["schemaText"]))
    assert reg.registered == theirs


def test_decoded_bytes_defaults_are_the_columns_own():
    """TiCDC writes a BIT or binary column's default in the schema as Go marshals []byte: base64. The decoder reads
    it back to the definition's default (events.jsonl: bitT 682, binaryT 'Binary default' and two NULs)."""
    from changefeed.avro import AvroDecoder

    class ByOrder:  # the golden run's registry numbered its schemas 1, 2, ... as they were registered
        def __init__(self, texts: list[str]) -> None:
            self.texts = texts

        def schema(self, schema_id: int) -> str:
            return self.texts[schema_id - 1]

    schemas = [orjson.loads(x) for x in (GOLDEN / "enable-tidb-extension.schemas.jsonl").read_bytes().splitlines()]
    reg = ByOrder([orjson.dumps(s["schema"]).decode() for s in schemas])
    msg = next(orjson.loads(x) for x in (GOLDEN / "enable-tidb-extension.messages.jsonl").read_bytes().splitlines()
               if orjson.loads(x)["event"] == "insert-1")
    dec = AvroDecoder(build_config("avro", {"enable-tidb-extension": "true"}), reg)  # type: ignore[arg-type]
    [ev] = dec.decode(_b(msg["value"]), _b(msg["key"]))
    source = dict(_events())["insert-1"].table
    for name in ("bitT", "binaryT", "varbinaryT"):
        assert ev.table.by_name[name].default == source.by_name[name].default, name
