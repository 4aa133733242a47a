"""A small table's window merged on the driver, in Arrow: each key's last operation applied to the rows the driver
holds for the table (`driverfiles.Kept`), as `multiwrite`'s Spark job computes it. Values only, no I/O.

A small table's rewrite in Spark took ~6 jobs (AQE runs each shuffle stage as one: the window for each key's last
change, the held rows' side of the full outer join, the result), and sent the held rows to the JVM first, for a
few thousand rows: 12 of a steady 250-event micro-batch's 16 jobs for the main workload's two tables
(bench/RESULTS.md). Here one job collects the window's typed operations (`scd1.flat_ops`: the same typing, in
Spark), and the rest is done on the driver: the order rule (`ordering.order`: the sequence columns, `__r`, the
change's place; each descending, NULLs last as Spark's `desc()`), the join by key (NULL equal to NULL, as the
job's null-safe join of a nullable key; a NOT NULL key never holds one) and the columns taken as `multiwrite`'s
`_join_columns` takes them. Whatever this cannot do exactly as Spark does returns None, and the table takes the
Spark job: a floating-point key or ordering column (Spark's NaN and -0.0 rules), an operation's column typed
other than the table's file (Spark's cast), a NOT NULL column that would hold NULL (Spark's error)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .ordering import UPSERT

if TYPE_CHECKING:
    import pyarrow as pa

OP = "__op"
# rows (held and operations) above which Arrow's hash join pairs them: below, its ~0.25 ms a call costs more than the
# loop (0.04 ms for 200 rows and 18 operations; a micro-batch over 1,000 small tables makes 1,000 calls)
JOIN_ROWS = 2_000


def _plain(t: pa.DataType) -> bool:
    """A type whose equality and order are the same in Arrow, Python and Spark."""
    import pyarrow as pa

    return not (pa.types.is_floating(t) or pa.types.is_nested(t) or pa.types.is_dictionary(t))


def last_per_key(ops: pa.Table, key_names: list[str], by: list[str]) -> pa.Table | None:
    """Each key's last operation among `ops` (one table's): the first row of each key in the order of `by`, each
    descending with NULLs last (`scd1.last_ops`' window); None where a key or ordering column is not `_plain`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if any(not _plain(ops.schema.field(n).type) for n in [*key_names, *by]):
        return None
    if ops.num_rows <= 1:
        return ops
    order = pc.sort_indices(ops, sort_keys=[*((k, "ascending", "at_end") for k in key_names),
                                            *((n, "descending", "at_end") for n in by)])
    s = ops.take(order)
    n = s.num_rows
    new: pa.Array | None = None  # whether a row's key differs from the row's before it (NULL equal to NULL)
    for k in key_names:
        a, b = s[k].slice(1), s[k].slice(0, n - 1)
        both = pc.and_(pc.is_null(a), pc.is_null(b))
        d = pc.if_else(both, False, pc.fill_null(pc.not_equal(a, b), True))
        new = d if new is None else pc.or_(new, d)
    assert new is not None  # a table has a key (all its columns when it declares none)
    chunks = new.chunks if isinstance(new, pa.ChunkedArray) else [new]
    first = pa.concat_arrays([pa.array([True]), *chunks])
    return s.filter(first)


def apply(held: pa.Table, last: pa.Table, keys: list[str], key_names: list[str], cols: list[str], vals: list[str],
          has: list[str], not_null: frozenset[str] = frozenset()) -> pa.Table | None:
    """The table's rows after its last operations (`last_per_key`): a held row of a key deleted goes, of a key
    written takes the image's columns it holds (`has`), others stay; a written key not held is a new row (columns
    the image lacks NULL). The held rows' schema throughout; None where Spark's job would differ (see above), as
    for a NULL in a column of `not_null` (the table's NOT NULL columns) or of a field `held` says is not null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = held.schema
    names = set(schema.names)
    if any(k not in names for k in keys):
        return None
    for k, n in zip(keys, key_names, strict=True):
        if last.schema.field(n).type != schema.field(k).type or not _plain(schema.field(k).type):
            return None
    val = {c: (v, h) for c, v, h in zip(cols, vals, has, strict=True) if c in names and c not in keys}
    if any(last.schema.field(v).type != schema.field(c).type for c, (v, _) in val.items()):
        return None
    pairs = _pairs_joined(held, last, keys, key_names) if held.num_rows + last.num_rows > JOIN_ROWS else None
    if pairs is None:
        pairs = _pairs_looped(held, last, keys, key_names)
    kept, pairs_e, pairs_l = pairs
    lt = last.take(pairs_l)
    et = held.take(pairs_e)  # a NULL index (a new key): a row of NULLs
    columns = []
    for f in schema:
        if f.name in keys:
            v = lt[key_names[keys.index(f.name)]]
        elif f.name in val:
            value, holds = val[f.name]
            v = pc.if_else(pc.fill_null(lt[holds], False), lt[value], et[f.name])
        else:
            v = et[f.name]
        if (not f.nullable or f.name in not_null) and v.null_count:
            return None  # the job raises its error for this
        columns.append(v)
    written = pa.Table.from_arrays(columns, schema=schema)
    return pa.concat_tables([kept, written]).combine_chunks()


def _positions(n: int) -> pa.Array:
    """0 .. n-1 as int64 (numpy's arange: a Python range of 666,670 took 47 ms)."""
    import numpy as np
    import pyarrow as pa

    return pa.array(np.arange(n, dtype=np.int64))


Pairs = tuple["pa.Table", "pa.Array", "pa.Array"]  # held rows unchanged; (held row or NULL, operation) per row written


def _pairs_joined(held: pa.Table, last: pa.Table, keys: list[str], key_names: list[str]) -> Pairs | None:
    """`_pairs_looped`'s pairs by Arrow's hash join, in the same order: 0.10-0.13 s for a table of 666,670 rows and
    250,000 operations where the loop took 0.78 s (bench/RESULTS.md). None where a key holds a NULL (the
    join matches no NULL; Spark's null-safe join matches NULL to NULL) or a key type the join lacks."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if any(held[k].null_count for k in keys) or any(last[n].null_count for n in key_names):
        return None
    names = [f"__k{i}" for i in range(len(keys))]
    h = pa.table([*(held[k] for k in keys), _positions(held.num_rows)], names=[*names, "__i"])
    lk = pa.table([*(last[n] for n in key_names), _positions(last.num_rows), pc.equal(last[OP], UPSERT)],
                  names=[*names, "__j", "__u"])
    try:  # the hash table built over the operations (fewer than the rows held, as a rule): 3x faster than over them
        both = h.join(lk, names, join_type="right outer", use_threads=False)
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid):
        return None
    changed = pc.unique(both["__i"].drop_null())
    kept = held.filter(pc.invert(pc.is_in(h["__i"], value_set=changed)))  # (h's positions: made once)
    written = both.filter(both["__u"]).sort_by([("__j", "ascending"), ("__i", "ascending")])
    return kept, written["__i"], written["__j"]


def _pairs_looped(held: pa.Table, last: pa.Table, keys: list[str], key_names: list[str]) -> Pairs:
    """The held rows no operation's key matches (NULL equal to NULL), and for each UPSERT the rows it writes: a
    (held row, operation) pair per held row of its key, (NULL, operation) for a key not held."""
    import pyarrow as pa

    index: dict[tuple, list[int]] = {}
    for i, key in enumerate(zip(*(held[k].to_pylist() for k in keys), strict=True)):
        index.setdefault(key, []).append(i)
    changed: set[int] = set()
    pairs_e: list[int | None] = []
    pairs_l: list[int] = []
    ops = last[OP].to_pylist()
    for j, key in enumerate(zip(*(last[n].to_pylist() for n in key_names), strict=True)):
        hit = index.get(key, ())
        changed.update(hit)
        if ops[j] != UPSERT:
            continue
        for i in hit or (None,):
            pairs_e.append(i)
            pairs_l.append(j)
    kept = held.take(pa.array([i for i in range(held.num_rows) if i not in changed], pa.int64()))
    return kept, pa.array(pairs_e, pa.int64()), pa.array(pairs_l, pa.int64())


def apply_all(held: list[pa.Table], ops: pa.Table, table: str, keys: list[str], key_names: list[str], cols: list[str],
              vals: list[str], has: list[str], by: list[str], not_null: frozenset[str] = frozenset()
              ) -> pa.Table | None:
    """Several tables of one schema at once: `held[i]` the rows table i holds, `ops` the tables' operations, each
    its table's index in column `table`. Each table's rows after them, that index beside them: what `last_per_key`
    and `apply` give table by table, in one pass (the index a key column more), each table's rows in the order
    `apply` gives them. None as `last_per_key` or `apply` say for any of the tables, or where their held rows'
    schemas differ (a column's nullability, as Spark read them)."""
    import numpy as np
    import pyarrow as pa

    if not held or any(h.schema != held[0].schema for h in held):
        return None
    t_type = ops.schema.field(table).type
    field = pa.field(table, t_type)
    parts = [h.append_column(field, pa.array(np.full(h.num_rows, i), t_type)) for i, h in enumerate(held) if h.num_rows]
    rows = pa.concat_tables(parts).combine_chunks() if parts else held[0].append_column(field, pa.array([], t_type))
    last = last_per_key(ops, [table, *key_names], by)
    if last is None:
        return None
    return apply(rows, last, [table, *keys], [table, *key_names], cols, vals, has, not_null)
