"""Numbers as TiCDC's Debezium encoder writes them (jsoniter): the encoder and the DDL messages both use these.

A float's Go text is kept as a `RawNumber`; `dumps` writes an object with those spliced in unquoted.
"""

from __future__ import annotations

from typing import Any

from .. import gojson
from ..mysqltypes import go_format_float32, go_format_float64, shortest_float32


def go_json_float(v: float, bits: int = 64) -> str:
    """A float as TiCDC's jsoniter writer prints it: shortest digits, positional, but 'e' form (with a
    two-digit exponent, "1e-07") below 1e-6 and from 1e21."""
    if bits == 32:
        v = float(shortest_float32(v))
    a = abs(v)
    if a != 0 and (a < 1e-6 or a >= 1e21):
        mant, _, exp = repr(v).partition("e")
        sign, digits = exp[0], exp[1:].lstrip("0") or "0"
        return f"{mant}e{sign}{digits.zfill(2)}"
    return go_format_float32(v) if bits == 32 else go_format_float64(v)


class RawNumber(str):
    """Preformatted JSON number text."""


def raw_number(text: str) -> RawNumber:
    return RawNumber(text)


def dumps(obj: Any) -> bytes:
    """Go-style JSON with numbers that must keep Go's float text spliced in raw."""
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

    out = gojson.dumps_jsoniter(mark(obj))
    if raws:
        for i, r in enumerate(raws):
            out = out.replace(f'"\\u0000RAW{i}\\u0000"'.encode(), r.encode(), 1)
    return out
