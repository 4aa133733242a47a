"""Real messages (TiCDC's, Debezium's, Canal's golden output), mutated: every decoder turns any input into
events or a DecodeError (a dead letter), never another exception; a mutation that keeps the JSON text
(whitespace) decodes to the same events.

Hypothesis draws the seeds; each example mutates a batch of messages, so 10,000 mutations per protocol
stay within seconds."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from changefeed.codecs import make_decoder
from changefeed.config import build_config
from changefeed.errors import DecodeError
from changefeed.eventline import EventWriter

TESTS = Path(__file__).parent
STREAMS = {
    "canal-json": ("canal-json", {"enable-tidb-extension": "true"},
                   [TESTS / "canal" / "golden" / "ticdc" / "enable-tidb-extension.messages.jsonl"]),
    "canal-official": ("canal-json", {}, sorted((TESTS / "canal" / "golden").glob("*.json"))),
    "simple-json": ("simple", {"encoding-format": "json"},
                    [TESTS / "simple" / "golden" / "ticdc" / "json.messages.jsonl"]),
    "simple-avro": ("simple", {"encoding-format": "avro"},
                    [TESTS / "simple" / "golden" / "ticdc" / "avro.messages.jsonl"]),
    "avro": ("avro", {"enable-tidb-extension": "true", "avro-enable-watermark": "true", "schema-registry": "golden"},
             [TESTS / "avro" / "golden" / "ticdc" / "enable-watermark.messages.jsonl"]),
    "debezium": ("debezium", {}, [TESTS / "debezium" / "golden" / "ticdc" / "datatype.messages.jsonl",
                                  TESTS / "debezium" / "golden" / "ticdc" / "enable-tidb-extension.messages.jsonl"]),
}
BATCH = 100
EXAMPLES = 100  # x BATCH = 10,000 mutations per protocol


def _payload(v: Any) -> bytes | None:
    if v is None:
        return None
    if isinstance(v, dict) and "$b64" in v:
        return base64.b64decode(v["$b64"])
    if isinstance(v, str):
        return v.encode()
    return orjson.dumps(v)


def messages(name: str) -> list[tuple[bytes | None, bytes | None]]:
    _, _, files = STREAMS[name]
    out = []
    for f in files:
        if f.suffix == ".json":  # one message per file (official Canal / spec examples)
            out.append((None, f.read_bytes()))
            continue
        for line in f.read_bytes().splitlines():
            m = orjson.loads(line)
            if m.get("options") and STREAMS[name][1] and name != "avro" and m["options"] != STREAMS[name][1]:
                continue
            out.append((_payload(m.get("key")), _payload(m.get("value"))))
    assert out, f"no golden messages for {name}"
    return out


class GoldenRegistry:
    """The writer schemas TiCDC registered for its golden avro messages, by their ids; an id it did not
    register is unknown, as a registry answers (40403)."""

    def __init__(self) -> None:
        self.texts = {}
        for line in (TESTS / "avro" / "golden" / "ticdc" / "enable-watermark.schemas.jsonl").read_bytes().splitlines():
            rec = orjson.loads(line)
            self.texts[int(rec["id"])] = rec["schemaText"]

    def schema(self, schema_id: int) -> str:
        from changefeed.avro.registry import SchemaRegistryError

        if schema_id not in self.texts:
            raise SchemaRegistryError(f"schema {schema_id} not found (40403)")
        return self.texts[schema_id]


def decoder(name: str) -> Any:
    protocol, options, _ = STREAMS[name]
    cfg = build_config(protocol, dict(options))
    if protocol == "avro":  # the golden messages' own writer schemas (TiCDC's registry numbered them)
        from changefeed.avro import AvroDecoder
        from changefeed.codecs import GuardedDecoder

        return GuardedDecoder(AvroDecoder(cfg, GoldenRegistry()), "avro")  # type: ignore[arg-type]
    return make_decoder(cfg)


def decode_or_reject(dec: Any, key: bytes | None, value: bytes | None) -> list | DecodeError:
    try:
        return dec.decode(value, key)
    except DecodeError as e:
        assert e.reason, "a dead letter needs a reason"
        return e


WRONG = [[], ["x"], {}, {"a": [1]}, "", "text", 0, -1, 1 << 80, -(1 << 70), 1.5e308, True, None,
         [[[[[[[[]]]]]]]], "\udcff" * 0 + "é", {"$b64": "!!"}]


def mutate_json(rng: random.Random, obj: Any) -> Any:
    """`obj` with one value replaced by a value of another JSON type, a key dropped or added. It is changed in
    place: the callers pass a value just parsed (a deep copy cost more than the decoding under test)."""
    paths: list[tuple[Any, Any]] = []

    def walk(o: Any) -> None:
        if isinstance(o, dict):
            for k in o:
                paths.append((o, k))
                walk(o[k])
        elif isinstance(o, list):
            for i in range(len(o)):
                paths.append((o, i))
                walk(o[i])

    walk(obj)
    if not paths:
        return rng.choice(WRONG)
    parent, k = rng.choice(paths)
    r = rng.random()
    if r < 0.7:
        parent[k] = rng.choice(WRONG)
    elif r < 0.85 and isinstance(parent, dict):
        del parent[k]
    elif isinstance(parent, dict):
        parent[f"extra{rng.randrange(9)}"] = rng.choice(WRONG)
    else:
        parent.append(rng.choice(WRONG))
    return obj


def mutate_bytes(rng: random.Random, raw: bytes, other: bytes) -> bytes:
    r = rng.randrange(7)
    if r == 0:
        return raw[: rng.randrange(len(raw) + 1)]  # truncated
    if r == 1:
        return raw + other  # concatenated
    if r == 2 and raw:
        i = rng.randrange(len(raw))
        return raw[:i] + bytes([rng.randrange(256)]) + raw[i + 1:]  # a byte changed
    if r == 3:
        i = rng.randrange(len(raw) + 1)
        return raw[:i] + b"\xff\xfe\xc3" + raw[i:]  # invalid UTF-8
    if r == 4:
        return b"[" * 5000 + b"]" * 5000  # deep nesting
    if r == 5:
        return raw[:5] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))  # garbage behind a header
    return b'{"x":' + str(1 << 200).encode() + b"}"  # a huge number


def one_mutation(rng: random.Random, key: bytes | None, value: bytes | None,
                 other: bytes | None) -> tuple[bytes | None, bytes | None]:
    target_key = key is not None and rng.random() < 0.2
    raw = key if target_key else value
    if raw is None:
        return key, rng.choice([b"", b"null", b"[]", b"{}"])
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        obj = None
    if obj is not None and rng.random() < 0.7:
        new = json.dumps(mutate_json(rng, obj), ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")
    else:
        new = mutate_bytes(rng, raw, other or b"")
    return (new, value) if target_key else (key, new)


@pytest.mark.parametrize("name", sorted(STREAMS))
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_mutated_messages_decode_or_become_dead_letters(name: str, seed: int) -> None:
    msgs = messages(name)
    dec = decoder(name)
    for k, v in msgs:  # the decoder knows the stream's tables, as a consumer would
        decode_or_reject(dec, k, v)
    rng = random.Random(seed)
    accounted = 0
    for _ in range(BATCH):
        k, v = rng.choice(msgs)
        mk, mv = one_mutation(rng, k, v, rng.choice(msgs)[1])
        got = decode_or_reject(dec, mk, mv)  # anything but events or a DecodeError fails the test
        assert isinstance(got, list | DecodeError)
        accounted += 1
    assert accounted == BATCH


def _reshaped(raw: bytes | None) -> bytes | None:
    """The same JSON text in other whitespace (key order is kept: canal-json's and Debezium's column order
    is their objects' key order, so a reordered object is a different message)."""
    if raw is None:
        return None
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw  # binary (Avro): nothing to reshape
    text = orjson.dumps(obj, option=orjson.OPT_INDENT_2)
    return b" \t" + text + b"\r\n"


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_the_same_json_value_decodes_to_the_same_events(name: str) -> None:
    msgs = messages(name)
    writer = EventWriter()
    a, b = decoder(name), decoder(name)
    decoded = 0
    for k, v in msgs:
        first = decode_or_reject(a, k, v)
        again = decode_or_reject(b, _reshaped(k), _reshaped(v))
        if isinstance(first, DecodeError):
            continue
        assert not isinstance(again, DecodeError), again
        assert [writer.line(e) for e in again] == [writer.line(e) for e in first]
        decoded += 1
    assert decoded > 0


def test_decode_command_skips_mutated_messages_into_the_dead_letter_file(tmp_path: Path) -> None:
    """`changefeed decode --errors=skip`: no traceback, every line decoded or in the dead-letter file."""
    import subprocess
    import sys

    rng = random.Random(11)
    msgs = messages("canal-json")
    lines = []
    for _ in range(300):
        k, v = rng.choice(msgs)
        _, mv = one_mutation(rng, None, v, rng.choice(msgs)[1])
        lines.append(orjson.dumps({"key": None, "value": {"$b64": base64.b64encode(mv or b"").decode()}}))
    src, dead = tmp_path / "in.jsonl", tmp_path / "dead.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    r = subprocess.run([sys.executable, "-m", "changefeed.cli", "decode", "-p", "canal-json", "--option",
                        "enable-tidb-extension=true", "--errors", "skip", "--dead-letter", str(dead), "-i", str(src),
                        "-o", str(tmp_path / "out.jsonl")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    rejected = [orjson.loads(x) for x in dead.read_bytes().splitlines()] if dead.exists() else []
    skipped = [ln for ln in r.stderr.splitlines() if ln.startswith("skipped:")]
    assert rejected and len(rejected) == len(skipped)
    assert all(d["error"] and d["line"] >= 1 for d in rejected)
    assert len({d["line"] for d in rejected}) == len(rejected)
