"""Numbers as TiCDC's Debezium encoder writes them (jsoniter): the encoder and the DDL messages both use these.

A float's Go text is kept as a `gojson.RawNumber`; `dumps` writes an object with those spliced in unquoted.
"""

from __future__ import annotations

from typing import Any

from .. import gojson
from ..gojson import RawNumber
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


def raw_number(text: str) -> RawNumber:
    return RawNumber(text)


def dumps(obj: Any) -> bytes:
    """jsoniter's JSON with Go's float text spliced in raw."""
    return gojson.dumps_raw(obj, gojson.dumps_jsoniter)
