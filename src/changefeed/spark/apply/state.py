"""What a consumer knows between micro-batches, and what of it survives a restart.

Persisted in the progress record (`<lake>/_changefeed/progress/batch-<id>.json`, one per micro-batch, the
last one read back at start): `ConsumerState`
    applied_ts    the commit ts every table is complete up to (watermark mode: the window's upper end)
    watermarks    per partition ("topic/partition"): the latest watermark it delivered
    floors        per partition: the least commit ts its next change can have (dates untimed deletes)
    ddl_ts        the commit ts of the latest DDL applied
    key_held      without watermarks: batch -> (rows applied up to, its latest commit ts), for batches with
                  rows past a DDL barrier (saved as "held")
    key_floors    without watermarks: per "topic/partition/db.table", the latest commit ts applied there
                  (a row below it is a redelivery)
Rebuilt from the changelog at start (`restart.restore`): the catalog (table definitions, each column a
table has had, pending DDL and their broadcast copies, the latest DDL copy per partition) and, with
watermarks, the batches whose rows are not all applied yet (`pending_rows`).
Memory only (rebuilt lazily or not needed after a restart): each table's Delta version (`Lake`, read back
from the Delta log), the cached micro-batches still holding rows and their table spans (`backlog`), and
the row shapes a drifting stream carried (`TableCatalog.drift`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import table_features as features
from ..layout import LakeLayout
from .lake import read_json_files

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from .lake import Lake

PROGRESS_PREFIX = "batch-"
CUTOFF = "changelog-cutoff"  # beside the progress records: the latest batch's changelog cutoff (restart.restart_rows)


@dataclass
class ConsumerState:
    """The consumer's state that its progress record carries (see the module's docstring)."""

    applied_ts: int = 0
    watermarks: dict[str, int] = field(default_factory=dict)
    floors: dict[str, int] = field(default_factory=dict)
    ddl_ts: int = 0
    key_held: dict[int, tuple[int, int]] = field(default_factory=dict)
    key_floors: dict[str, int] = field(default_factory=dict)

    def restore(self, rec: dict[str, Any]) -> None:
        """Take the state a progress record holds (in place: others hold this object)."""
        self.applied_ts = rec["applied_ts"]
        self.watermarks = rec["watermarks"]
        self.floors = rec.get("floors") or {}
        self.ddl_ts = rec.get("ddl_ts") or 0
        self.key_held = {int(b): (v[0], v[1]) for b, v in (rec.get("held") or {}).items()}
        self.key_floors = rec.get("key_floors") or {}

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> ConsumerState:
        st = cls()
        st.restore(rec)
        return st


@dataclass
class BatchReport:
    batch_id: int
    rows_in: int = 0
    messages: int = 0  # every row of the batch (changes, control rows, errors): a bound on what it appends
    rows_applied: int = 0
    errors: int = 0
    ddl_applied: int = 0
    watermark: int = 0
    applied_ts: int = 0
    max_ts: int = 0  # the latest commit ts among the batch's changes
    tables: set[str] = field(default_factory=set)
    seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)  # seconds per step, for reports and benchmarks
    upgrades: list[features.Upgrade] = field(default_factory=list)  # Delta features a DDL turned on
    watermarks: dict[str, int] = field(default_factory=dict)  # per partition, after the batch (metrics)
    known_tables: int = 0  # tables the consumer knows a definition of, after the batch (metrics, status)
    iceberg_commits: int = 0  # Iceberg commits of the tables' Iceberg side (table-format delta+iceberg)

    def count(self, agg: Sequence[Mapping[str, Any]]) -> None:
        """The batch's changes and errors, and its latest commit ts, from its first job's counts (per kind,
        topic, partition and table)."""
        counts: Counter[str] = Counter()
        for r in agg:
            counts[r["kind"]] += r["n"]
        self.max_ts = max((r["ts"] or 0 for r in agg if r["kind"] in ("insert", "update", "delete")), default=0)
        self.errors = counts.get("error", 0)
        self.rows_in = sum(counts.get(k, 0) for k in ("insert", "update", "delete"))
        self.messages = sum(counts.values())


class Laps:
    """Adds the time since the previous lap to a report's phase."""

    def __init__(self, rep: BatchReport) -> None:
        self.rep = rep
        self.t = time.monotonic()

    def __call__(self, phase: str) -> None:
        now = time.monotonic()
        self.rep.phases[phase] = self.rep.phases.get(phase, 0.0) + now - self.t
        self.t = now


def progress_record(batch_id: int, state: ConsumerState, rep: BatchReport, at_ms: int) -> dict[str, Any]:
    """The progress record of a micro-batch: the state to restart from, and what the batch did."""
    return {"batch_id": batch_id, "applied_ts": state.applied_ts, "watermarks": state.watermarks,
            "rows": rep.rows_in, "errors": rep.errors, "at_ms": at_ms, "floors": state.floors,
            "ddl_ts": state.ddl_ts, "held": {str(b): list(v) for b, v in state.key_held.items()},
            "key_floors": state.key_floors, "ddl": rep.ddl_applied, "tables": rep.known_tables,
            "upgrades": [{"table": u.table, "feature": u.feature, "ddl": u.ddl, "commit_ts": u.commit_ts}
                         for u in rep.upgrades],
            "seconds": {k: round(v, 3) for k, v in rep.phases.items()}}


def read_progress(spark: SparkSession, lake: str, *, last: bool = False) -> list[dict[str, Any]]:
    """The consumer's progress records (one per micro-batch: applied watermark, per-partition watermarks,
    rows, errors, seconds per step), oldest first; `last=True`: only the latest."""
    return read_json_files(spark, LakeLayout(lake).progress, PROGRESS_PREFIX, last=last)


class ProgressLog:
    """The consumer's progress records in a lake: one small JSON file per micro-batch, written aside and
    renamed; the last one says where a restarted consumer stands (a Delta commit here cost seconds a batch,
    even for one row; see bench/RESULTS.md)."""

    def __init__(self, lake: Lake) -> None:
        self.lake = lake

    def last(self) -> dict[str, Any] | None:
        got = read_progress(self.lake.spark, self.lake.layout.lake, last=True)
        return got[-1] if got else None

    def next_batch_id(self) -> int:
        """For changes applied as a batch: one more than the last batch the lake recorded."""
        last = self.last()
        return 0 if last is None else int(last["batch_id"]) + 1

    def save(self, batch_id: int, state: ConsumerState, rep: BatchReport) -> None:
        rec = progress_record(batch_id, state, rep, int(time.time() * 1000))
        self.lake.write_json(self.lake.layout.progress, f"{PROGRESS_PREFIX}{batch_id:020d}.json", rec,
                             "the consumer's progress")

    def cutoff(self) -> tuple[int, int] | None:
        """The latest (batch id, changelog cutoff) recorded by `save_cutoff`."""
        got = read_json_files(self.lake.spark, self.lake.layout.progress, CUTOFF, last=True)
        return (int(got[-1]["batch_id"]), int(got[-1]["upto"])) if got else None

    def save_cutoff(self, batch_id: int, upto: int) -> None:
        """Recorded before the batch's changelog append, which keeps only the rows past `upto`."""
        self.lake.write_json(self.lake.layout.progress, f"{CUTOFF}.json", {"batch_id": batch_id, "upto": upto},
                             "the changelog's cutoff")
