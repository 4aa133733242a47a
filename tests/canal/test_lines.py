"""The CLI's direct canal-json line paths (canal/lines.py) against the full path: the same bytes, line for line.

Each input goes through `encode_lines` / `decode_lines` twice, with the direct path and without it; the outputs
must be equal, and the direct path must have taken most row lines (else it would be tested for nothing)."""

from __future__ import annotations

import io
import random
from pathlib import Path

import orjson
import pytest

from changefeed.canal.lines import LineDecoder, LineEncoder
from changefeed.cliio import DeadLetter
from changefeed.codecs import make_decoder, make_encoder
from changefeed.eventline import EventReader, EventWriter, read_lines
from changefeed.linecodec import decode_lines, encode_lines
from changefeed.model import Column, Event, Index, Kind, TableInfo

TESTS = Path(__file__).resolve().parent.parent
CLOCK = 1_795_000_000_123

ORDERS = TableInfo("shop", "orders", [
    Column("id", "bigint(20)", nullable=False, primary_key=True),
    Column("small", "tinyint(4)"),
    Column("account", "bigint(20) unsigned"),
    Column("amount", "decimal(12,2)"),
    Column("bare", "decimal"),
    Column("name", "varchar(64)"),
    Column("created_at", "datetime(3)"),
    Column("updated_at", "timestamp(6)"),
    Column("plain_dt", "datetime"),
    Column("payload", "blob"),
    Column("attrs", "json"),
    Column("status", "enum('new','paid','<b>&amp','')"),
    Column("note", "text"),
], [Index("PRIMARY", ["id"], primary=True, unique=True)], 100, 1)
# a table of types without a pattern (the parsed-row tier) and one without a primary key
OTHER = TableInfo("shop", "other", [
    Column("k", "int(11) unsigned", nullable=False, primary_key=True),
    Column("f", "float"), Column("d", "double"), Column("day", "date"), Column("t", "time(2)"),
    Column("y", "year"), Column("s", "set('a','b','c')"), Column("bits", "bit(9)"), Column("bin", "binary(4)"),
], [Index("PRIMARY", ["k"], primary=True, unique=True)])
NOKEY = TableInfo("shop", "nokey", [Column("a", "int"), Column("b", "varchar(10)")])

TEXTS = ["", "plain", "first <order> & co", 'quote " and \\ backslash', "tab\tnew\nline\b\f", "\x01\x1f\x7f",
         "caf\u00e9 \u2028 \u2029 \U0001f600", "</script>", "\\b not a backspace"]


def _orders_row(rnd: random.Random, i: int) -> dict:
    return {
        "id": i, "small": rnd.choice([None, -128, 127, 5]), "account": rnd.choice([0, 1 << 63, (1 << 64) - 1, 7]),
        "amount": rnd.choice(["12.34", "0.00", "999.5", "-3.10", "-0.00", "1.005", "9999999999.99", "00.10"]),
        "bare": rnd.choice(["1.5", "-2", "3.1415926535"]),
        "name": rnd.choice(TEXTS),
        "created_at": rnd.choice(["2026-11-27 12:34:56.123", "2026-11-27 12:34:56.1239", "2026-11-27T12:34:56.123",
                                  "2026-11-27 23:59:59.9999"]),
        "updated_at": rnd.choice(["2026-11-27 12:34:56.123456", "2026-11-27 12:34:56", None]),
        "plain_dt": rnd.choice(["2026-01-02 03:04:05", "2026-01-02 03:04:05.5"]),
        "payload": rnd.choice([None, rnd.randbytes(24), b"", b"<&>\x08\x0c\\\"", bytes(range(256))]),
        "attrs": rnd.choice(['{"k": "v"}', '{"a": [1, 2.5, null]}', None]),
        "status": rnd.choice([1, 2, 3, 4, 0, None]),
        "note": rnd.choice(TEXTS + [None]),
    }


def _events(n: int = 300) -> list[Event]:
    rnd = random.Random(7)
    out: list[Event] = []
    ts = 429918007904436226
    for i in range(n):
        ts += 1 << 18
        kind = rnd.choice([Kind.INSERT] * 6 + [Kind.UPDATE, Kind.DELETE])
        table = rnd.choice([ORDERS] * 6 + [OTHER, NOKEY])
        if table is ORDERS:
            before, after = _orders_row(rnd, i), _orders_row(rnd, i)
        elif table is OTHER:
            before = after = {"k": i, "f": 1.5, "d": 0.1, "day": "2026-11-27", "t": "12:00:00.25", "y": 2026,
                              "s": 5, "bits": 3, "bin": b"ab"}
        else:
            before, after = {"a": i, "b": "x"}, {"a": i, "b": "y"}
        out.append(Event(kind, ts, table, None, None if kind is Kind.INSERT else before,
                         None if kind is Kind.DELETE else after))
        if i == n // 2:
            out.append(Event(Kind.DDL, ts, ORDERS, None, query="ALTER TABLE orders COMMENT 'x'",
                             ddl_type="ActionModifyTableComment"))
    return out


def _event_lines() -> bytes:
    writer = EventWriter()
    lines = [writer.line(ev) for ev in _events()]
    # lines of other layouts and bad lines: the full path takes (or rejects) them
    extra = [lines[3].replace(b'"kind":"insert"', b'"kind": "insert"'),
             lines[5].replace(b',"ddl":null}', b',"ddl":null,"position":{"file":"x"}}'),
             lines[7].replace(b'"id":7', b'"id":"7"') if b'"id":7' in lines[7] else lines[7],
             lines[9].replace(b'"small":', b'"small":300,"x":') if b'"small":' in lines[9] else lines[9]]
    golden = [line for p in sorted((TESTS / "canal" / "golden").glob("*.events.jsonl"))
              for line in p.read_bytes().splitlines()]
    return b"\n".join(lines + extra + golden) + b"\n"


def _encode(opts: dict[str, str], data: bytes, direct: bool, cfg) -> bytes:
    out = io.BytesIO()
    enc = make_encoder(cfg(**opts), clock_ms=lambda: CLOCK)
    encode_lines(enc, read_lines(io.BytesIO(data)), out, lambda n: None, "skip", DeadLetter(None), direct=direct)
    return out.getvalue()


def _decode(opts: dict[str, str], data: bytes, direct: bool, cfg) -> bytes:
    out = io.BytesIO()
    dec = make_decoder(cfg(**opts))
    decode_lines(dec, read_lines(io.BytesIO(data)), out, lambda n: None, "skip", DeadLetter(None), direct=direct)
    return out.getvalue()


OPTIONS = [
    {"enable_tidb_extension": "true"},
    {},
    {"enable_tidb_extension": "true", "content_compatible": "true"},
    {"enable_tidb_extension": "true", "only_output_updated_columns": "true",
     "delete_only_output_handle_key_columns": "true"},
    {"enable_tidb_extension": "true", "max_message_bytes": "1500", "large_message_handle_option": "handle-key-only"},
]


@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: ",".join(o) or "defaults")
def test_direct_paths_write_what_the_full_path_writes(cfg, opts):
    events = _event_lines()
    messages = _encode(opts, events, False, cfg)
    assert _encode(opts, events, True, cfg) == messages
    assert messages.count(b"\n") > 300
    back = _decode(opts, messages, False, cfg)
    assert _decode(opts, messages, True, cfg) == back
    assert back.count(b"\n") > 300


def test_tidb_shaped_messages_decode_alike(cfg):
    """Messages as TiCDC writes them: mysqlType in another order (a Go map), no `_tidb`, `old` a copy of data
    (before v5.4), official Canal's batches and number values; and messages of a later table definition."""
    messages = _encode({}, _event_lines(), False, cfg).splitlines()
    variants = []
    for line in messages:
        value = orjson.loads(orjson.loads(line)["value"])
        if value.get("mysqlType") and value["type"] in ("INSERT", "DELETE"):
            reordered = dict(value, mysqlType=dict(reversed(value["mysqlType"].items())))
            variants.append(reordered)
            variants.append(dict(value, old=value["data"]))
            variants.append(dict(value, data=value["data"] * 2))
            variants.append(dict(value, es=1 << 50))
            variants.append(dict(value, _tidb={"commitTs": 5, "onlyHandleKey": False}))
    data = b"\n".join(messages + [orjson.dumps({"key": None, "value": orjson.dumps(v).decode()}) for v in variants])
    assert _decode({}, data, True, cfg) == _decode({}, data, False, cfg)


def test_the_direct_paths_take_the_common_rows(cfg):
    """Rows of a known table take the direct path (the first of each table, and anything unusual, do not)."""
    rnd = random.Random(3)
    writer = EventWriter()
    def stored(i: int) -> dict:  # values as the table holds them (the ones _orders_row rounds left out)
        return {**_orders_row(rnd, i), "amount": rnd.choice(["12.34", "0.00", "9999999999.99"]),
                "created_at": "2026-11-27 12:34:56.123", "plain_dt": "2026-01-02 03:04:05",
                "updated_at": "2026-11-27 12:34:56.123456", "status": rnd.choice([1, 2, 3, None])}

    lines = [writer.line(Event(Kind.INSERT, 1 << 40 | i, ORDERS, None, None, stored(i))) for i in range(200)]
    reader = EventReader()
    reader.parse(lines[0])
    enc = make_encoder(cfg(enable_tidb_extension="true"), clock_ms=lambda: CLOCK)
    direct = LineEncoder(enc, reader.tables_by_text)  # type: ignore[arg-type]
    encoded = [direct.line(line) for line in lines]
    assert sum(m is not None for m in encoded) > 150
    tiers = direct._last
    assert tiers is not None and tiers.row_re is not None  # the pattern tier exists for this table
    dec = make_decoder(cfg(enable_tidb_extension="true"))
    first = next(m for m in encoded if m is not None)
    from changefeed.eventline import message_from_line

    dec.decode(message_from_line(first).value)
    back = LineDecoder(dec.inner)  # type: ignore[attr-defined]
    decoded = [back.line(m) for m in encoded if m is not None]
    assert sum(d is not None for d in decoded) > 150
    assert any(p is not None for p in back._patterns.values())
    # and the pattern tier, past the first message of the table, takes them
    values = [orjson.loads(m[20:-1]) for m in encoded if m is not None]
    assert sum(back._matched(v) is not None for v in values) > 150
    rows = [orjson.loads(line[line.find(b',"after":') + 9:-12]) for line in lines]
    assert sum(tiers.row_re.fullmatch(orjson.dumps(r)) is not None for r in rows) > 150
