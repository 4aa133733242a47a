"""The CLI end to end, as a user runs it: the real entry point in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

from tests.conftest import ROOT

CANAL_GOLDEN = ROOT / "tests" / "canal" / "golden"
EXAMPLE = ROOT / "src" / "changefeed" / "examples" / "events.jsonl"


def cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "changefeed.cli", *args], input=stdin, capture_output=True,
                          timeout=120)


def test_encode_then_decode_round_trip(tmp_path: Path):
    msgs = tmp_path / "m.jsonl"
    back = tmp_path / "e.jsonl"
    r = cli("encode", "-p", "canal-json", "--option", "enable-tidb-extension=true", "-i", str(EXAMPLE),
            "-o", str(msgs))
    assert r.returncode == 0, r.stderr
    assert b"encoded 10 events into 10 canal-json messages" in r.stderr
    lines = [orjson.loads(x) for x in msgs.read_bytes().splitlines()]
    assert all(set(m) == {"key", "value"} and m["key"] is None for m in lines)
    r = cli("decode", "-p", "canal-json", "-i", str(msgs), "-o", str(back))
    assert r.returncode == 0, r.stderr
    events = [orjson.loads(x) for x in back.read_bytes().splitlines()]
    src = [orjson.loads(x) for x in EXAMPLE.read_bytes().splitlines()]
    assert [e["kind"] for e in events] == [e["kind"] for e in src]
    assert [e["commitTs"] for e in events] == [e["commitTs"] for e in src]
    first_insert = next(e for e in events if e["kind"] == "insert")
    orig = next(e for e in src if e["kind"] == "insert")
    # the stream's CREATE TABLE tells the decoder what canal-json leaves out: the whole row comes back
    assert first_insert["after"] == orig["after"]
    assert first_insert["table"]["columns"][3]["mysqlType"] == "enum('new','paid','shipped','cancelled')"

    # without the DDL, only canal-json's own facts: enum and set as index and bitmask
    dml_only = b"\n".join(line for line in msgs.read_bytes().splitlines() if b'isDdl\\":true' not in line)
    r = cli("decode", stdin=dml_only)
    assert r.returncode == 0, r.stderr
    first = orjson.loads(r.stdout.splitlines()[0])
    assert first["after"]["status"] == 1 and first["after"]["tags"] == 3
    assert first["table"]["columns"][3]["mysqlType"] == "enum"


def test_stdin_stdout_and_fixed_build_ts():
    line = (CANAL_GOLDEN / "spec_watermark.events.jsonl").read_bytes()
    r = cli("encode", "--option", "enable-tidb-extension=true", "--build-ts", "1640007050284", stdin=line)
    assert r.returncode == 0, r.stderr
    [msg] = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert orjson.loads(msg["value"]) == orjson.loads((CANAL_GOLDEN / "spec_watermark.json").read_bytes())


def test_watermark_without_extension_gives_no_message():
    line = (CANAL_GOLDEN / "spec_watermark.events.jsonl").read_bytes()
    r = cli("encode", stdin=line)
    assert r.returncode == 0 and r.stdout == b""
    assert b"encoded 1 events into 0" in r.stderr


def test_unknown_protocol_and_option_are_rejected():
    r = cli("encode", "-p", "canal-xml", stdin=b"")
    assert r.returncode == 1 and b"unknown protocol 'canal-xml'" in r.stderr
    # as TiCDC: an option it does not know, or one of another protocol, is taken and ignored, with a warning
    r = cli("encode", "--option", "enable-tidb-extensions=true", stdin=b"")
    assert r.returncode == 0 and b"option enable-tidb-extensions is not a codec option" in r.stderr
    r = cli("encode", "--option", "avro-decimal-handling-mode=string", stdin=b"")
    assert r.returncode == 0 and b"avro-decimal-handling-mode is ignored for protocol canal-json" in r.stderr
    r = cli("encode", "--option", "enable-tidb-extension=maybe", stdin=b"")
    assert r.returncode == 1 and b"expected true or false" in r.stderr
    # one line, no traceback, unless asked
    assert len(r.stderr.strip().splitlines()) == 1 and b"Traceback" not in r.stderr


def test_bad_event_line_names_line_and_field(tmp_path: Path):
    good = EXAMPLE.read_bytes().splitlines()
    bad = orjson.loads(good[2])
    bad["after"]["customer_id"] = "forty-two"
    data = b"\n".join([good[0], good[1], orjson.dumps(bad)]) + b"\n"
    r = cli("encode", stdin=data)
    assert r.returncode == 1
    assert b"line 3" in r.stderr and b"after.customer_id" in r.stderr and b"forty-two" in r.stderr


def test_decode_errors_skip_with_dead_letter(tmp_path: Path):
    enc = cli("encode", "-i", str(EXAMPLE))
    assert enc.returncode == 0
    lines = enc.stdout.splitlines()
    broken = orjson.loads(lines[2])
    broken["value"] = broken["value"].replace('"type":"INSERT"', '"type":"UPSERT"')
    truncated = lines[3][:40]
    feed = b"\n".join([lines[0], lines[1], orjson.dumps(broken), truncated, *lines[4:]]) + b"\n"
    dead = tmp_path / "dead.jsonl"

    r = cli("decode", stdin=feed)  # default: fail on the first bad message
    assert r.returncode == 1
    assert b"line 3" in r.stderr and b"field type" in r.stderr and b"UPSERT" in r.stderr

    r = cli("decode", "--errors", "skip", "--dead-letter", str(dead), stdin=feed)
    assert r.returncode == 0, r.stderr
    rejected = [orjson.loads(x) for x in dead.read_bytes().splitlines()]
    assert [d["line"] for d in rejected] == [3, 4]
    assert rejected[0]["field"] == "type" and rejected[0]["offset"] is not None
    assert rejected[1]["offset"] is not None  # where the JSON broke
    # nothing lost: every rejected line is kept verbatim
    assert rejected[0]["input"].encode() == orjson.dumps(broken)
    assert rejected[1]["input"].encode() == truncated
    decoded = r.stdout.splitlines()
    assert len(decoded) == len(lines) - 2
    assert b"2 rejected" in r.stderr


def test_debug_shows_traceback():
    r = cli("encode", "--option", "enable-tidb-extension=maybe", "--debug", stdin=b"")
    assert r.returncode == 1 and b"Traceback" in r.stderr


def test_roundtrip(tmp_path: Path):
    env = dict(os.environ, COLUMNS="200")
    r = subprocess.run([sys.executable, "-m", "changefeed.cli", "roundtrip", "--out", str(tmp_path)],
                       capture_output=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert b"round trip" in r.stdout and b"8 events equal after decoding" in r.stdout  # watermarks need _tidb
    assert (tmp_path / "canal-json.messages.jsonl").exists()


def test_simple_protocol_end_to_end_and_unresolved_dml_go_to_dead_letter(tmp_path: Path):
    for fmt in ("json", "avro"):
        r = cli("encode", "-p", "simple", "--option", f"encoding-format={fmt}", "-i", str(EXAMPLE))
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        back = cli("decode", "-p", "simple", "--option", f"encoding-format={fmt}", stdin=r.stdout)
        assert back.returncode == 0, back.stderr
        kinds = [orjson.loads(x)["kind"] for x in back.stdout.splitlines()]
        assert kinds.count("bootstrap") == 1 and kinds.count("insert") == 3  # before the first DML only
    # a consumer that never sees a schema: at the end the waiting DML are an error, or dead letters
    enc = cli("encode", "-p", "simple", "-i", str(EXAMPLE))
    dml = b"\n".join(x for x in enc.stdout.splitlines() if b'\\"type\\":\\"INSERT' in x) + b"\n"
    r = cli("decode", "-p", "simple", stdin=dml)
    assert r.returncode == 1 and b"never got their schema" in r.stderr
    dead = tmp_path / "dead.jsonl"
    r = cli("decode", "-p", "simple", "--errors", "skip", "--dead-letter", str(dead), stdin=dml)
    assert r.returncode == 0 and r.stdout == b""
    kept = [orjson.loads(orjson.loads(x)["input"])["value"] for x in dead.read_bytes().splitlines()]
    assert len(kept) == 3 and all('"type":"INSERT"' in v for v in kept)
    assert lines  # the avro run produced messages too


def test_avro_cli_encode_decode_and_schema(schema_registry_url, tmp_path: Path):
    opt = ["--option", f"schema-registry={schema_registry_url}", "--option", "enable-tidb-extension=true"]
    r = cli("encode", "-p", "avro", *opt, "--topic", "cli_{schema}_{table}", "-i", str(EXAMPLE))
    assert r.returncode == 0, r.stderr
    msgs = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert {m["topic"] for m in msgs} == {"cli_shop_orders"}
    assert all(m["value"] is None or m["value"]["$b64"] for m in msgs)  # binary: base64 in message lines
    back = cli("decode", "-p", "avro", *opt, stdin=r.stdout)
    assert back.returncode == 0, back.stderr
    kinds = [orjson.loads(x)["kind"] for x in back.stdout.splitlines()]
    assert kinds == ["insert", "insert", "update", "delete", "insert"]
    # no registry needed to see the schemas
    s = cli("schema", "-p", "avro", "-i", str(EXAMPLE))
    assert s.returncode == 0, s.stderr
    tables = [orjson.loads(x) for x in s.stdout.splitlines()]
    assert [(t["schema"], t["table"]) for t in tables] == [("shop", "orders"), ("shop", "orders")]
    assert tables[0]["key"]["fields"][0]["name"] == "id"
    assert len(tables[1]["value"]["fields"]) == len(tables[0]["value"]["fields"]) + 1  # after ADD COLUMN
    bad = cli("encode", "-p", "avro", *opt, "--topic", "everything", "-i", str(EXAMPLE))
    assert bad.returncode == 1 and b"must contain {schema} and {table}" in bad.stderr
    missing = cli("encode", "-p", "avro", "-i", str(EXAMPLE))
    assert missing.returncode == 1 and b"needs a schema registry" in missing.stderr
