"""The workload's per-column value generators, built once per table: `workload.raw_value` made cheap.

Each generator makes the same draws from the same `random.Random`, in the same order, as
`workload.value(rng, col)` and returns the same datum; only the per-value dispatch and argument checks are
gone. `randint(a, b)`, `randrange(n)` and `choice(seq)` all come down to `Random._randbelow(n)`: one
`getrandbits(n.bit_length())` until the draw is below n; `_below` is that loop, and `uniform(a, b)` is
`a + (b - a) * random()`. The storer (rounding, checks) is skipped only for the families whose generated
values it provably returns unchanged (ints in range, strings, dates, enum/set/bit members, JSON text); tests
compare the generators with `workload.value` draw for draw.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable
from typing import Any

from .model import Column, TableInfo
from .mysqltypes import Family, tidb_json_text

TEXTS = ["", "plain", "quote ' \" \\ back", "日本語 ✓", "emoji 🚀", "<b>&amp;</b>", "tab\tnew\nline", "x" * 40]
_DIGITS = "0123456789"
# the JSON documents `raw_value` writes, by (k, text index): 80 of them
_JSON = [[tidb_json_text({"k": k, "s": s, "a": [1, 2.5, None, True]}) for s in TEXTS] for k in range(10)]

Gen = Callable[[], Any]


def belows(rng: random.Random) -> Callable[[int], int]:
    getrandbits = rng.getrandbits

    def below(n: int) -> int:
        """`rng._randbelow(n)` (n > 0), as randint/randrange/choice draw it."""
        k = n.bit_length()
        r = getrandbits(k)
        while r >= n:
            r = getrandbits(k)
        return r

    return below


# the families whose generated values the storer may change (rounding); it returns the others' as they are
_STORED = frozenset((Family.FLOAT, Family.DECIMAL, Family.DATETIME, Family.TIMESTAMP, Family.TIME, Family.BYTES))


def column_generator(rng: random.Random, col: Column) -> Gen:
    """A function drawing one value of `col` from `rng` exactly as `workload.value(rng, col)` does."""
    raw = raw_generator(rng, col)
    if col.type.family not in _STORED:
        return raw
    store = col.store_defined
    return lambda: store(raw())


def raw_generator(rng: random.Random, col: Column) -> Gen:
    """A function drawing one value of `col` from `rng` exactly as `workload.raw_value(rng, col)` does."""
    ct = col.type
    f = ct.family
    rand = rng.random
    below = belows(rng)
    if f is Family.INT:
        lo, hi = ct.int_range()
        edges = [lo, hi, 0]
        a = max(lo, -10**6)
        width = min(hi, 10**6) - a + 1

        def gen_int() -> Any:
            return edges[below(3)] if rand() < 0.15 else a + below(width)

        return gen_int
    if f is Family.FLOAT:
        norm = col.normalize
        fedges = [0.0, -1.5e38, 3.4e38]

        def gen_float() -> Any:
            v = fedges[below(3)] if rand() < 0.15 else round(-1e6 + 2e6 * rand(), 3)
            return norm(v)

        return gen_float
    if f is Family.DECIMAL:
        p, s = ct.flen, max(ct.scale, 0)
        digits = p - s
        nines_ip, nines_frac = "9" * digits, "9" * s
        ipw = 10 ** min(digits, 9)
        rs = range(s)

        def gen_decimal() -> Any:
            if rand() < 0.15:
                ip, frac = nines_ip, nines_frac
            else:
                ip = str(below(ipw))
                frac = "".join([_DIGITS[below(10)] for _ in rs])
            sign = "-" if rand() < 0.3 else ""
            return f"{sign}{ip}.{frac}" if s else f"{sign}{ip}"

        return gen_decimal
    if f is Family.DATE:
        dedges = ["1000-01-01", "9999-12-31"]

        def gen_date() -> Any:
            if rand() < 0.15:
                return dedges[below(2)]
            return f"{1970 + below(68)}-{1 + below(12):02d}-{1 + below(28):02d}"

        return gen_date
    if f in (Family.DATETIME, Family.TIMESTAMP):
        is_dt = f is Family.DATETIME
        tedges = ["1000-01-01 00:00:00", "9999-12-31 23:59:59"]
        rf = range(ct.fsp) if ct.fsp > 0 else None

        def gen_datetime() -> Any:
            edge = rand() < 0.15
            base = f"{1971 + below(67)}-{1 + below(12):02d}-{1 + below(28):02d} {below(24):02d}:" \
                   f"{below(60):02d}:{below(60):02d}"
            if edge and is_dt:
                base = tedges[below(2)]
            if rf is not None:
                base = base + "." + "".join([_DIGITS[below(10)] for _ in rf])
            return base

        return gen_datetime
    if f is Family.TIME:
        tmedges = ["-838:59:59", "838:59:59", "00:00:00"]

        def gen_time() -> Any:
            if rand() < 0.15:
                return tmedges[below(3)]
            return f"{below(24):02d}:{below(60):02d}:{below(60):02d}"

        return gen_time
    if f is Family.YEAR:
        yedges = [1901, 2155]

        def gen_year() -> Any:
            return yedges[below(2)] if rand() < 0.15 else 1901 + below(255)

        return gen_year
    if f is Family.STRING:
        flen = ct.flen if ct.flen and ct.flen > 0 else None
        ntext = len(TEXTS)

        def gen_string() -> Any:
            rand()
            s = TEXTS[below(ntext)] + str(below(1000))
            return s[:flen] if flen is not None else s

        return gen_string
    if f is Family.BYTES:
        norm = col.normalize

        def gen_bytes() -> Any:
            rand()
            n = below(17)
            return norm({"$b64": base64.b64encode(bytes([below(256) for _ in range(n)])).decode()})

        return gen_bytes
    if f in (Family.ENUM, Family.SET, Family.BIT):
        if f is Family.ENUM:
            first, width = 1, len(ct.elements)
        elif f is Family.SET:
            first, width = 0, 1 << len(ct.elements)
        else:
            first, width = 0, 1 << ct.display_length
        if width <= 0:
            return lambda: (rand(), rng.randint(first, first + width - 1))[1]  # raises as raw_value does

        def gen_member() -> Any:
            rand()
            return first + below(width)

        return gen_member
    if f is Family.JSON:
        ntext = len(TEXTS)

        def gen_json() -> Any:
            rand()
            k = below(10)
            return _JSON[k][below(ntext)]

        return gen_json
    raise AssertionError(f)


class TableGen:
    """One table's columns for generating rows: (name, role, generator), role 0 the handle key, 1 nullable,
    2 NOT NULL."""

    __slots__ = ("table", "cols")

    def __init__(self, rng: random.Random, table: TableInfo) -> None:
        self.table = table
        key = set(table.handle_key)
        self.cols = [(c.name, 0 if c.name in key else 1 if c.nullable is not False else 2,
                      column_generator(rng, c)) for c in table.columns]
