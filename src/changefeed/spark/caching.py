"""Caching a DataFrame without cloning its session: what keeps a long-running consumer's driver heap flat.

Spark's CacheManager plans every cached DataFrame (`persist`) in a clone of the DataFrame's session with
`spark.sql.sources.bucketing.autoBucketedScan.enabled` off, and, unless
`spark.sql.optimizer.canChangeCachedPlanOutputPartitioning` is on, AQE's final-stage shuffle optimizations off too
(`SparkSession.getOrCloneSessionWithConfigsOff`). Spark 4.0.1 never frees a cloned session: its ArtifactManager
registers a cleaner whose action holds the session (SPARK-54753, fixed after 4.0.1), so every clone stays, with
its SessionState, its copy of the Hadoop configuration and of the function registry. A consumer caches several
DataFrames a micro-batch (the batch, the rows held for a later window, a MERGE's source): `bench/soak.py`'s
driver held 151 sessions after 9.5 minutes (`jcmd GC.class_histogram`), its heap after a full GC growing 182 ->
487 MB (bench/RESULTS.md). With the two settings already as the cache wants them, it plans in the session itself and
nothing is cloned.

Neither changes a consumer's plans: its tables are Delta tables, never bucketed, and a cached micro-batch whose
output partitioning AQE may change is read by joins and aggregations that shuffle it anyway.
"""

from __future__ import annotations

from typing import Any

CACHE_IN_SESSION = {
    "spark.sql.sources.bucketing.autoBucketedScan.enabled": "false",
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
}


def cache_in_session(spark: Any) -> list[str]:
    """Set on `spark` (a SparkSession, or anything with its `conf`) what lets a cache plan in it without a
    clone; the settings it changed (none when they were set already: two reads of its conf)."""
    conf = spark.conf
    changed = []
    for key, value in CACHE_IN_SESSION.items():
        if str(conf.get(key, None)).lower() != value:
            conf.set(key, value)
            changed.append(key)
    return changed
