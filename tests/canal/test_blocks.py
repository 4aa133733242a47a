"""The CLI's block tiers (canal/blocks.py, canal/blockdecode.py) against the full path: the same bytes.

Runs of row lines of one table, with odd values (nulls, unicode, escapes, U+2028, big and out-of-range integers,
enums, decimals and datetimes at and off their scale, binary), go through `encode_lines` / `decode_lines` with
the direct tiers and without them, read whole and in small pieces (a block boundary inside a line); the outputs
must be equal, and the block tiers must have taken the runs (else they would be tested for nothing)."""

from __future__ import annotations

import io
import random
import re

import orjson
import pytest

from changefeed.canal.blockdecode import BlockDecoder
from changefeed.canal.blocks import BlockEncoder, _possessive, check_range
from changefeed.canal.lines import LineDecoder, LineEncoder
from changefeed.codecs import make_decoder, make_encoder
from changefeed.errors import ChangefeedError
from changefeed.eventline import EventReader, EventWriter, LineSource, message_from_line, read_lines
from changefeed.linecodec import decode_lines, encode_lines
from changefeed.linefiles import DeadLetter
from changefeed.model import Event, Kind
from tests.canal.test_lines import CLOCK, OPTIONS, ORDERS, TEXTS, _event_lines, _orders_row


class Pieces(io.BytesIO):
    """A stream that gives at most `size` bytes a read, as a pipe may (block boundaries fall inside lines)."""

    def __init__(self, data: bytes, size: int) -> None:
        super().__init__(data)
        self.size = size

    def read1(self, n: int = -1) -> bytes:  # type: ignore[override]
        return super().read1(min(self.size, n if n > 0 else self.size))


def _stored(rnd: random.Random, i: int) -> dict:
    """A row as the table holds it (values the block patterns take), odd ones included."""
    return {**_orders_row(rnd, i),
            "id": rnd.choice([i, -i, (1 << 63) - 1 - i]), "small": rnd.choice([None, -128, 127, 0]),
            "account": rnd.choice([0, 7, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, None]),
            "amount": rnd.choice(["12.34", "0.00", "9999999999.99", None]),
            "created_at": rnd.choice(["2026-11-27 12:34:56.123", "2026-02-28 00:00:00.000", None]),
            "plain_dt": rnd.choice(["2026-01-02 03:04:05", "2026-01-02 03:04:05.5"]),
            "updated_at": rnd.choice(["2026-11-27 12:34:56.123456", None]),
            "status": rnd.choice([1, 2, 3, None]),
            "name": rnd.choice(TEXTS + ["\u00e9\u00e8 <&> \u2028", 'a "quoted" \\ word', ""])}


def _run(n: int = 400, seed: int = 11, deletes: bool = True) -> list[bytes]:
    rnd = random.Random(seed)
    writer = EventWriter()
    out = []
    for i in range(n):
        kind = Kind.DELETE if deletes and rnd.random() < 0.2 else Kind.INSERT
        row = _stored(rnd, i)
        out.append(writer.line(Event(kind, 429918007904436226 + (i << 18), ORDERS, None,
                                     row if kind is Kind.DELETE else None, None if kind is Kind.DELETE else row)))
    return out


def _lines() -> bytes:
    """A run of one table, the mixed lines of test_lines.py (other tables, a DDL, odd layouts, TiCDC's golden
    lines), the run again, and lines the block tier must leave (an integer out of range, an update, a blank)."""
    run = _run()
    odd = [run[5].replace(b'"small":', b'"small":300,"x":') if b'"small":' in run[5] else run[5],
           run[6].replace(b'"amount":"', b'"amount":"1'), b"", b"   " + run[7],
           run[8].replace(b'"kind":"insert"', b'"kind":"update"')]
    return b"\n".join(run[:200] + [_event_lines()] + odd + run[200:]) + b"\n"


def _encode(opts: dict, data: bytes, direct: bool, cfg, piece: int | None = None) -> bytes:
    out = io.BytesIO()
    enc = make_encoder(cfg(**opts), clock_ms=lambda: CLOCK)
    stream = io.BytesIO(data) if piece is None else Pieces(data, piece)
    encode_lines(enc, read_lines(stream), out, lambda n: None, "skip", DeadLetter(None), direct=direct)
    return out.getvalue()


def _decode(opts: dict, data: bytes, direct: bool, cfg, piece: int | None = None) -> tuple[bytes, object]:
    out = io.BytesIO()
    dec = make_decoder(cfg(**opts))
    stream = io.BytesIO(data) if piece is None else Pieces(data, piece)
    got = decode_lines(dec, read_lines(stream), out, lambda n: None, "skip", DeadLetter(None), direct=direct)
    return out.getvalue(), got


@pytest.mark.parametrize("piece", [None, 3000], ids=["whole", "pieces"])
@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: ",".join(o) or "defaults")
def test_block_tiers_write_what_the_full_path_writes(cfg, opts, piece):
    events = _lines()
    messages = _encode(opts, events, False, cfg)
    assert _encode(opts, events, True, cfg, piece) == messages
    assert messages.count(b"\n") > 650
    back, counts = _decode(opts, messages, False, cfg)
    got, got_counts = _decode(opts, messages, True, cfg, piece)
    assert got == back and got_counts == counts


def test_the_block_tiers_take_the_runs(cfg):
    """A run of a known table is taken by one pass, both ways; a line the pattern refuses is left, in place."""
    run = _run(300)
    reader = EventReader()
    reader.parse(run[0])
    enc = make_encoder(cfg(enable_tidb_extension="true"), clock_ms=lambda: CLOCK)
    le = LineEncoder(enc, reader.tables_by_text)  # type: ignore[arg-type]
    first = le.line(run[0])
    assert first is not None or le._last is not None
    tier = BlockEncoder(le)
    whole, each, n, _ = tier.block(b"\n".join(run[1:]))
    assert whole is not None and each is None and n == 299
    messages = whole.splitlines()
    assert messages == [le.line(line) for line in run[1:]]  # the per-line tier's bytes
    bad = run[1:]
    bad[10] = bad[10].replace(b'"kind":"insert"', b'"kind":"update"').replace(b'"kind":"delete"', b'"kind":"update"')
    whole, each, n, _ = tier.block(b"\n".join(bad))
    assert whole is None and each is not None and n == 299
    assert each[10] is None and sum(m is None for m in each) == 1 and each[11] == messages[11]

    dec = make_decoder(cfg(enable_tidb_extension="true"))
    dec.decode(message_from_line(messages[0]).value)
    ld = LineDecoder(dec.inner)  # type: ignore[attr-defined]
    assert ld.line(messages[0]) is not None
    btier = BlockDecoder(ld)
    whole, each, n, inserts = btier.block(b"\n".join(messages[1:]))
    assert whole is not None and n == 298
    assert whole.splitlines() == [ld.line(m)[1] for m in messages[1:]]  # type: ignore[index]
    assert inserts == sum(m.startswith(b'{"key":null,"value":"{\\"id\\":0') and b'\\"INSERT\\"' in m
                          for m in messages[1:])
    # a message of another layout in the block is left to the per-line tiers, the rest taken
    value = orjson.loads(orjson.loads(messages[5])["value"])
    odd = orjson.dumps({"key": None, "value": orjson.dumps(dict(value, old=value["data"])).decode()})
    whole, each, n, _ = btier.block(b"\n".join(messages[1:5] + [odd] + messages[6:]))
    assert each is not None and each[4] is None and sum(m is None for m in each) == 1


def test_line_numbers_and_blocks_of_the_source(cfg):
    """Blocks are whole lines, in order, however the stream cuts them; an error names the line it is on."""
    data = b"\n".join(_run(120)) + b"\n"
    blocks = list(LineSource(Pieces(data, 777)).blocks())  # type: ignore[union-attr]
    assert b"\n".join(blocks) + b"\n" == data
    lines = data.splitlines()
    lines[77] = lines[77].replace(b'"commitTs":', b'"commitTs":"x",')
    enc = make_encoder(cfg(), clock_ms=lambda: CLOCK)
    with pytest.raises(ChangefeedError, match="line 78"):
        encode_lines(enc, read_lines(Pieces(b"\n".join(lines), 5000)), io.BytesIO(), lambda n: None, "fail",
                     DeadLetter(None))


# values the decode block pattern reads up to a backslash and so lets by, each making its line not JSON (or not
# UTF-8), and blob texts past latin-1 (one the very character that joins a blob column's texts): the column
# checks must hand the line back, and the full path decides (same output, same dead letters)
_NOT_JSON = [(b'\\"payload\\":\\"', b'\\"payload\\":\\"\xc4\x80'),
             (b'\\"payload\\":\\"', b'\\"payload\\":\\"\\\\u2028'),
             (b'\\"payload\\":\\"', b'\\"payload\\":\\"\xe2\x80\xa8'),
             (b'\\"name\\":\\"', b'\\"name\\":\\"a"b'),  # a raw quote
             (b'\\"name\\":\\"', b'\\"name\\":\\"a\\\\\\\\"'),  # a raw quote after an escaped backslash
             (b'\\"note\\":\\"', b'\\"note\\":\\"\t'),  # a raw control character
             (b'\\"name\\":\\"', b'\\"name\\":\\"a\nb'),  # a line's end inside a value
             (b'\\"payload\\":\\"', b'\\"payload\\":\\"\x01'),
             (b'\\"payload\\":\\"', b'\\"payload\\":\\"a"b'),
             (b'\\"payload\\":\\"', b'\\"payload\\":\\"\xff'),
             (b'\\"name\\":\\"', b'\\"name\\":\\"\xc3('),
             (b'\\"sqlType\\":{', b'\\"sqlType\\":{\n'),
             (b'\\"sqlType\\":{', b'\\"sqlType\\":{\\"x\\":{},'),
             (b'\\"sqlType\\":{', b'\\"sqlType\\":{"x":1,')]


def test_decode_blocks_hand_back_lines_that_are_not_json(cfg, tmp_path):
    opts = {"enable_tidb_extension": "true"}
    messages = _encode(opts, b"\n".join(_run(360, deletes=False)) + b"\n", False, cfg).splitlines()
    changed = 0
    for k, (old, new) in enumerate(_NOT_JSON * 2):
        at = 20 + 12 * k
        # the row's value (the last of the name), not empty
        while old not in messages[at] or messages[at][messages[at].rfind(old) + len(old):].startswith(b'\\",'):
            at += 1
        i = messages[at].rfind(old)
        messages[at] = messages[at][:i] + new + messages[at][i + len(old):]
        changed += 1
    data = b"\n".join(messages) + b"\n"
    got = []
    for direct in (False, True):
        dead = tmp_path / f"dead-{direct}.jsonl"
        letters = DeadLetter(dead)
        out = io.BytesIO()
        counts = decode_lines(make_decoder(cfg(**opts)), read_lines(Pieces(data, 60_000)), out, lambda n: None,
                              "skip", letters, direct=direct)
        letters.close()
        got.append((out.getvalue(), counts, dead.read_bytes()))
    assert got[1] == got[0]
    assert got[0][2].count(b"\n") >= changed  # each changed line (or both halves of a cut one) rejected
    with pytest.raises(ChangefeedError, match="line 21"):
        decode_lines(make_decoder(cfg(**opts)), read_lines(io.BytesIO(data)), io.BytesIO(), lambda n: None, "fail",
                     DeadLetter(None))


@pytest.mark.parametrize(("hi", "values", "null", "out"), [
    ((1 << 32) - 1, [b"10000000000", b"5"], b"", {0}),  # longer than the top: not compared as text
    ((1 << 32) - 1, [b"4294967295", b"4294967296", b"null"], b"null", {1}),
    ((1 << 64) - 1, [b"18446744073709551615", b"18446744073709551616", b"", b"9"], b"", {1}),
    (255, [b"null", b"256", b"255"], b"null", {1}),
    (65535, [b"null", b"65535", b"0"], b"null", set()),
])
def test_check_range_of_unsigned_columns(hi, values, null, out):
    bad: set[int] = set()
    check_range(values, 0, hi, len(str(hi)) - 1, bad, null)
    assert bad == out


@pytest.mark.parametrize(("pattern", "want"), [
    (rb"a{2}b", rb"a{2}+b"), (rb"(?:x|y)?z", rb"(?:x|y)?+z"), (rb"[a-z]*?q", rb"[a-z]*?q"),
    (rb"\{\$b64\}", rb"\{\$b64\}"), (rb"[]a]+", rb"[]a]++"), (rb"[^]{]{1,3}", rb"[^]{]{1,3}+"), (rb"a++b", rb"a++b"),
    (rb"(?P<n>-?[0-9]+(?:\.[0-9]+)?)", rb"(?P<n>-?+[0-9]++(?:\.[0-9]++)?+)"),
])
def test_possessive_quantifiers(pattern, want):
    """The encode block pattern's quantifiers made possessive: classes, escapes, group openings and marks kept."""
    assert _possessive(pattern) == want
    assert re.compile(want).findall(b"aab zz -1.50 x") == re.compile(pattern).findall(b"aab zz -1.50 x")
