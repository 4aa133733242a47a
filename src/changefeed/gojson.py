"""JSON bytes as Go writes them (encoding/json, easyjson's jwriter), built on orjson's speed.

Go escapes what orjson writes raw: `<`, `>`, `&` as \\u003c, \\u003e, \\u0026, and U+2028/U+2029;
it writes backspace and form feed as \\u0008 and \\u000c where orjson writes \\b and \\f. Hex digits are
lowercase in both. Outside strings none of these bytes occur, so fixing the whole output is safe.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from .mysqltypes import go_format_float64


def go_escape(out: bytes, short_bf: bool = False, html: bool = True) -> bytes:
    """Rewrite orjson output into Go's escaping.

    short_bf: keep orjson's \\b and \\f, as Go's encoding/json writes them since Go 1.22 (easyjson
    and goccy/go-json, which canal-json uses, write \\u0008 and \\u000c).
    html: escape <, >, & and U+2028/9 (encoding/json, easyjson); jsoniter's writer does not.
    """
    if html and (b"<" in out or b">" in out or b"&" in out):
        out = out.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026")
    if html and b"\xe2" in out and b"\xe2\x80" in out:  # memchr first: U+2028/9 are rare
        out = out.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
    if not short_bf and (b"\\b" in out or b"\\f" in out) and b"\x01" not in out:
        # escaped backslashes set aside first (left to right, as a JSON reader pairs them), in C
        return out.replace(b"\\\\", b"\x01").replace(b"\\b", b"\\u0008").replace(b"\\f", b"\\u000c").replace(
            b"\x01", b"\\\\")
    if not short_bf and (b"\\b" in out or b"\\f" in out):
        # an escaped backslash (\\\\) may stand before a literal b or f: split escapes off first, left to
        # right as a JSON reader does, and rewrite only inside the pieces
        out = b"\\\\".join(
            seg.replace(b"\\b", b"\\u0008").replace(b"\\f", b"\\u000c") for seg in out.split(b"\\\\")
        )
    return out


def dumps(obj: Any) -> bytes:
    """orjson.dumps with easyjson's escaping; dict key order is kept (as Go's struct field order)."""
    return go_escape(orjson.dumps(obj))


def dumps_jsoniter(obj: Any) -> bytes:
    """orjson.dumps as TiCDC's jsoniter writer escapes: no HTML escaping, control characters as \\u00xx."""
    return go_escape(orjson.dumps(obj), html=False)


def dumps_std(obj: Any, sort_keys: bool = False) -> bytes:
    """orjson.dumps with Go encoding/json's escaping (Go >= 1.22); sort_keys as json.Marshal writes a Go map."""
    return go_escape(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS if sort_keys else 0), short_bf=True)


class RawNumber(str):
    """A JSON number's text as Go printed it, written unquoted (orjson would print a float its own way)."""


def dumps_raw(obj: Any, writer: Callable[[Any], bytes] = dumps_jsoniter) -> bytes:
    """`writer(obj)` with each RawNumber spliced in unquoted: marked as a string first, replaced after."""
    raws: list[str] = []

    def mark(o: Any) -> Any:
        if isinstance(o, RawNumber):
            raws.append(str(o))
            return f"\x00RAW{len(raws) - 1}\x00"
        if isinstance(o, dict):
            return {k: mark(v) for k, v in o.items()}
        if isinstance(o, list):
            return [mark(v) for v in o]
        return o

    out = writer(mark(obj))
    for i, r in enumerate(raws):
        out = out.replace(b'"\\u0000RAW%d\\u0000"' % i, r.encode(), 1)
    return out


def std_float(v: float) -> str:
    """A float64 as Go's encoding/json writes it: shortest digits, positional, 'e' form below 1e-6 and from 1e21
    with `e-07` cut to `e-7` (strconv keeps two exponent digits, json drops a leading 0 of a negative one)."""
    a = abs(v)
    if a != 0 and (a < 1e-6 or a >= 1e21):
        text = repr(v)
        return text.replace("e-0", "e-") if "e-0" in text else text
    return go_format_float64(v)


def marshal_std(obj: Any, sort_keys: bool = False) -> str:
    """Go's json.Marshal of a value: compact, its escaping, every float in Go's text (`0`, not `0.0`)."""

    def floats(o: Any) -> Any:
        if type(o) is float:
            return RawNumber(std_float(o))
        if isinstance(o, dict):
            return {k: floats(v) for k, v in o.items()}
        if isinstance(o, list):
            return [floats(v) for v in o]
        return o

    return dumps_raw(floats(obj), lambda o: dumps_std(o, sort_keys)).decode("utf-8")
