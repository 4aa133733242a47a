"""Where ours' volume run goes: `bench/spark_pipeline.py`'s topic applied by our pipeline alone, run after run in one
session, each run's phases, and the last run's Spark stages (wall, task seconds, the task threads' JVM CPU, tasks,
records) read from Spark's REST API.

    .venv/bin/python bench/volume_stages.py [--changes 1000000] [--runs 3] [--alternate K=V1,V2] [--conf K=V ...]

`--alternate`: a session setting (a SQL conf) set to V1, V2, V1, ... before each run: an A/B in one session, where
the JIT's convergence (each run faster than the one before for the first several) shows as the pairs' trend, not
as a difference between two processes. The UI is turned on for the stages (not in any figure of spark_pipeline.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import spark_pipeline as sp  # noqa: E402
from kafka import broker  # noqa: E402


def _when(text: str) -> float:
    return datetime.datetime.strptime(text.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def stages(app: str, since: float) -> list[str]:
    """The stages submitted after `since` (epoch seconds), one line each, in order."""
    base = f"http://localhost:4040/api/v1/applications/{app}/stages"
    out = []
    for s in sorted(json.load(urllib.request.urlopen(f"{base}?status=complete")), key=lambda s: s["stageId"]):
        if not s.get("submissionTime") or _when(s["submissionTime"]) < since:
            continue
        start, end = _when(s["submissionTime"]), _when(s["completionTime"])
        tasks = json.load(urllib.request.urlopen(f"{base}/{s['stageId']}/{s['attemptId']}/taskList?length=100"))
        longest = max((t.get("duration", 0) for t in tasks), default=0) / 1000
        out.append(f"  stage {s['stageId']:4d} at {start - since:6.2f} s: wall {end - start:5.2f} s, task-s "
                   f"{s['executorRunTime'] / 1000:5.2f}, JVM CPU {s['executorCpuTime'] / 1e9:5.2f} s, "
                   f"{s['numTasks']:3d} tasks (longest {longest:5.2f} s), in {s['inputRecords']:7d}, "
                   f"shuffle {s['shuffleReadRecords']:7d} / {s['shuffleWriteRecords']:7d}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--changes", type=int, default=1_000_000)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--alternate", help="K=V1,V2: a SQL conf set to each value in turn before each run")
    ap.add_argument("--conf", action="append", default=[], help="a Spark setting K=V over the session's defaults")
    a = ap.parse_args()
    from changefeed.spark import spark_session

    conf = {"spark.ui.enabled": "true", **dict(c.split("=", 1) for c in a.conf)}
    key, values = (a.alternate.split("=", 1)[0], a.alternate.split("=", 1)[1].split(",")) if a.alternate \
        else (None, [])
    evs = sp.events(a.changes)
    with tempfile.TemporaryDirectory() as tmp, broker(None, Path(tmp)) as where:
        topic = f"stages_{uuid.uuid4().hex[:8]}"
        sp.produce(evs, where, topic)
        del evs
        spark = spark_session("local[2]", "changefeed-volume-stages", conf=conf)
        spark.sparkContext.setLogLevel("ERROR")
        meter = sp._meters(spark)
        since = time.time()
        for i in range(a.runs):
            setting = ""
            if key is not None:
                spark.conf.set(key, values[i % len(values)])
                setting = f" ({key}={values[i % len(values)]})"
            sp.PHASES.clear()
            since = time.time()
            c0, g0, j0 = meter()
            wall = sp.ours(spark, where, topic, Path(tmp) / f"run{i}", a.changes // a.batches + 1)
            c1, g1, j1 = meter()
            print(f"run {i}{setting}: {wall:.2f} s, {c1 - c0:.1f} CPU-s, GC {g1 - g0:.1f} s, {j1 - j0} jobs; phases "
                  + ", ".join(f"{k} {v:.2f}" for k, v in sp.PHASES.items()), flush=True)
        time.sleep(1)  # the listener's last stage
        print(f"the last run's stages (since its start, {a.batches} micro-batches):")
        print("\n".join(stages(spark.sparkContext.applicationId, since)))


if __name__ == "__main__":
    main()
