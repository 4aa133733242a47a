"""A synthetic TiDB-like change stream, the same for the same seed.

Several tables covering every MySQL type family (boundary values included), multi-row multi-table
transactions with increasing TSO commit timestamps, inserts, updates (primary-key changes and NULL <-> value
among them), deletes, and DDL mid-stream: CREATE TABLE, ADD/DROP/RENAME COLUMN, a widening MODIFY COLUMN,
CREATE/DROP INDEX, TRUNCATE, RENAME TABLE, DROP TABLE.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable, Iterator
from typing import Any

from .ddl import action_from_query
from .model import Column, Event, Kind, Row, TableInfo
from .mysqltypes import Family, tidb_json_text
from .sqlschema import SchemaTracker
from .tso import compose
from .upstream import UpstreamState, row_key
from .workload_columns import TEXTS, TableGen, belows

START_MS = 1_763_000_000_000  # 2025-11-13, a TSO physical time

CREATE = [
    "CREATE DATABASE IF NOT EXISTS `app`",
    "CREATE TABLE `app`.`users` (`id` bigint NOT NULL, `name` varchar(64) NOT NULL, `balance` decimal(14,2) NULL, "
    "`score` double NULL, `ratio` float NULL, `born` date NULL, `seen` datetime(6) NULL, `updated` timestamp(3) NULL, "
    "`alarm` time NULL, `yr` year NULL, `kind` enum('basic','pro','team') NOT NULL DEFAULT 'basic', "
    "`tags` set('x','y','z') NULL, `flags` bit(8) NULL, `blob` varbinary(16) NULL, `doc` json NULL, "
    "`big` bigint unsigned NULL, `tiny` tinyint NULL, `note` text NULL, PRIMARY KEY (`id`))",
    "CREATE TABLE `app`.`orders` (`id` int NOT NULL, `user_id` bigint NOT NULL, `amount` decimal(10,2) NOT NULL, "
    "`status` varchar(16) NOT NULL, PRIMARY KEY (`id`))",
]
# (fraction of the stream, statements) — DDL mid-stream
LATER = [
    (0.15, ["ALTER TABLE `app`.`orders` ADD COLUMN `coupon` varchar(20) NOT NULL DEFAULT 'NONE'"]),
    (0.25, ["CREATE INDEX `idx_user` ON `app`.`orders` (`user_id`)"]),
    (0.35, ["ALTER TABLE `app`.`users` RENAME COLUMN `note` TO `remark`"]),
    (0.45, ["ALTER TABLE `app`.`orders` MODIFY COLUMN `amount` decimal(12,2) NOT NULL"]),
    (0.50, ["CREATE TABLE `app`.`events` (`id` bigint NOT NULL, `what` varchar(32) NULL, `at` datetime NULL, "
            "PRIMARY KEY (`id`))"]),
    (0.60, ["TRUNCATE TABLE `app`.`orders`"]),
    (0.70, ["ALTER TABLE `app`.`users` DROP COLUMN `ratio`"]),
    (0.75, ["DROP INDEX `idx_user` ON `app`.`orders`"]),
    (0.80, ["RENAME TABLE `app`.`events` TO `app`.`audit`"]),
    (0.85, ["CREATE TABLE `app`.`scratch` (`k` int NOT NULL, `v` varchar(8) NULL, PRIMARY KEY (`k`))"]),
    (0.92, ["DROP TABLE `app`.`scratch`"]),
]



def value(rng: random.Random, col: Column) -> Any:
    """A datum for a column, boundary values now and then, held as TiDB stores it (rounded to its scale/fsp)."""
    return col.store_defined(raw_value(rng, col))


def raw_value(rng: random.Random, col: Column) -> Any:
    """A value for a column as an application might write it."""
    ct = col.type
    f = ct.family
    edge = rng.random() < 0.15
    if f is Family.INT:
        lo, hi = ct.int_range()
        return rng.choice([lo, hi, 0]) if edge else rng.randint(max(lo, -10**6), min(hi, 10**6))
    if f is Family.FLOAT:
        return col.normalize(rng.choice([0.0, -1.5e38, 3.4e38]) if edge else round(rng.uniform(-1e6, 1e6), 3))
    if f is Family.DECIMAL:
        p, s = ct.flen, max(ct.scale, 0)
        digits = p - s
        ip = "9" * digits if edge else str(rng.randint(0, 10 ** min(digits, 9) - 1))
        frac = "9" * s if edge else "".join(rng.choice("0123456789") for _ in range(s))
        sign = "-" if rng.random() < 0.3 else ""
        return f"{sign}{ip}.{frac}" if s else f"{sign}{ip}"
    if f is Family.DATE:
        if edge:
            return rng.choice(["1000-01-01", "9999-12-31"])
        return f"{rng.randint(1970, 2037)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if f in (Family.DATETIME, Family.TIMESTAMP):
        year = rng.randint(1971, 2037)
        base = f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:" \
               f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
        if edge and f is Family.DATETIME:
            base = rng.choice(["1000-01-01 00:00:00", "9999-12-31 23:59:59"])
        return base + ("." + "".join(rng.choice("0123456789") for _ in range(ct.fsp)) if ct.fsp > 0 else "")
    if f is Family.TIME:
        return rng.choice(["-838:59:59", "838:59:59", "00:00:00"]) if edge else \
            f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
    if f is Family.YEAR:
        return rng.choice([1901, 2155]) if edge else rng.randint(1901, 2155)
    if f is Family.STRING:
        s = rng.choice(TEXTS) + str(rng.randint(0, 999))
        return s[: ct.flen] if ct.flen and ct.flen > 0 else s
    if f is Family.BYTES:
        n = rng.randint(0, 16)
        return col.normalize({"$b64": base64.b64encode(bytes(rng.randint(0, 255) for _ in range(n))).decode()})
    if f is Family.ENUM:
        return rng.randint(1, len(ct.elements))
    if f is Family.SET:
        return rng.randint(0, (1 << len(ct.elements)) - 1)
    if f is Family.BIT:
        return rng.randint(0, (1 << ct.display_length) - 1)
    if f is Family.JSON:
        return tidb_json_text({"k": rng.randint(0, 9), "s": rng.choice(TEXTS), "a": [1, 2.5, None, True]})
    raise AssertionError(f)


def generate(seed: int = 1, transactions: int = 1000, *, start_ms: int = START_MS,
             live_rows: int = 20_000) -> Iterator[Event]:
    """The events of the workload in commit order."""
    return iter(Workload(seed, transactions, start_ms=start_ms, live_rows=live_rows))


class Workload:
    """The workload's events (iterate once) and, once iterated, the upstream state they lead to.

    Memory stays bounded whatever the length: a table holding `live_rows` rows takes updates and deletes
    instead of inserts, so the state (and the expected final state written for `verify`) stays small."""

    def __init__(self, seed: int = 1, transactions: int = 1000, *, start_ms: int = START_MS,
                 live_rows: int = 20_000) -> None:
        self.seed, self.transactions, self.start_ms, self.live_rows = seed, transactions, start_ms, live_rows
        self.state = UpstreamState()

    def __iter__(self) -> Iterator[Event]:
        return _events(self)


class _Keys:
    """The live keys of one table, for a uniform random pick in O(1) whatever the table's size."""

    def __init__(self, keys: Iterator[tuple] | list[tuple]) -> None:
        self.items = list(keys)
        self.pos = {k: i for i, k in enumerate(self.items)}

    def add(self, k: tuple) -> None:
        if k not in self.pos:
            self.pos[k] = len(self.items)
            self.items.append(k)

    def remove(self, k: tuple) -> None:
        i = self.pos.pop(k, None)
        if i is None:
            return
        last = self.items.pop()
        if i < len(self.items):
            self.items[i] = last
            self.pos[last] = i

    def pick(self, below: Callable[[int], int], avoid: set[tuple]) -> tuple | None:
        """`below` is `rng._randbelow` (what `rng.randrange(n)` draws)."""
        items = self.items
        for _ in range(8):
            if not items:
                return None
            k = items[below(len(items))]
            if k not in avoid:
                return k
        return None


def _gen_rows(rng: random.Random) -> tuple[Callable[[TableInfo, int], Row], Callable[[TableInfo], TableGen]]:
    """A new row's values (the handle key `key`, a nullable column NULL one time in five, else its generator)
    and the table's generators, built once per table definition."""
    gens: dict[int, TableGen] = {}
    rand = rng.random

    def table_gen(t: TableInfo) -> TableGen:
        g = gens.get(id(t))
        if g is None or g.table is not t:
            g = gens[id(t)] = TableGen(rng, t)
        return g

    def row(t: TableInfo, key: int) -> Row:
        out: Row = {}
        for name, role, gen in table_gen(t).cols:
            if role == 0:
                out[name] = key
            elif role == 1 and rand() < 0.2:
                out[name] = None
            else:
                out[name] = gen()
        return out

    return row, table_gen


def _events(w: Workload) -> Iterator[Event]:
    seed, transactions, start_ms = w.seed, w.transactions, w.start_ms
    rng = random.Random(seed)
    rand = rng.random
    below = belows(rng)
    new_row, table_gen = _gen_rows(rng)
    tracker = SchemaTracker()
    state = w.state = UpstreamState()
    tables = state.tables
    apply = state.apply
    clock = [start_ms, 0]
    next_key: dict[tuple[str, str], int] = {}
    live: list[tuple[str, str]] = []
    live_rows = w.live_rows

    def tick() -> int:
        clock[0] += 1 + below(40)  # rng.randint(1, 40)
        clock[1] = below(1001)  # rng.randint(0, 1000)
        return compose(clock[0], clock[1])

    def ddl(sql: str) -> Event:
        before, after = tracker.apply(sql)
        ev = Event(kind=Kind.DDL, commit_ts=tick(), query=sql, ddl_type=action_from_query(sql), table=after,
                   pre_table=before)
        if ev.table is None and ev.pre_table is None:  # CREATE DATABASE
            ev.table = TableInfo(schema="app", table="")
        apply(ev)
        pools.clear()
        pools.update({n: _Keys(list(st.rows)) for n, st in tables.items()})
        live[:] = sorted(tables)
        return ev

    pools: dict[tuple[str, str], _Keys] = {}
    for sql in CREATE:
        yield ddl(sql)
    later = list(LATER)
    for i in range(transactions):
        while later and i >= later[0][0] * transactions:
            for sql in later.pop(0)[1]:
                yield ddl(sql)
        ts = tick()
        nlive = len(live)
        touched: dict[tuple[str, str], set[tuple]] = {}  # one change per key per transaction
        events: list[Event] = []
        for _ in range(1 + below(4)):  # rng.randint(1, 4)
            name = live[below(nlive)]  # rng.choice(live)
            st = tables[name]
            t = st.table
            pool = pools[name]
            mine = touched.setdefault(name, set())
            key = pool.pick(below, mine)
            op = rand()
            if len(st.rows) >= live_rows and key is not None:
                op = 0.45 + op * 0.55  # full: update or delete
            if key is None or op < 0.45:
                k = next_key.get(name, 1)
                next_key[name] = k + 1
                after = new_row(t, k)
                ev = Event(kind=Kind.INSERT, commit_ts=ts, table=t, after=after)
            else:
                before = dict(st.rows[key])
                if op < 0.85:
                    after = dict(before)
                    for cname, role, gen in table_gen(t).cols:
                        if role != 0 and rand() < 0.4:
                            after[cname] = None if role == 1 and rand() < 0.3 else gen()
                    if rand() < 0.1:  # a primary-key change
                        k = next_key.get(name, 1)
                        next_key[name] = k + 1
                        for n in t.handle_key:
                            after[n] = k
                    ev = Event(kind=Kind.UPDATE, commit_ts=ts, table=t, before=before, after=after)
                else:
                    ev = Event(kind=Kind.DELETE, commit_ts=ts, table=t, before=before)
            if ev.before is not None:
                kb = row_key(t, ev.before)
                mine.add(kb)
                pool.remove(kb)
            if ev.after is not None:
                ka = row_key(t, ev.after)
                mine.add(ka)
                pool.add(ka)
            apply(ev)
            events.append(ev)
        yield from events
