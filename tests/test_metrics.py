"""The metrics server on its own (no Spark): Prometheus text a parser reads, and /healthz turning 503 when no
micro-batch completes in time or the query failed."""

from __future__ import annotations

import time
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from changefeed.metrics import ConsumerMetrics, MetricsServer
from changefeed.spark.apply import BatchReport
from changefeed.spark.table_features import Upgrade
from changefeed.tso import compose, physical_ms


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_metrics_and_health(tmp_path) -> None:
    m = ConsumerMetrics(health_timeout=1.5)
    server = MetricsServer(m, 0)
    try:
        assert server.address.startswith("http://127.0.0.1:")
        ms = int(time.time() * 1000) - 4000
        ts = compose(ms, 7)  # applied 4 s ago
        rep = BatchReport(3, rows_in=120, errors=2, ddl_applied=1, applied_ts=ts, seconds=0.7,
                          phases={"decode": 0.2, "merge": 0.4}, watermarks={"t/0": ts, "t/1": compose(ms + 5)},
                          known_tables=7, upgrades=[Upgrade("db.t", "columnMapping", "ALTER ...", ts)])
        m.batch(rep)
        m.batch(BatchReport(4, rows_in=30, applied_ts=ts, seconds=3.0, watermarks={"t/0": compose(ms + 9)}))
        code, text = get(server.address + "/metrics")
        assert code == 200
        fam = {f.name: f.samples for f in text_string_to_metric_families(text)}
        one = {k: v[0].value for k, v in fam.items() if len(v) == 1}
        assert one["changefeed_applied_commit_ts"] == physical_ms(ts)
        assert one["changefeed_changes_applied"] == 150 and one["changefeed_dead_letters"] == 2
        assert one["changefeed_ddl_applied"] == 1 and one["changefeed_batches"] == 2
        assert one["changefeed_tables"] == 7 and one["changefeed_healthy"] == 1
        assert 3.5 < one["changefeed_lag_seconds"] < 60
        marks = {s.labels["partition"]: s.value for s in fam["changefeed_partition_watermark"]}
        assert marks == {"t/0": ms + 9, "t/1": ms + 5}  # TSOs as their physical ms
        hist = {(s.name, s.labels.get("le")): s.value for s in fam["changefeed_batch_seconds"]}
        assert hist[("changefeed_batch_seconds_bucket", "1.0")] == 1
        assert hist[("changefeed_batch_seconds_bucket", "5.0")] == 2
        assert hist[("changefeed_batch_seconds_sum", None)] == 3.7
        assert {s.labels["phase"]: s.value for s in fam["changefeed_batch_phase_seconds"]} == \
            {"decode": 0.2, "merge": 0.4}
        assert [(s.labels["table"], s.labels["feature"]) for s in fam["changefeed_delta_feature"]] == \
            [("db.t", "columnMapping")]
        assert get(server.address + "/healthz") == (200, "ok\n")
        assert get(server.address + "/nothing")[0] == 404
        time.sleep(1.6)  # no micro-batch for longer than the health timeout
        code, why = get(server.address + "/healthz")
        assert code == 503 and "no micro-batch completed" in why
        m.batch(BatchReport(5, applied_ts=ts))
        assert get(server.address + "/healthz")[0] == 200
        m.failed("boom")
        assert get(server.address + "/healthz") == (503, "the query failed: boom\n")
    finally:
        server.close()
