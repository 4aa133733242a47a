"""canal-json message lines to event lines a block at a time (the decode side of canal/blocks.py).

A message line holds its canal-json message as a JSON string; a row message of a table the per-line tiers
already decoded (canal/lines.py learnt its layout: the constant text, the columns in the messages' order) is
matched in that escaped form, one regular-expression pass over a whole block of lines, and each column's values
are rewritten together by C-level calls: quotes and escapes undone by bytes.replace over the joined column, Go's
escapes turned into orjson's, enum numbers to names by a dict, latin-1 text to base64 through one orjson parse of
the column. Only escapes whose rewrite is known are let through by the pattern; any other line (and any value a
check refuses) is handed back, in place, for the per-line tiers. Pure functions of bytes, no I/O.
"""

from __future__ import annotations

import binascii
import re
from codecs import escape_decode  # type: ignore[attr-defined]
from collections.abc import Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any

import orjson

from .. import gojson
from ..mysqltypes import Family
from ..mysqltypes.text import _as_text
from ..tso import PHYSICAL_SHIFT
from .blocks import BlockResult, _check_utf8, check_range, match_block, placed_lines
from .rowtext import _HMS, _YMD, _int_digits, escaped

if TYPE_CHECKING:
    from .lines import LineDecoder, _Layout

_NUL = b"\x00"
_Q = re.escape(b'\\"')  # a quote inside the message line's `value` string
# a JSON string's content as Go writes it, inside the `value` string: raw characters, and the escapes whose
# orjson form is known (Go's \u003c \u003e \u0026 \u2028 \u2029 \u0008 \u000c are rewritten, the rest kept)
# (raw characters read up to the next backslash: one byte compare each, where a class of bytes costs ~4 ns a byte;
# a raw quote or control character is looked for in the column after, `_raw_ok`)
_RAW = rb"[^\\]*+"
_CTRL_QUOTE = bytes(range(32)) + b'"'
_ESCAPE = (re.escape(b"\\\\") + rb"(?:" + re.escape(b'\\"') + rb"|" + re.escape(b"\\\\")
           + rb"|[nrtbf]|u00(?:0[0-8bcef]|1[0-9a-f]|26|3c|3e)|u202[89])")
_CONTENT = _RAW + rb"(?:" + _ESCAPE + _RAW + rb")*+"
_GO_TO_ORJSON = [(b"\\u003c", b"<"), (b"\\u003e", b">"), (b"\\u0026", b"&"), (b"\\u2028", "\u2028".encode()),
                 (b"\\u2029", "\u2029".encode()), (b"\\u0008", b"\\b"), (b"\\u000c", b"\\f")]
# a sqlType object inside the `value` string
# (the block pattern reads `\{[^}]*+\}`, one byte compare each, and each text once is held to this)
_SQL_TYPE = re.compile(rb'\{[^{}"\\\x00-\x1f]*+(?:' + _Q + rb'[^{}"\\\x00-\x1f]*+)*+\}')
_U64_DIGITS = len(str((1 << 64) - 1))


def _unquoted(joined: bytes) -> bytes:
    """A joined column's text out of the `value` string: its `\\\\` and `\\"` undone (left to right)."""
    if b"\\" not in joined:
        return joined
    return joined.replace(b"\\\\", b"\x01").replace(b'\\"', b'"').replace(b"\x01", b"\\")


def _orjson_escapes(joined: bytes) -> bytes:
    """JSON strings as Go writes them, as orjson writes them (for the escapes _CONTENT lets through)."""
    if b"\\u" not in joined:  # (\b \f \n \r \t \" \\ are orjson's too)
        return joined
    out = joined.replace(b"\\\\", b"\x01")
    for go, ours in _GO_TO_ORJSON:
        out = out.replace(go, ours)
    return out.replace(b"\x01", b"\\\\")


class _Column:
    __slots__ = ("kind", "safe", "lo", "hi", "names")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.safe, self.lo, self.hi = 0, 0, 0
        self.names: dict[bytes, bytes] = {}


def _column(c: Any, parse: Any) -> tuple[bytes, _Column] | None:
    """A column's value pattern inside the `value` string, one group (the text without its quotes for numbers,
    dates and enums: empty for null; with them for strings, or `null`), and its rewrite; None: no block path
    (rowtext.decode_row_pattern's column types, in its order)."""
    fam = c.type.family
    if fam is Family.INT:
        col = _Column("int")
        col.lo, col.hi = c.type.int_range()
        _, col.safe = _int_digits(col.lo, col.hi)
        digits = rb"(0|-?+[1-9][0-9]{0,19}+)" if col.lo < 0 else rb"(0|[1-9][0-9]{0,19}+)"
        return rb"(?:null|" + _Q + digits + _Q + rb")", col
    if fam is Family.ENUM:
        col = _Column("enum")
        if c.type.elements:
            col.names = {b"%d" % n: orjson.dumps(e) for n, e in enumerate(("",) + c.type.elements)}
        col.names[b""] = b"null"
        return rb"(?:null|" + _Q + rb"(0|[1-9][0-9]{0,18}+)" + _Q + rb")", col
    if fam in (Family.STRING, Family.JSON, Family.VECTOR) and parse is _as_text:
        return rb"(null|" + _Q + _CONTENT + _Q + rb")", _Column("text")
    if fam is Family.BYTES:
        return rb"(null|" + _Q + _CONTENT + _Q + rb")", _Column("blob")
    if fam is Family.DECIMAL:
        return rb"(?:null|" + _Q + rb"(-?+[0-9]++(?:\.[0-9]++)?+)" + _Q + rb")", _Column("plain")
    if fam in (Family.DATETIME, Family.TIMESTAMP):
        return rb"(?:null|" + _Q + f"({_YMD} {_HMS}(?:\\.[0-9]{{1,6}}+)?+)".encode() + _Q + rb")", _Column("plain")
    return None


class BlockDecodePlan:
    """One table's block pattern and the constant pieces of its event lines."""

    def __init__(self, layout: _Layout) -> None:
        shape, head, mid, _, _, table, key = layout
        self.layout, self.shape, self.key = layout, shape, key
        self.pattern: re.Pattern[bytes] | None = None
        cols: list[_Column] = []
        parts: list[bytes] = []
        for name in shape.names:
            got = _column(shape.table.by_name[name], shape.parsers[name])
            if got is None:
                return
            pattern, col = got
            cols.append(col)
            parts.append(re.escape(escaped(gojson.dumps(name)) + b":") + pattern)
        self.cols = cols

        def text(s: str | bytes) -> bytes:
            return re.escape(escaped(s.encode() if isinstance(s, str) else s))

        # the constant texts (the message's head, its mysqlType) are skipped by their length and compared after,
        # as groups (a regular expression compares a literal byte by byte, slower than reading the row)
        self.head_text, self.mid_text = escaped(head.encode()), escaped(mid.encode() + b"{")
        # (every quantifier possessive: none gives back what it read, which spares the engine its backtracking
        # marks, ~15% of the pass)
        # groups: 1 the head, 2 the type, 3 es, 4 sqlType, 5 mysqlType and the rest, then one per column, then the
        # _tidb commitTs
        self.pattern = re.compile(
            rb'(?m)^(?:\{"key":null,"value":"((?s:.{%d}))' % len(self.head_text) + rb"(INSERT|DELETE)"
            + text(b'","es":') + rb"(0|[1-9][0-9]{0,18}+)" + text(b',"ts":') + rb"-?+(?:0|[1-9][0-9]{0,19}+)"
            + text(b',"sql":"","sqlType":') + rb"(\{[^}]*+\})"
            + rb"((?s:.{%d}))" % len(self.mid_text) + b",".join(parts) + re.escape(escaped(b"}]"))
            + rb"(?:" + text(b',"_tidb":{"commitTs":') + rb"(0|[1-9][0-9]{0,19}+)\})?+" + rb'\}"\}|.*+)$')
        keys = [(b"," if i else b"{") + orjson.dumps(name) + b":" for i, name in enumerate(shape.names)]
        self.keys = keys
        self.heads = {b"INSERT": b'{"kind":"insert","commitTs":', b"DELETE": b'{"kind":"delete","commitTs":'}
        self.mids = {b"INSERT": table + b',"preTable":null,"before":null,"after":' + keys[0],
                     b"DELETE": table + b',"preTable":null,"before":' + keys[0]}
        self.tails = {b"INSERT": b'},"ddl":null}\n', b"DELETE": b'},"after":null,"ddl":null}\n'}
        self.sql_types: set[bytes] = set()  # sqlType texts seen to be JSON objects

    def sql_type_ok(self, text: bytes) -> bool:
        """Whether a sqlType text (as in the `value` string) is a JSON object (the decoder reads no more of it)."""
        if text in self.sql_types:
            return True
        try:
            ok = _SQL_TYPE.fullmatch(text) is not None and orjson.loads(_unquoted(text)).__class__ is dict
        except orjson.JSONDecodeError:
            ok = False
        if ok:
            self.sql_types.add(text)
        return ok


def _convert(col: _Column, values: tuple[bytes, ...], bad: set[int]) -> tuple[Sequence[bytes], bytes, bytes]:
    """A column's matched texts (inside the `value` string) as JSON values of an event line, with the constant
    text that goes before and after each (a decimal or datetime column without a null goes out as it was matched,
    its quotes put in the text beside it; so do a blob column's base64 texts and their object)."""
    kind = col.kind
    if kind == "plain":
        if all(values):  # (no null: an empty text; `in` would compare each value)
            return values, b'"', b'"'
        out = (b'"' + b'"\x00"'.join(values) + b'"').split(_NUL)
        return [v if v != b'""' else b"null" for v in out], b"", b""
    if kind == "text":
        joined = _unquoted_column(values, bad, _NUL)
        if not joined.isascii():  # (undoing the escapes keeps UTF-8 as it is)
            _check_utf8(list(values), bad)
        return _orjson_escapes(joined).split(_NUL), b"", b""
    if kind == "int":
        check_range(values, col.lo, col.hi, col.safe, bad, b"")  # type: ignore[arg-type]
        return (values if all(values) else [v or b"null" for v in values]), b"", b""
    if kind == "enum":
        out = list(map(col.names.get, values))
        if not all(out):
            out = [v if v is not None else values[i] for i, v in enumerate(out)]
        return out, b"", b""  # type: ignore[return-value]
    return _blob_column(values, bad)


def _unquoted_raw(joined: bytes, seps: int) -> bytes | None:
    """Joined strings (or nulls) of a column out of the `value` string (as `_unquoted`, in one C pass: the pattern
    lets no other escape than `\\\\` and `\\"` by), or None when one holds a raw control character or a raw
    quote (the pattern reads up to each backslash, and so lets them by: the line is not JSON). `seps`: the NULs
    that join the values. Every backslash left is one that `\\\\` became, so the other escapes undone are the
    quotes that were escaped: the quotes and control characters (one pass deletes both) are those and the NULs
    exactly when there is no raw one."""
    out = escape_decode(joined)[0]
    escaped_quotes = len(joined) - len(out) - out.count(b"\\")
    if len(joined) - len(joined.translate(None, _CTRL_QUOTE)) != escaped_quotes + seps:
        return None
    return out


def _unquoted_column(values: Sequence[bytes], bad: set[int], sep: bytes) -> bytes:
    """A column's strings (or nulls) joined by `sep`, out of the `value` string; a value that is not JSON (see
    `_unquoted_raw`) is marked bad and read as null."""
    seps = len(values) - 1 if sep == _NUL else 0
    out = _unquoted_raw(sep.join(values), seps)
    if out is not None:
        return out
    values = list(values)
    for i, v in enumerate(values):
        if _unquoted_raw(v, 0) is None:
            bad.add(i)
            values[i] = b"null"
    return _unquoted_raw(sep.join(values), seps)  # type: ignore[return-value]


_SEP = "\u0100"  # between a blob column's texts (past latin-1: a text that holds one is refused anyway)


def _blob_texts(values: Sequence[bytes], bad: set[int]) -> list[str | None]:
    """A blob column's latin-1 texts (None for null), by C calls over the column: the `value` string's escapes
    undone (`_unquoted_raw`), then the JSON escapes the pattern lets by (\\", \\\\, \\n \\r \\t \\b \\f, \\uXXXX:
    Python's escapes too) by `unicode_escape`, which reads other bytes as latin-1, so the UTF-8 of the text is
    decoded after. Falls back to one value at a time (orjson) when a value is not JSON, not UTF-8 or past latin-1."""
    sep = _SEP.encode()
    joined = sep.join(values)
    out = _unquoted_raw(joined, 0)
    if out is not None:
        try:
            text = out.decode("unicode_escape").encode("latin-1").decode()
        except UnicodeError:
            text = ""
        if text.count(_SEP) == len(values) - 1:
            if b"null" not in values:
                return text[1:-1].split(f'"{_SEP}"')  # type: ignore[return-value]
            return [None if t == "null" else t[1:-1] for t in text.split(_SEP)]
    texts: list[str | None] = []
    for i, v in enumerate(values):
        got = _unquoted_raw(v, 0)
        try:
            texts.append(None if got is None else orjson.loads(got))
        except orjson.JSONDecodeError:
            got = None
            texts.append(None)
        if got is None:
            bad.add(i)
    return texts


def _blob_column(values: tuple[bytes, ...], bad: set[int]) -> tuple[Sequence[bytes], bytes, bytes]:
    """canal-json's latin-1 text of bytes as the event line's `{"$b64":...}` (see `_convert`)."""
    texts = _blob_texts(values, bad)
    try:
        raw = list(map(str.encode, texts, repeat("latin-1")))  # type: ignore[arg-type]
    except (TypeError, UnicodeEncodeError):  # a null, or a character past latin-1
        raw = []
        for i, t in enumerate(texts):
            try:
                raw.append(b"" if t is None else t.encode("latin-1"))
            except UnicodeEncodeError:
                bad.add(i)
                raw.append(b"")
    # (b2a_base64 ends each text with a newline)
    coded = b"".join(map(binascii.b2a_base64, raw)).splitlines()
    if None not in texts:
        return coded, b'{"$b64":"', b'"}'
    return [b"null" if t is None else b'{"$b64":"' + o + b'"}' for t, o in zip(texts, coded, strict=True)], b"", b""


def decode_block(bp: BlockDecodePlan, block: bytes) -> BlockResult:
    """A block of message lines (joined by newlines, none at the end) as event lines (see BlockResult)."""
    assert bp.pattern is not None
    got = match_block(bp.pattern, block, ((0, bp.head_text), (4, bp.mid_text)))
    if got is None:
        return None, None, 0, 0
    found, columns, bad, everything = got
    m, n = len(columns[0]), len(found)
    types = columns[3]
    if types.count(types[0]) != m or not bp.sql_type_ok(types[0]):  # (most blocks have one: no hashing)
        for text in set(types):
            if not bp.sql_type_ok(text):
                bad.update(i for i, t in enumerate(types) if t == text)
    columns = columns[1:]
    commit = columns[-1]
    if all(commit):
        ts = list(commit)
        if max(map(len, ts)) >= _U64_DIGITS:
            bad.update(i for i, t in enumerate(ts) if int(t) >= 1 << 64)
    else:
        ts = [t if t else b"%d" % (int(es) << PHYSICAL_SHIFT) for t, es in zip(commit, columns[1], strict=True)]
        bad.update(i for i, (t, es) in enumerate(zip(commit, columns[1], strict=True))
                   if not t and int(es) >= 1 << (64 - PHYSICAL_SHIFT))
    kinds = columns[0]
    width = 2 * len(bp.cols) + 3
    parts: list[Any] = [None] * (m * width)
    inserts = kinds.count(b"INSERT")

    def by_kind(pieces: dict[bytes, bytes]) -> list[bytes]:
        """Each row's piece of its kind (a block of inserts: one piece, no lookups)."""
        return [pieces[b"INSERT"]] * m if inserts == m else list(map(pieces.__getitem__, kinds))

    parts[0::width] = by_kind(bp.heads)
    parts[1::width] = ts
    conv = [_convert(col, values, bad) for col, values in zip(bp.cols, columns[4:-1], strict=True)]
    pre, post = conv[0][1], conv[-1][2]
    parts[2::width] = by_kind(bp.mids if not pre else {k: v + pre for k, v in bp.mids.items()})
    at = 3
    for j, (values, pre, _) in enumerate(conv):
        if j:
            parts[at::width] = [conv[j - 1][2] + bp.keys[j] + pre] * m
            at += 1
        parts[at::width] = values
        at += 1
    parts[at::width] = by_kind(bp.tails if not post else {k: post + v for k, v in bp.tails.items()})
    out = b"".join(parts)
    if everything and not bad:
        return out, None, n, inserts
    if block.count(b"\n") + 1 != n:  # a bad value read across a line's end: the lines found are not the block's
        return None, None, 0, 0
    return None, placed_lines(out, bad, found), n, 0


class BlockDecoder:
    """Blocks of message lines through the block tier, for the table of the message the per-line tiers took
    last."""

    def __init__(self, lines: LineDecoder) -> None:
        self._lines = lines
        self._plans: dict[int, BlockDecodePlan] = {}
        self._current: BlockDecodePlan | None = None

    def ready(self) -> bool:
        """Whether a table's layout is known (after a message of it went through the per-line tiers)."""
        return self._lines.last is not None

    def valid(self) -> bool:
        """Whether the lines the last block converted still stand: the decoder's table is the one they were
        converted for (a DDL message among them may have changed it)."""
        bp = self._current
        return bp is None or self._lines._decoder._fast.get(bp.key) is bp.shape

    def block(self, block: bytes) -> BlockResult:
        """A block through the tier (see BlockResult)."""
        self._current = None
        layout = self._lines.last
        if layout is None:
            return None, None, 0, 0
        bp = self._plans.get(id(layout))
        if bp is None or bp.layout is not layout:
            if len(self._plans) > 256:
                self._plans.clear()
            bp = self._plans[id(layout)] = BlockDecodePlan(layout)
        if bp.pattern is None or self._lines._decoder._fast.get(bp.key) is not bp.shape:
            return None, None, 0, 0
        self._current = bp
        return decode_block(bp, block)
