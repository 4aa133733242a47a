"""The ordering rule between micro-batches: which rows may be applied now. Plain Python over plain data.

With watermarks (TiCDC's resolved ts): a partition's watermark says it will deliver no change at or below
it. The global watermark is the least of every partition's (0 while some partition has delivered none), and
each micro-batch applies the window (applied, global] of every batch read so far, in commit order, then
applied := global. A change at or below `applied` (an at-least-once redelivery) never enters a window again.

Without watermarks (avro, Debezium): each batch is applied as it comes, every key in its own order, up to a
barrier: the first pending DDL that some partition of its topic has not delivered its copy of yet (TiCDC's
MQ sink sends a DDL to every partition after the rows before it), so rows after a DDL wait for it. A row
older than what its partition already applied for its table is a redelivery (`RedeliveryFloors`).

A table's Delta txnVersion (`txn_version`) is the commit ts it is complete up to with watermarks; without,
it is the batch and the step within it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .options import ROW_KINDS

if TYPE_CHECKING:
    from pyspark.sql import Column

    from .ddlplan import Ddl

TableKey = tuple[str, str]
Span = tuple[int, int, int]  # a table's least and latest commit ts in a batch, and its number of changes
UNBOUNDED = (1 << 63) - 1  # no barrier


def partition_key(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


def global_watermark(watermarks: Mapping[str, int], partitions: Mapping[str, int]) -> int:
    """The least watermark over every partition (`partitions`: topic -> partition count; none given: the
    partitions seen so far); 0 while one has delivered none."""
    keys = [partition_key(t, i) for t, n in partitions.items() for i in range(n)]
    if not keys:
        keys = list(watermarks)
    if not keys or any(k not in watermarks for k in keys):
        return 0
    return min(watermarks[k] for k in keys)


@dataclass(frozen=True)
class Window:
    """The commit ts (lo, hi] a window applies."""

    lo: int
    hi: int

    def __contains__(self, commit_ts: int) -> bool:
        return self.lo < commit_ts <= self.hi

    def sql(self) -> str:
        return f"commit_ts > {self.lo} AND commit_ts <= {self.hi}"


def next_window(applied_ts: int, watermark: int) -> Window | None:
    """The window the global watermark opens (None: it has not passed what is applied)."""
    return Window(applied_ts, watermark) if watermark > applied_ts else None


def ddls_in(pending: Iterable[Ddl], lo: int, hi: int, *, keyed: bool) -> list[Ddl]:
    """The pending DDL a window applies, in commit order: those in (lo, hi]; without watermarks (`keyed`)
    every one up to hi (the barrier)."""
    return sorted((d for d in pending if (keyed or lo < d.commit_ts) and d.commit_ts <= hi),
                  key=lambda d: d.commit_ts)


def barrier(pending: Iterable[Ddl], copies: Mapping[tuple[int, str], set[str]], ddl_seen: Mapping[str, int],
            partitions: Mapping[str, int]) -> int:
    """Without watermarks, the commit ts rows may be applied up to: just below the first pending DDL that
    some partition of its topic has not delivered yet (its rows before the DDL may still come)."""
    for d in sorted(pending, key=lambda d: d.commit_ts):
        for topic in copies.get((d.commit_ts, d.query), ()):
            if any(ddl_seen.get(partition_key(topic, i), 0) < d.commit_ts for i in range(partitions.get(topic) or 0)):
                return d.commit_ts - 1
    return UNBOUNDED


def txn_version(commit_ts: int, *, keyed_batch: int | None = None, step: int = 0, ddl: bool = False) -> int:
    """The Delta txnVersion of a table's commit: with watermarks the commit ts it is complete up to; without
    (`keyed_batch`), batch * 1,000,000 + 2 * step (+ 1 for the step's DDL), step counting the batch's DDL."""
    if keyed_batch is None:
        return commit_ts
    return keyed_batch * 1_000_000 + 2 * step + (1 if ddl else 0)


def batch_spans(agg: Iterable[Mapping[str, Any]]) -> dict[TableKey, Span] | None:
    """Each table's span in a batch, from its per (kind, topic, partition, database, table) counts (`n`) and
    least and latest commit ts (`lo`, `ts`); None: a change without commit ts (to be dated) leaves it unknown."""
    spans: dict[TableKey, Span] = {}
    for r in agg:
        if r["kind"] in ROW_KINDS:
            if r["ts"] is None or r["lo"] is None:
                return None
            k = (r["database"], r["table"])
            have = spans.get(k)
            spans[k] = (r["lo"], r["ts"], r["n"]) if have is None else (
                min(have[0], r["lo"]), max(have[1], r["ts"]), have[2] + r["n"])
    return spans


def window_spans(spans: Mapping[int, dict[TableKey, Span]], pending_rows: Mapping[int, int],
                 batches: list[int]) -> list[dict[TableKey, Span]] | None:
    """The table spans of every batch a window reads (None: one is not known, e.g. read back after a
    restart; a batch with no rows pending has none)."""
    got = [spans.get(b, None if b in pending_rows else {}) for b in batches]
    return None if any(g is None for g in got) else got  # type: ignore[return-value]


def tables_in_window(spans: list[dict[TableKey, Span]], lo: int, hi: int) -> dict[TableKey, int]:
    """The tables with rows in (lo, hi] (a span that meets it), and their changes in the batches read."""
    counts: dict[TableKey, int] = {}
    for per_batch in spans:
        for k, (least, latest, n) in per_batch.items():
            if least <= hi and latest > lo:
                counts[k] = counts.get(k, 0) + n
    return counts


def unapplied(pending_rows: Mapping[int, int], hi: int) -> dict[int, int]:
    """The batches that still hold rows once a window up to hi is applied."""
    return {b: ts for b, ts in pending_rows.items() if ts > hi}


def keyed_held(held: Mapping[int, tuple[int, int]], batch_id: int, hi: int, max_ts: int) -> dict[int, tuple[int, int]]:
    """Without watermarks, after a batch applied rows up to the barrier hi: the batches holding rows past it,
    each (rows applied up to, its latest commit ts); this batch too when it has some."""
    out = {b: (max(lo, hi), top) for b, (lo, top) in held.items() if b != batch_id and top > hi}
    if max_ts > hi:
        out[batch_id] = (hi, max_ts)
    return out


def raise_watermarks(watermarks: dict[str, int], agg: Iterable[Mapping[str, Any]]) -> None:
    """Each partition's watermark raised to the latest its micro-batch delivered (the batch's first job's counts:
    its `watermark` rows per topic and partition)."""
    for r in agg:
        if r["kind"] == "watermark":
            k = partition_key(r["topic"], r["partition"])
            watermarks[k] = max(watermarks.get(k, 0), r["ts"])


def raise_delete_floors(floors: dict[str, int], agg: Iterable[Mapping[str, Any]]) -> None:
    """Per partition, the least commit ts its next change can have: past its latest row's, or one past its
    latest watermark (an untimed delete is dated no lower)."""
    for r in agg:
        if r["kind"] in (*ROW_KINDS, "watermark") and r["ts"]:
            k = partition_key(r["topic"], r["partition"])
            floors[k] = max(floors.get(k, 0), r["ts"] + (r["kind"] == "watermark"))


class RedeliveryFloors:
    """Without watermarks: per partition and table, the latest commit ts applied (persisted as the state's
    `key_floors`). A row below its floor is a redelivery, dropped as TiCDC's own consumer drops it; a row at
    it may be the rest of a transaction, and is kept. Rows without commit ts, and rows with a binlog position
    (real Debezium's clock is milliseconds, not an order), are always kept."""

    def __init__(self, floors: dict[str, int]) -> None:
        self.floors = floors

    @staticmethod
    def key(topic: str, partition: int, database: str, table: str) -> str:
        return f"{topic}/{partition}/{database}.{table}"

    def raise_to(self, topic: str, partition: int, database: str, table: str, top: int) -> None:
        k = self.key(topic, partition, database, table)
        self.floors[k] = max(self.floors.get(k, 0), top)

    def admits(self, topic: str, partition: int, database: str, table: str, commit_ts: int | None,
               positioned: bool = False) -> bool:
        """The rule `column` states in Spark, for one row."""
        ts = commit_ts or 0
        floor = self.floors.get(self.key(topic, partition, database, table))
        return ts == 0 or positioned or floor is None or ts >= floor

    def column(self) -> Column | None:
        """The rows `admits`, as a Spark condition (None: no floor yet)."""
        if not self.floors:
            return None
        from pyspark.sql import functions as F

        m = F.create_map(*[x for k, v in self.floors.items() for x in (F.lit(k), F.lit(v).cast("long"))])
        floor = m[F.concat(F.col("topic"), F.lit("/"), F.col("partition").cast("string"), F.lit("/"),
                           F.col("database"), F.lit("."), F.col("table"))]
        ts = F.coalesce(F.col("commit_ts"), F.lit(0))
        return (ts == 0) | F.col("position").isNotNull() | floor.isNull() | (ts >= floor)
