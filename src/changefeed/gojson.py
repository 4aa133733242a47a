"""JSON bytes as Go writes them (encoding/json, easyjson's jwriter), built on orjson's speed.

Go escapes what orjson writes raw: `<`, `>`, `&` as \\u003c, \\u003e, \\u0026, and U+2028/U+2029;
it writes backspace and form feed as \\u0008 and \\u000c where orjson writes \\b and \\f. Hex digits are
lowercase in both. Outside strings none of these bytes occur, so fixing the whole output is safe.
"""

from __future__ import annotations

from typing import Any

import orjson


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


def dumps_std(obj: Any) -> bytes:
    """orjson.dumps with Go encoding/json's escaping (Go >= 1.22)."""
    return go_escape(orjson.dumps(obj), short_bf=True)
