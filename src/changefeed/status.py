"""`changefeed status`: where a consumer that is not running left a lake, from its progress records (one per
micro-batch, `<lake>/_changefeed/progress`), the same figures `/metrics` shows while it runs.

A local lake is read with plain file reads (no Spark to start); any other (s3a://...) through Spark's
Hadoop file system.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from .spark.layout import LakeLayout
from .tso import to_datetime

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROGRESS_PREFIX = "batch-"  # spark/apply/state.py's


def local_folder(path: str) -> Path | None:
    """The local folder of a lake path, or None for an object store URI."""
    if path.startswith("file://"):
        return Path(path[len("file://"):])
    if path.startswith("file:"):
        return Path(path[len("file:"):])
    return None if "://" in path else Path(path)


def progress_records(lake: str, spark: Callable[[], SparkSession]) -> list[dict[str, Any]]:
    """Every progress record of the lake, oldest first."""
    folder = LakeLayout(lake).progress
    local = local_folder(folder)
    if local is None:
        from .spark.apply import read_progress

        return read_progress(spark(), lake)
    if not local.is_dir():
        return []
    names = sorted(p.name for p in local.iterdir() if p.name.startswith(PROGRESS_PREFIX) and p.name.endswith(".json"))
    return [orjson.loads((local / n).read_bytes()) for n in names]


def applied_ts(lake: str, spark: Callable[[], SparkSession]) -> int:
    """The commit ts the lake's last progress record says every table is complete up to (0: none)."""
    local = local_folder(LakeLayout(lake).progress)
    if local is not None:
        names = sorted(p.name for p in local.glob(f"{PROGRESS_PREFIX}*.json")) if local.is_dir() else []
        last = orjson.loads((local / names[-1]).read_bytes()) if names else None
    else:
        from .spark.apply import read_progress

        got = read_progress(spark(), lake, last=True)
        last = got[-1] if got else None
    return int(last.get("applied_ts") or 0) if last else 0


def delta_tables(lake: str) -> list[str]:
    """`db.table` of each Delta table in a local lake (none listed where the lake is not local)."""
    root = local_folder(lake)
    if root is None or not root.is_dir():
        return []
    out = []
    for db in sorted(root.iterdir()):
        if db.is_dir() and not db.name.startswith("_"):
            out += [f"{db.name}.{t.name}" for t in sorted(db.iterdir()) if (t / "_delta_log").is_dir()]
    return out


def lake_status(records: list[dict[str, Any]], tables: list[str] | None = None,
                now: float | None = None) -> dict[str, Any]:
    """The figures of `/metrics`, from the progress records: the latest batch's state, totals over all."""
    now = time.time() if now is None else now
    if not records:
        return {"batches": 0}
    last = records[-1]
    applied = int(last.get("applied_ts") or 0)
    phases: dict[str, float] = {}
    for r in records:
        for k, v in (r.get("seconds") or {}).items():
            phases[k] = round(phases.get(k, 0.0) + v, 3)
    features = [u for r in records for u in r.get("upgrades") or []]
    return {
        "batches": len(records),
        "last_batch_id": last["batch_id"],
        "last_batch_at": last.get("at_ms", 0) / 1000,
        "applied_ts": applied,
        "applied_time": to_datetime(applied).isoformat() if applied else None,
        "lag_seconds": round(max(0.0, now - to_datetime(applied).timestamp()), 3) if applied else None,
        "watermarks": dict(sorted((last.get("watermarks") or {}).items())),
        "changes": sum(int(r.get("rows") or 0) for r in records),
        "dead_letters": sum(int(r.get("errors") or 0) for r in records),
        "ddl": sum(int(r.get("ddl") or 0) for r in records),
        "tables": len(tables) if tables else int(last.get("tables") or 0),
        "table_names": tables or [],
        "features": [{"table": u["table"], "feature": u["feature"]} for u in features],
        "last_batch_seconds": dict(last.get("seconds") or {}),
        "phase_seconds": phases,
    }


def status_lines(st: dict[str, Any], lake: str) -> list[str]:
    """`changefeed status` for a person."""
    if not st.get("batches"):
        return [f"{lake}: no progress records (no consumer has applied a micro-batch here)"]
    at = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(st["last_batch_at"]))
    lag = f"{st['lag_seconds']:,.1f} s behind now" if st["lag_seconds"] is not None else "no commit ts yet"
    out = [f"{lake}: {st['batches']:,} micro-batches, the last (batch {st['last_batch_id']}) at {at} UTC",
           f"applied up to commit ts {st['applied_ts']} ({st['applied_time'] or '-'}), {lag}",
           f"{st['changes']:,} changes, {st['ddl']:,} DDL, {st['dead_letters']:,} dead letters, "
           f"{st['tables']:,} tables"]
    for k, v in st["watermarks"].items():
        out.append(f"  watermark {k}: {v}")
    for f in st["features"]:
        out.append(f"  feature {f['feature']} on {f['table']}")
    last = ", ".join(f"{k} {v:.2f} s" for k, v in st["last_batch_seconds"].items())
    if last:
        out.append(f"last micro-batch: {last}")
    return out
