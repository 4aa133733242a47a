"""A small table's window merged on the driver (`drivermerge`), checked without Spark against a plain-Python model
of what `multiwrite`'s job computes (`scd1.last_ops`' window, then `_join_columns`' full outer join): the last
operation per key by the ordering columns each descending with NULLs last, a nullable key's NULL matching NULL,
a column the image lacks keeping the held value; and None wherever Spark would differ or fail."""

from __future__ import annotations

import random
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from changefeed.spark.apply import drivermerge

KEYS = ["id", "tag"]
KEY_NAMES = ["__k0", "__k1"]
COLS = ["id", "tag", "name", "amount"]
VALS = ["__v0", "__v1", "__v2", "__v3"]
HAS = ["__h0", "__h1", "__h2", "__h3"]
BY = ["commit_ts", "__r", "offset"]
HELD = pa.schema([pa.field("id", pa.int64(), False), pa.field("tag", pa.string()), pa.field("name", pa.string()),
                  pa.field("amount", pa.decimal128(12, 2)), pa.field("extra", pa.int32())])
OPS = pa.schema([pa.field("commit_ts", pa.int64()), pa.field("__r", pa.int32()), pa.field("offset", pa.int64()),
                 pa.field("__op", pa.string()), pa.field("__k0", pa.int64()), pa.field("__k1", pa.string()),
                 *[pa.field(v, t) for v, t in zip(VALS, [pa.int64(), pa.string(), pa.string(), pa.decimal128(12, 2)],
                                                  strict=True)],
                 *[pa.field(h, pa.bool_()) for h in HAS]])


def _model(held: list[dict], ops: list[dict]) -> list[tuple]:
    """The Spark job's rows, computed the plain way: per key, the operation greatest by `BY` (NULL below every
    value: DESC NULLS LAST), then held rows joined to it by key, NULL equal to NULL."""
    def rank(o: dict) -> tuple:
        return tuple((0, 0) if o[c] is None else (1, o[c]) for c in BY)

    last: dict[tuple, dict] = {}
    for o in ops:
        k = (o["__k0"], o["__k1"])
        if k not in last or rank(o) > rank(last[k]):
            last[k] = o
    out = []
    for r in held:
        o = last.get((r["id"], r["tag"]))
        if o is None:
            out.append(r)
        elif o["__op"] == "U":
            out.append({**r, **{c: o[v] for c, v, h in zip(COLS, VALS, HAS, strict=True) if o[h] and c not in KEYS}})
    held_keys = {(r["id"], r["tag"]) for r in held}
    for k, o in last.items():
        if k not in held_keys and o["__op"] == "U":
            out.append({"id": k[0], "tag": k[1], "extra": None,
                        **{c: (o[v] if o[h] else None) for c, v, h in zip(COLS[2:], VALS[2:], HAS[2:], strict=True)}})
    return sorted((tuple(r[f] for f in HELD.names) for r in out), key=repr)


def _rows(t: pa.Table) -> list[tuple]:
    return sorted((tuple(r[f] for f in HELD.names) for r in t.to_pylist()), key=repr)


def _case(rng: random.Random) -> tuple[list[dict], list[dict]]:
    tags = [None, "a", "b"]
    held = [{"id": i, "tag": tag, "name": f"n{i}", "amount": Decimal(f"{i}.25"), "extra": i * 7}
            for i in range(12) for tag in tags if rng.random() < 0.6]
    ops = []
    for n in range(rng.randint(0, 40)):
        ts = rng.choice([None, *range(1, 6)])  # ties decided by __r, then the place
        op = rng.choice("UUD")
        ops.append({"commit_ts": ts, "__r": 1 if op == "U" else rng.choice([0, 1]), "offset": n,
                    "__op": op, "__k0": rng.randrange(15), "__k1": rng.choice(tags),
                    "__v0": None, "__v1": None, "__v2": f"m{n}" if rng.random() < 0.8 else None,
                    "__v3": Decimal(f"{n}.50") if op == "U" else None,
                    "__h0": op == "U", "__h1": op == "U", "__h2": op == "U" and rng.random() < 0.7,
                    "__h3": op == "U" and rng.random() < 0.7 if n % 9 else None})
    return held, ops


def _merge(held: list[dict], ops: list[dict]) -> pa.Table | None:
    h = pa.Table.from_pylist(held, schema=HELD)
    last = drivermerge.last_per_key(pa.Table.from_pylist(ops, schema=OPS), KEY_NAMES, BY)
    assert last is not None
    return drivermerge.apply(h, last, KEYS, KEY_NAMES, COLS, VALS, HAS)


@pytest.mark.parametrize("join_rows", [drivermerge.JOIN_ROWS, 0])  # rows paired by the loop; by the hash join
def test_the_driver_merges_a_window_as_the_spark_job_does(monkeypatch: pytest.MonkeyPatch, join_rows: int) -> None:
    monkeypatch.setattr(drivermerge, "JOIN_ROWS", join_rows)
    for seed in range(24):
        held, ops = _case(random.Random(seed))
        for o in ops:  # the column is NOT NULL in the table (its job raises for a NULL id): written ids are set
            o["__v0"] = o["__k0"]
            o["__v1"] = o["__k1"]
        got = _merge(held, ops)
        assert got is not None and got.schema == HELD, seed
        assert _rows(got) == _model(held, ops), seed


def test_what_spark_would_do_otherwise_is_left_to_its_job() -> None:
    held = [{"id": 1, "tag": "a", "name": "x", "amount": Decimal("1.00"), "extra": 1}]
    new = {"commit_ts": 5, "__r": 1, "offset": 0, "__op": "U", "__k0": None, "__k1": "b", "__v0": None,
           "__v1": "b", "__v2": "y", "__v3": None, "__h0": True, "__h1": True, "__h2": True, "__h3": False}
    assert _merge(held, [new]) is None  # NULL in the NOT NULL id: Spark's job raises its error
    assert _merge(held, [{**new, "__k0": 2}]) is not None
    # the table's NOT NULL column, whatever the held rows' Arrow schema says (Spark's toArrow may call it nullable)
    h = pa.Table.from_pylist(held, schema=HELD)
    last = drivermerge.last_per_key(pa.Table.from_pylist([{**new, "__k0": 2, "__v2": None}], schema=OPS), KEY_NAMES, BY)
    assert last is not None
    assert drivermerge.apply(h, last, KEYS, KEY_NAMES, COLS, VALS, HAS, frozenset({"name"})) is None
    assert drivermerge.apply(h, last, KEYS, KEY_NAMES, COLS, VALS, HAS, frozenset({"tag"})) is not None
    # a value typed other than the table's file (Spark's cast would decide), a floating key or ordering column
    h = pa.Table.from_pylist(held, schema=HELD)
    ops = pa.Table.from_pylist([{**new, "__k0": 2}], schema=OPS)
    wider = ops.set_column(ops.schema.get_field_index("__v3"), "__v3", ops["__v3"].cast(pa.decimal128(20, 2)))
    assert drivermerge.apply(h, wider, KEYS, KEY_NAMES, COLS, VALS, HAS) is None
    floating = ops.set_column(ops.schema.get_field_index("offset"), "offset", ops["offset"].cast(pa.float64()))
    assert drivermerge.last_per_key(floating, KEY_NAMES, BY) is None


def test_tables_holding_no_rows_are_merged_at_once_as_each_alone() -> None:
    """Several empty tables' operations (a database's new tables, each its index in `__t`): each table's rows as the
    model computes them from its own operations; a NULL where a NOT NULL column would take it declines all."""
    rng = random.Random(11)
    empty = HELD.empty_table()
    per_table = [_case(rng)[1] for _ in range(5)]
    ops = pa.Table.from_pylist([{**o, "__t": i} for i, table_ops in enumerate(per_table) for o in table_ops],
                               schema=OPS.append(pa.field("__t", pa.int32())))
    got = drivermerge.apply_all([empty] * 5, ops, "__t", KEYS, KEY_NAMES, COLS, VALS, HAS, BY)
    assert got is not None
    for i, table_ops in enumerate(per_table):
        mine = got.filter(pc.equal(got["__t"], i)).drop_columns(["__t"])
        assert _rows(mine) == _model([], table_ops), i
    assert sum(_model([], o) != [] for o in per_table) >= 3  # (tables with rows among them)
    assert drivermerge.apply_all([empty] * 5, ops, "__t", KEYS, KEY_NAMES, COLS, VALS, HAS, BY,
                                 frozenset({"name"})) is None  # (some new row's name is NULL)


@pytest.mark.parametrize("join_rows", [drivermerge.JOIN_ROWS, 0])
def test_tables_holding_rows_are_merged_at_once_as_each_alone(monkeypatch: pytest.MonkeyPatch, join_rows: int) -> None:
    """A group's tables with the rows they hold (a steady micro-batch over many small tables): each table's rows
    as the model computes them from its own rows and operations, in the order `apply` gives them for it alone;
    tables whose held rows' schemas differ are declined (each then merged alone)."""
    monkeypatch.setattr(drivermerge, "JOIN_ROWS", join_rows)
    for seed in range(8):
        rng = random.Random(100 + seed)
        cases = [_case(rng) for _ in range(6)]
        for _, ops in cases:
            for o in ops:
                o["__v0"], o["__v1"] = o["__k0"], o["__k1"]
        held = [pa.Table.from_pylist(h, schema=HELD) for h, _ in cases]
        ops = pa.Table.from_pylist([{**o, "__t": i} for i, (_, table_ops) in enumerate(cases) for o in table_ops],
                                   schema=OPS.append(pa.field("__t", pa.int32())))
        got = drivermerge.apply_all(held, ops, "__t", KEYS, KEY_NAMES, COLS, VALS, HAS, BY)
        assert got is not None, seed
        for i, (h, table_ops) in enumerate(cases):
            mine = got.filter(pc.equal(got["__t"], i)).drop_columns(["__t"])
            assert _rows(mine) == _model(h, table_ops), (seed, i)
            alone = _merge(h, table_ops)
            assert alone is not None and mine.to_pylist() == alone.to_pylist(), (seed, i)  # the same order too
    other = pa.schema([f.with_nullable(True) for f in HELD])
    assert drivermerge.apply_all([held[0], held[1].cast(other)], ops, "__t", KEYS, KEY_NAMES, COLS, VALS, HAS,
                                 BY) is None


def test_the_hash_join_pairs_rows_as_the_loop_does() -> None:
    """`apply`'s pairs (held rows kept; held row and operation per row written) by Arrow's hash join, checked
    against the plain loop it replaced: the same rows in the same order, a key held twice written twice; a NULL
    in a key leaves it to the loop (the join would not match NULL to NULL)."""
    for seed in range(16):
        rng = random.Random(seed)
        held, ops = _case(rng)
        held = [r for r in held if r["tag"] is not None]
        held += [dict(r) for r in held if rng.random() < 0.2]  # a key held twice (a table keyed by all columns)
        ops = [o for o in ops if o["__k1"] is not None]
        h = pa.Table.from_pylist(held, schema=HELD)
        last = drivermerge.last_per_key(pa.Table.from_pylist(ops, schema=OPS), KEY_NAMES, BY)
        assert last is not None
        joined = drivermerge._pairs_joined(h, last, KEYS, KEY_NAMES)
        assert joined is not None, seed
        looped = drivermerge._pairs_looped(h, last, KEYS, KEY_NAMES)
        assert joined[0].equals(looped[0]), seed
        assert [a.to_pylist() for a in joined[1:]] == [a.to_pylist() for a in looped[1:]], seed
    h = pa.Table.from_pylist([{"id": 1, "tag": None, "name": "x", "amount": None, "extra": 1}], schema=HELD)
    assert drivermerge._pairs_joined(h, h.select([]).append_column("__k0", pa.array([1], pa.int64())).append_column(
        "__k1", pa.array([None], pa.string())).append_column("__op", pa.array(["U"])), KEYS, KEY_NAMES) is None
