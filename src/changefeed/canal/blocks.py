"""canal-json a block of lines at a time: the CLI's fastest tier, for runs of row lines of one table.

canal/lines.py turns one line into one line with a few dozen Python steps; over 100,000 rows those steps are most
of the run. Here one regular expression pass (`findall`) reads a whole block of lines into columns of matched
text, each column is converted by a handful of C-level calls over all its values at once (a join, bytes.replace,
split, a dict lookup per value through `map`), and the output lines are joined from the columns and the table's
constant pieces in one `b"".join`. A column type is taken only where its conversion is a pure text rewrite that
canal/rowtext.py's per-row tier also does (the same patterns), so the bytes are those of the full path.

A line the pattern does not match (another table, an update, an odd layout, a value a check refuses) is handed
back as None, in place, for the per-line tiers. Pure functions of bytes, no I/O.
"""

from __future__ import annotations

import binascii
import functools
import operator
import re
from collections.abc import Callable
from itertools import repeat
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from ..gojson import go_escape
from ..largemsg import record_length
from ..mysqltypes import Family
from ..mysqltypes.text import _as_text
from ..tso import PHYSICAL_SHIFT
from .rowtext import _encode_column, _int_digits, escaped
from .types import promotion

if TYPE_CHECKING:
    from .lines import LineEncoder, _EncodePlan

_OVERHEAD = record_length(None, b"")
_NUL = b"\x00"  # joins a column's values while they are rewritten together (never in JSON text either)
_U64_DIGITS = len(str((1 << 64) - 1))
# (all the block's output lines, None, their number, inserts among them), or (None, each line's output line or
# None, the block's lines, 0), or (None, None, 0, 0): none taken
BlockResult = tuple[bytes | None, list[bytes | None] | None, int, int]


class Matched(NamedTuple):
    """A block's lines as a block pattern found them (see `match_block`)."""

    found: list[tuple[bytes, ...]]  # every line the pattern found, taken (its group 2 matched) or not
    columns: list[tuple[bytes, ...]]  # the groups of the lines taken, as columns
    bad: set[int]  # the lines taken (by their index among them) whose constant texts differ
    whole: bool  # every line found was taken


def match_block(pattern: re.Pattern[bytes], block: bytes, constants: tuple[tuple[int, bytes], ...]
                ) -> Matched | None:
    """The lines of a block by one `findall`, with the lines whose constant texts (group index, the text it must
    hold: compared afterwards, as matching them as literals is slow) differ; None when no line was taken, or when
    the lines found may not be the block's lines (a line not as the pattern meant, found across two)."""
    found = pattern.findall(block)
    rows = [r for r in found if r[1]]
    if not rows:
        return None
    columns = list(zip(*rows, strict=True))
    bad: set[int] = set()
    for at, want in constants:
        if columns[at].count(want) != len(rows):
            bad.update(i for i, t in enumerate(columns[at]) if t != want)
    whole = len(rows) == len(found)
    if not (whole and not bad) and block.count(b"\n") + 1 != len(found):
        return None
    return Matched(found, columns, bad, whole)


def _text_column(col: list[bytes]) -> list[bytes]:
    """JSON values (strings as orjson writes them, or null) as they stand in a message line's `value` string:
    Go's escaping, then the escaping for a JSON string."""
    return escaped(go_escape(_NUL.join(col))).split(_NUL)


def _int_column(col: list[bytes]) -> list[bytes]:
    """JSON integers (or null) as canal-json's quoted text, inside a `value` string."""
    joined = b'\\"' + b'\\"\x00\\"'.join(col) + b'\\"'
    if b"null" in col:
        joined = joined.replace(b'\\"null\\"', b"null")
    return joined.split(_NUL)


class _Column:
    """How one column's matched text becomes its text in `data`: the kind of rewrite and what it needs."""

    __slots__ = ("kind", "group", "safe", "lo", "hi", "names", "promote", "promotion")

    def __init__(self, kind: str, group: int) -> None:
        self.kind, self.group = kind, group
        self.safe, self.lo, self.hi = 0, 0, 0
        self.names: dict[bytes, bytes] = {}
        self.promote: Callable | None = None
        self.promotion: tuple[int, int, int] | None = None  # (limit, base code, wider code) of a promoted column


class BlockEncodePlan:
    """One table's block pattern (every column's value as one group) and the constant pieces of its lines."""

    def __init__(self, ep: _EncodePlan, raw_table: bytes, deletes: bool, ext: bool) -> None:
        plan = ep.plan
        self.ep = ep
        # a table's text is skipped by its length in the pattern (a regular expression compares a literal byte by
        # byte, slower than reading the rest of the row) and compared after, as a group, to the table's
        self.table_text = b',"table":' + raw_table + b',"preTable":null,'
        self.ext = ext
        cols: list[_Column] = []
        parts: list[str] = []
        group = 4  # 1: insert (or empty for delete), 2: commitTs, 3: the table's text
        env: dict[str, Any] = {}
        ok = True
        for i, (c, p) in enumerate(zip(plan.table.columns, plan.cols, strict=True)):
            promoted = p.promote is not None
            got = _encode_column(i, c, p.fmt, promoted, env)
            kind = _kind(c, p.fmt, promoted)
            if got is None or kind is None:
                ok = False
                break
            pattern = _uncaptured(got[0])
            if pattern is None:
                ok = False
                break
            col = _Column(kind, group)
            group += 1
            if kind == "int":
                col.lo, col.hi = c.type.int_range()
                col.safe = _int_digits(col.lo, col.hi)[1]
                col.promote = p.promote
                col.promotion = promotion(c.type)
            elif kind == "enum":
                col.names = {b"null": b"null"}
                col.names.update({b'"' + k + b'"': escaped(v) for k, v in env[f"E{i}"].items()})
            cols.append(col)
            name = orjson.dumps(c.name).decode()
            if kind == "plain":  # digits and punctuation: the text inside the quotes (empty: null)
                parts.append(re.escape(name) + ':(?:null|"(' + pattern[1:-1] + ')")')
            else:
                parts.append(re.escape(name) + ":(null|" + pattern + ")")
        self.cols = cols if ok else None
        self.pattern: re.Pattern[bytes] | None = None
        if not ok:
            return
        row = ("\\{" + ",".join(parts) + "\\}").encode()
        kinds = rb"(?:(insert)|delete)" if deletes else rb"(insert)"
        # a row line as EventWriter writes it; anything else matches `.*`
        head = (rb'(?m)^(?:\{"kind":"' + kinds + rb'","commitTs":(0|[1-9][0-9]{0,19}+)((?s:.{%d}))'
                % len(self.table_text))
        try:
            self.pattern = re.compile(head + rb'"before":(?(1)null,"after":)' + _possessive(row)
                                      + rb'(?(1)|,"after":null),"ddl":null\}|.*)$')
        except re.error:  # (a `{` its text reads as a quantifier that is none: the pattern as it was)
            self.pattern = re.compile(
                head + rb'"before":(?(1)null,"after":)' + row + rb'(?(1)|,"after":null),"ddl":null\}|.*)$')
        self.keys = [escaped(go_escape((b"," if i else b"{") + orjson.dumps(c.name) + b":"))
                     for i, c in enumerate(plan.table.columns)]
        tail = b'\\",\\"es\\":'
        self.heads = {b"insert": b'{"key":null,"value":"' + ep.head[b"insert"] + tail,
                      b"": b'{"key":null,"value":"' + ep.head[b"delete"] + tail}
        self.mid = ep.mysql + b'null,\\"data\\":[' + self.keys[0]
        self.tail = b'}],\\"_tidb\\":{\\"commitTs\\":' if ext else b'}]}"}\n'
        self.promoted = [c for c in cols if c.promote is not None]
        if any(c.promotion is None for c in self.promoted):  # a promoter of another kind: no block path
            self.pattern = None

    def java_column(self, columns: list[tuple]) -> list[bytes] | bytes:
        """Each row's escaped sqlType object (one constant for a table without promoted columns)."""
        ep = self.ep
        if not self.promoted:
            return ep.java_for(())[0]
        codes = []
        for c in self.promoted:
            values = columns[c.group - 1]
            limit, base, wider = c.promotion  # type: ignore[misc]
            if b"null" in values:
                codes.append([wider if g != b"null" and int(g) > limit else base for g in values])
            else:  # by C calls: whether each value passes the limit, then its code
                codes.append(list(map((base, wider).__getitem__, map(limit.__lt__, map(int, values)))))
        keys = list(zip(*codes, strict=True))
        pieces = {k: ep.java_for(k)[0] for k in set(keys)}
        return list(map(pieces.__getitem__, keys))


_GROUP = re.compile(r"(?<![\\?])\((?!\?)")


def _uncaptured(pattern: str) -> str | None:
    """A column's pattern with its groups made non-capturing (a group is an object per row and value), or
    None if that cannot be done by its text."""
    out = _GROUP.sub("(?:", pattern)
    try:
        return out if re.compile(out).groups == 0 else None
    except re.error:
        return None


def _possessive(pattern: bytes) -> bytes:
    """A pattern with every quantifier possessive (`?` `*` `+` `{m,n}` not already possessive or lazy, outside
    classes): the engine keeps no backtracking state for them (~15% of a block pass). It matches no line that the
    pattern did not, and where it matches, it matches the same spans (the greedy pattern tries the same reading
    first); a line it refuses goes to the per-line tiers."""
    out = bytearray()
    i, n = 0, len(pattern)
    quantified = False  # the last token was a quantifier (a `+` or `?` after it is its mark)
    while i < n:
        c = pattern[i]
        if c == 0x5C:  # an escape: two bytes
            out += pattern[i:i + 2]
            i += 2
            quantified = False
            continue
        if c == 0x5B:  # a class, up to its closing bracket
            j = i + 1
            j += pattern[j:j + 1] == b"^"
            j += pattern[j:j + 1] == b"]"
            while pattern[j] != 0x5D:
                j += 2 if pattern[j] == 0x5C else 1
            out += pattern[i:j + 1]
            i = j + 1
            quantified = False
            continue
        if c in b"?*+{" and not (c == 0x3F and out[-1:] == b"("):  # (`(?` opens a group)
            if quantified:  # a possessive or lazy mark
                out.append(c)
                i += 1
                quantified = False
                continue
            j = pattern.index(b"}", i) + 1 if c == 0x7B else i + 1
            out += pattern[i:j]
            i = j
            if pattern[i:i + 1] not in (b"+", b"?"):
                out.append(0x2B)
            quantified = True
            continue
        out.append(c)
        i += 1
        quantified = False
    return bytes(out)


def _kind(c: Any, fmt: Callable[[Any], str], promoted: bool) -> str | None:
    """The rewrite of a column whose per-row pattern rowtext.py gives (the same conditions, in its order)."""
    fam = c.type.family
    if fam is Family.INT and fmt is str:
        return "int"
    if promoted:
        return None
    if fam in (Family.STRING, Family.JSON, Family.VECTOR) and fmt is _as_text:
        return "text"
    if fam in (Family.DATETIME, Family.TIMESTAMP, Family.DECIMAL) and fmt is _as_text:
        return "plain"
    if fam is Family.ENUM and c.type.elements and fmt is str:
        return "enum"
    if fam is Family.BYTES:
        return "blob"
    return None


def check_range(values: list[bytes], lo: int, hi: int, safe: int, bad: set[int], null: bytes) -> None:
    """Rows whose integer text (canonical digits, or `null`) is out of [lo, hi] added to `bad`: texts up to `safe`
    digits are in range; for an unsigned column a text as long as `hi`'s compares as bytes, by C calls."""
    longest = max(map(len, values))
    if longest <= safe:
        return
    top = str(hi).encode()
    # (texts no longer than `hi`'s, right-aligned by spaces, which sort before digits and letters, compare as their
    # numbers; `null` comes before any)
    if lo == 0 and longest <= len(top) and max(map(bytes.rjust, values, repeat(len(top)))) <= top:
        return
    bad.update(i for i, g in enumerate(values) if len(g) > safe and g != null and not lo <= int(g) <= hi)


def _blob(g: bytes) -> bytes:
    """A matched `{"$b64":"..."}` (or null) as canal-json's latin-1 text of the bytes, a JSON string."""
    if g == b"null":
        return g
    return orjson.dumps(binascii.a2b_base64(g[9:-2], strict_mode=True).decode("latin-1"))


_B64 = slice(9, -2)  # the base64 text in `{"$b64":"..."}`
_A2B = functools.partial(binascii.a2b_base64, strict_mode=True)


_SEP = "\uffff"  # between a column's texts written as one JSON string (latin-1 text never holds it)


def _blob_column(values: list[bytes]) -> list[bytes]:
    """Matched `{"$b64":"..."}` values (none null) as canal-json's text, inside a `value` string, by C calls
    over the column: the texts are written as one JSON string, U+FFFF between them (it raises on a value that
    is not strict base64)."""
    texts = map(bytes.decode, map(_A2B, map(operator.getitem, values, repeat(_B64))), repeat("latin-1"))
    joined = escaped(go_escape(orjson.dumps(_SEP.join(texts))[1:-1]))
    return (b'\\"' + joined.replace(_SEP.encode(), b'\\"\x00\\"') + b'\\"').split(_NUL)


def _convert(col: _Column, values: list[bytes], bad: set[int]) -> list[bytes]:
    """A column's matched texts as their texts in a message line (rows found wrong are added to `bad`)."""
    kind = col.kind
    if kind == "text":
        _check_utf8(values, bad)
        return _text_column(values)
    if kind == "int":
        check_range(values, col.lo, col.hi, col.safe, bad, b"null")
        return _int_column(values)
    if kind == "plain":
        out = (b'\\"' + b'\\"\x00\\"'.join(values) + b'\\"').split(_NUL)
        return out if b"" not in values else [v if v != b'\\"\\"' else b"null" for v in out]
    if kind == "enum":
        return list(map(col.names.__getitem__, values))
    if b"null" not in values:
        try:
            return _blob_column(values)
        except (binascii.Error, ValueError):
            pass
    try:
        texts = list(map(_blob, values))
    except (binascii.Error, ValueError):
        texts = []
        for i, g in enumerate(values):
            try:
                texts.append(_blob(g))
            except (binascii.Error, ValueError):
                bad.add(i)
                texts.append(b"null")
    return _text_column(texts)


def encode_block(bp: BlockEncodePlan, block: bytes, now: int, limit: int) -> BlockResult:
    """A block of lines (joined by newlines, none at the end) as message lines (see BlockResult)."""
    assert bp.pattern is not None and bp.cols is not None
    got = match_block(bp.pattern, block, ((2, bp.table_text),))
    if got is None:
        return None, None, 0, 0
    found, columns, bad, everything = got
    m, n = len(columns[0]), len(found)
    ts = list(columns[1])
    if max(map(len, ts)) >= _U64_DIGITS:
        bad.update(i for i, t in enumerate(ts) if int(t) >= 1 << 64)
    es = list(map(b"%d".__mod__, map(operator.rshift, map(int, ts), repeat(PHYSICAL_SHIFT))))
    heads = list(map(bp.heads.__getitem__, columns[0]))
    java = bp.java_column(columns)
    now_piece = b',\\"ts\\":%d,\\"sql\\":\\"\\",\\"sqlType\\":' % now
    width = 5 + 2 * len(bp.cols) + (2 if bp.ext else 0)
    parts: list[Any] = [None] * (m * width)
    parts[0::width] = heads
    parts[1::width] = es
    parts[2::width] = [now_piece] * m
    parts[3::width] = java if isinstance(java, list) else [java] * m
    parts[4::width] = [bp.mid] * m
    at = 5
    for j, col in enumerate(bp.cols):
        if j:
            parts[at::width] = [bp.keys[j]] * m
            at += 1
        parts[at::width] = _convert(col, list(columns[col.group - 1]), bad)
        at += 1
    parts[at::width] = [bp.tail] * m
    if bp.ext:
        parts[at + 1::width] = ts
        parts[at + 2::width] = [b'}}"}\n'] * m
    out = b"".join(parts)
    if everything and not bad and len(out) + _OVERHEAD <= limit:
        return out, None, n, n
    return None, placed_lines(out, bad, found, limit), n, 0


def placed_lines(out: bytes, bad: set[int], found: list[tuple], limit: int | None = None) -> list[bytes | None]:
    """Each found line's output line (`out` holds those of the lines whose group 2 matched, in order), None for the
    lines not taken, the `bad` ones (by their place among the matched) and any longer than `limit`."""
    lines: list[bytes | None] = out.split(b"\n")[:-1]  # type: ignore[assignment]
    for i in bad:
        lines[i] = None
    if limit is not None:
        for i, line in enumerate(lines):
            if line is not None and len(line) + _OVERHEAD > limit:
                lines[i] = None
    if len(lines) == len(found):
        return lines
    placed: list[bytes | None] = [None] * len(found)
    for i, line in zip([i for i, r in enumerate(found) if r[1]], lines, strict=True):
        placed[i] = line
    return placed


class BlockEncoder:
    """Blocks of event lines through the block tier, for the table of the line the per-line tiers took last."""

    def __init__(self, lines: LineEncoder) -> None:
        self._lines = lines
        self._plans: dict[bytes, BlockEncodePlan] = {}

    def ready(self) -> bool:
        """Whether a table is known (after the first line of one went through the per-line tiers)."""
        return self._lines._last is not None

    def valid(self) -> bool:
        """Always: a row line's message depends on the line alone (it carries its table)."""
        return True

    def block(self, block: bytes) -> BlockResult:
        """A block through the tier (see BlockResult)."""
        le = self._lines
        raw, ep = le._last_raw, le._last
        if ep is None:
            return None, None, 0, 0
        bp = self._plans.get(raw)
        if bp is None or bp.ep is not ep:
            if len(self._plans) > 256:
                self._plans.clear()
            bp = self._plans[raw] = BlockEncodePlan(ep, raw, le._deletes, le._ext)
        if bp.pattern is None:
            return None, None, 0, 0
        return encode_block(bp, block, le._clock(), le._limit)


def _check_utf8(values: list[bytes], bad: set[int]) -> None:
    """Rows whose text is not UTF-8 (the full path refuses the line) added to `bad`: the column checked at once."""
    joined = _NUL.join(values)
    if not joined.isascii() and not _utf8(joined):
        bad.update(i for i, v in enumerate(values) if not _utf8(v))


def _utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
