"""Values as Go and TiDB print them: float64/float32 text (strconv.FormatFloat) and TiDB's JSON text.

TiCDC's encoders are Go, so every protocol that writes a float or a JSON document as text must
produce the same digits Go does; the functions here match Go byte for byte (tests/golden).
"""

from __future__ import annotations

import re
import struct
from decimal import ROUND_HALF_EVEN, Context, Decimal
from functools import lru_cache
from typing import Any

import orjson

from ..errors import ValueError_


def go_format_float64(v: float) -> str:
    """Go's strconv.FormatFloat(v, 'f', -1, 64): shortest round-trip digits, never an exponent."""
    r = repr(v)
    if "e" in r:
        return format(Decimal(r), "f")
    if r[-2:] == ".0":
        return r[:-2]
    if r in ("nan", "inf", "-inf"):
        return "0"
    return r


_F32 = struct.Struct("<f")


def to_float32(v: float) -> float:
    """The float32 nearest to v, as a Python float."""
    try:
        return _F32.unpack(_F32.pack(v))[0]
    except OverflowError:
        raise ValueError_(f"{v!r} is out of range for FLOAT") from None


def shortest_float32(v: float) -> str:
    """Shortest decimal text that reads back as the same float32 (Go's FormatFloat(.., 32))."""
    if v == 0:  # not through the cache: 0.0 and -0.0 are the same lru_cache key
        return "-0" if str(v).startswith("-") else "0"
    return _shortest_float32(v)


_F32_BITS = struct.Struct("<I")
_EXACT = Context(prec=200)  # more digits than any float32 or midpoint has: Decimal arithmetic is exact


@lru_cache(maxsize=65536)
def _shortest_float32(v: float) -> str:
    f = to_float32(v)
    if f != f or f in (float("inf"), float("-inf")):
        return "0"
    if f == 0:
        return "-0" if str(f).startswith("-") else "0"
    fast = _shortest_float32_fast(f)
    if fast is not None:
        return fast
    # The decimals that read back as f lie between the midpoints to f's neighbours (ends included when
    # f's mantissa is even); checked exactly, as reading a decimal through float64 first rounds twice
    # (7.038531e-26). Go prints the shortest of them, and of two the one nearer f.
    bits = _F32_BITS.unpack(_F32.pack(abs(f)))[0]
    d = Decimal(abs(f))
    below = Decimal(_F32.unpack(_F32_BITS.pack(bits - 1))[0])
    if bits + 1 < 0x7F800000:
        above = Decimal(_F32.unpack(_F32_BITS.pack(bits + 1))[0])
    else:  # FLT_MAX: rounding treats the next step up as if the exponent went on
        above = _EXACT.subtract(_EXACT.multiply(d, 2), below)
    lo = _EXACT.divide(_EXACT.add(d, below), 2)
    hi = _EXACT.divide(_EXACT.add(d, above), 2)
    closed = bits & 1 == 0
    for p in range(1, 10):
        step = Decimal(1).scaleb(d.adjusted() - p + 1)
        near = d.quantize(step, rounding=ROUND_HALF_EVEN, context=_EXACT)
        other = _EXACT.add(near, step) if near < d else _EXACT.subtract(near, step)
        for c in (near, other):
            if lo < c < hi or closed and (c == lo or c == hi):
                text = format(_EXACT.normalize(c), "f")
                return "-" + text if f < 0 else text
    raise AssertionError(f"no 9-digit decimal reads back as float32 {f!r}")


def _shortest_float32_fast(f: float) -> str | None:
    """The exact search below, in float64 arithmetic where that is provably exact; None where it is not.

    For a normal float32 that is not a power of two (nor FLT_MAX) the midpoints to its neighbours lie at the
    same distance and are float64 values; `{:.{p-1}e}` gives the p-digit decimal nearest f (correct rounding,
    ties to even, as the quantize), and with the interval symmetric around f no other p-digit decimal can be
    inside when that one is not. Reading a decimal as float64 is monotone, so it is strictly between the
    midpoints exactly when its float64 is; a float64 landing on a midpoint is left to the exact search."""
    a = abs(f)
    bits = _F32_BITS.unpack(_F32.pack(a))[0]
    if bits < 0x00800000 or bits & 0x7FFFFF == 0 or bits + 1 >= 0x7F800000:
        return None
    below = _F32.unpack(_F32_BITS.pack(bits - 1))[0]
    above = _F32.unpack(_F32_BITS.pack(bits + 1))[0]
    lo = (a + below) / 2  # exact: 25 significant bits at most
    hi = (a + above) / 2
    # a decimal nearer f than p digits allow is nearer with p + 1 (and 9 always do): bisect the digits
    first, last = 0, 8  # digits - 1
    while first < last:
        mid = (first + last) // 2
        x = float(f"{a:.{mid}e}")
        if x == lo or x == hi:
            return None
        if lo < x < hi:
            last = mid
        else:
            first = mid + 1
    s = f"{a:.{first}e}"
    x = float(s)
    if not lo < x < hi:
        return None
    text = format(_EXACT.normalize(Decimal(s)), "f")
    return "-" + text if f < 0 else text


def go_format_float32(v: float) -> str:
    return shortest_float32(v)


def canonical_float32(v: float) -> float:
    """A float32 column's value kept as the float64 of its shortest text (3.14, not 3.140000104904175)."""
    return float(shortest_float32(v))


def tidb_json_text(v: Any) -> str:
    """TiDB's canonical JSON text (BinaryJSON.String): `{"k": "v"}`, `[1, 2]` (a space after ':' and ',').

    Object keys come out sorted (TiDB stores them sorted by their bytes); numbers and strings as
    TiDB's marshalFloat64To / jsonMarshalStringTo write them.
    """
    if isinstance(v, dict):
        return "{" + ", ".join(_tidb_json_str(k) + ": " + tidb_json_text(v[k]) for k in sorted(v)) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(tidb_json_text(x) for x in v) + "]"
    if isinstance(v, str):
        return _tidb_json_str(v)
    if v is None or isinstance(v, bool):
        return "null" if v is None else "true" if v else "false"
    if isinstance(v, int) and -(1 << 63) <= v < 1 << 64:
        return str(v)
    try:
        f = float(v)  # TiDB reads a number that fits no 64-bit integer as a double
    except OverflowError:
        raise ValueError_(f"{v!r} is out of range for a JSON number") from None
    if f != f or f in (float("inf"), float("-inf")):
        raise ValueError_(f"{v!r} is not a JSON number")
    if f == 0 or 1e-15 <= abs(f) < 1e15:
        text = go_format_float64(f)
        # a double keeps its kind in the text: an integral one is written with ".0" (`-15000000000.0`, as TiDB's
        # marshalFloat64To, MySQL and MariaDB show it), so that it reads back as a double, not as an integer
        return text if "." in text else text + ".0"
    # MySQL's exponent range, not Go's JSON one: Go's shortest 'e' text without the exponent's '+' (1e15, 1e-16)
    return _go_e_text(f).replace("e+", "e")


def _go_e_text(f: float) -> str:
    """Go's strconv.FormatFloat(f, 'e', -1, 64): the shortest digits (Python's repr has them), one before the point,
    an exponent of at least two digits; repr itself switches to an exponent only from 1e16."""
    sign, digits, exp = Decimal(repr(f)).normalize().as_tuple()
    text = "".join(map(str, digits))
    mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
    e = len(digits) - 1 + int(exp)
    return f"{'-' if sign else ''}{mantissa}e{'-' if e < 0 else '+'}{abs(e):02d}"


_JSON_SHORT_ESC = re.compile(r"(?<!\\)((?:\\\\)*)\\([bf])")


def _tidb_json_str(s: str) -> str:
    # orjson escapes as Go does except \b, \f (Go: \u0008, \u000c) and U+2028/U+2029 (Go escapes them)
    out = orjson.dumps(s).decode()
    if "\\b" in out or "\\f" in out:
        out = _JSON_SHORT_ESC.sub(lambda m: m.group(1) + ("\\u0008" if m.group(2) == "b" else "\\u000c"), out)
    if "\u2028" in out or "\u2029" in out:
        out = out.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return out
