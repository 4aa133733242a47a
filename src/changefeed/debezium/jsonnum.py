"""Numbers as TiCDC's Debezium encoder writes them (jsoniter): the encoder and the DDL messages both use these."""

from __future__ import annotations

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
