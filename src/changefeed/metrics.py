"""Prometheus metrics of a running consumer (`--metrics-port`), with the official `prometheus-client`: what a
dashboard of TiCDC's own (checkpoint lag, rows, sink latency) shows, from each micro-batch's report.

    GET /metrics   Prometheus text (names in docs/operations.md)
    GET /healthz   200 "ok"; 503 and the reason once the query has failed or no micro-batch has completed for
                   `health_timeout` seconds (since the start, or since the last one)

The server binds 127.0.0.1 unless told otherwise: metrics say what a lake holds, so exposing them is a choice.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from .tso import physical_ms, to_datetime

if TYPE_CHECKING:
    from .spark.apply import BatchReport

BATCH_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


def commit_seconds(ts: int) -> float:
    """The physical time of a commit ts (TiDB TSO), in Unix seconds."""
    return to_datetime(ts).timestamp()


class ConsumerMetrics:
    """The consumer's metrics in a registry of their own, fed one micro-batch report at a time."""

    def __init__(self, health_timeout: float = 600.0) -> None:
        self.registry = CollectorRegistry()
        self.health_timeout = health_timeout
        self.started = time.time()
        self.last_batch: float | None = None
        self.applied_ts = 0
        self.query: Any = None
        self.measured_lag: float | None = None
        self._failed: str | None = None
        r = self.registry
        # TSOs as their physical part in ms, as TiCDC's checkpoint_ts gauge: a float64 holds no whole TSO
        self.g_applied = Gauge("changefeed_applied_commit_ts", "commit ts every table is complete up to "
                               "(physical part, ms)", registry=r)
        Gauge("changefeed_applied_commit_time_seconds", "physical time of the applied commit ts (Unix seconds)",
              registry=r).set_function(lambda: commit_seconds(self.applied_ts) if self.applied_ts else 0.0)
        Gauge("changefeed_lag_seconds", "end-to-end lag: now minus the physical time of the applied commit ts",
              registry=r).set_function(self.lag)
        self.g_watermark = Gauge("changefeed_partition_watermark", "latest watermark a partition delivered "
                                 "(commit ts, physical part, ms)", ["partition"], registry=r)
        self.c_changes = Counter("changefeed_changes_applied", "row changes taken in by applied micro-batches",
                                 registry=r)
        self.c_ddl = Counter("changefeed_ddl_applied", "DDL applied to the lake", registry=r)
        self.c_dead = Counter("changefeed_dead_letters", "changes the lake could not take (dead letters)",
                              registry=r)
        self.c_batches = Counter("changefeed_batches", "micro-batches applied", registry=r)
        self.h_batch = Histogram("changefeed_batch_seconds", "seconds a micro-batch took", buckets=BATCH_BUCKETS,
                                 registry=r)
        self.c_phase = Counter("changefeed_batch_phase_seconds", "seconds spent per micro-batch phase", ["phase"],
                               registry=r)
        self.g_last = Gauge("changefeed_last_batch_timestamp_seconds", "when the latest micro-batch completed",
                            registry=r)
        self.g_tables = Gauge("changefeed_tables", "tables the consumer knows", registry=r)
        self.g_feature = Gauge("changefeed_delta_feature", "a Delta table feature a DDL turned on (1)",
                               ["table", "feature"], registry=r)
        Gauge("changefeed_healthy", "1 while /healthz answers 200", registry=r).set_function(
            lambda: 0.0 if self.problem() else 1.0)

    def lag(self) -> float:
        """As TiCDC's checkpoint lag: now minus the applied commit ts; or the lag `run` measured (its workload's
        commit ts are synthetic)."""
        if self.measured_lag is not None:
            return self.measured_lag
        return max(0.0, time.time() - commit_seconds(self.applied_ts)) if self.applied_ts else 0.0

    def seed(self, status: Mapping[str, Any]) -> None:
        """Where an earlier run left the lake (`status.lake_status`): the gauges start from there."""
        self.applied_ts = int(status.get("applied_ts") or 0)
        self.g_applied.set(physical_ms(self.applied_ts))
        for k, v in (status.get("watermarks") or {}).items():
            self.g_watermark.labels(k).set(physical_ms(v))
        self.g_tables.set(int(status.get("tables") or 0))
        for f in status.get("features") or []:
            self.g_feature.labels(f["table"], f["feature"]).set(1)

    def batch(self, rep: BatchReport, lag: float | None = None) -> None:
        """A micro-batch applied (`lag`: as measured by `run`)."""
        if lag is not None:
            self.measured_lag = lag
        if rep.applied_ts:
            self.applied_ts = rep.applied_ts
            self.g_applied.set(physical_ms(rep.applied_ts))
        for k, v in (getattr(rep, "watermarks", None) or {}).items():
            self.g_watermark.labels(k).set(physical_ms(v))
        self.c_changes.inc(rep.rows_in)
        self.c_ddl.inc(rep.ddl_applied)
        self.c_dead.inc(rep.errors)
        self.c_batches.inc()
        self.h_batch.observe(rep.seconds)
        for phase, secs in rep.phases.items():
            self.c_phase.labels(phase).inc(secs)
        known = getattr(rep, "known_tables", 0)
        if known:
            self.g_tables.set(known)
        for u in rep.upgrades:
            self.g_feature.labels(u.table, u.feature).set(1)
        self.last_batch = time.time()
        self.g_last.set(self.last_batch)

    def failed(self, reason: str) -> None:
        self._failed = reason

    def problem(self) -> str | None:
        """Why /healthz answers 503, or None."""
        if self._failed:
            return f"the query failed: {self._failed}"
        q = self.query
        if q is not None:
            try:
                exc = q.exception()
            except Exception:  # the session is going away
                exc = None
            if exc is not None:
                return "the query failed: " + (str(exc).strip().splitlines() or ["?"])[0]
        since = self.last_batch or self.started
        idle = time.time() - since
        if idle > self.health_timeout:
            what = "the last micro-batch" if self.last_batch else "the start, and none"
            return f"no micro-batch completed for {idle:.0f} s (since {what}; limit {self.health_timeout:.0f} s)"
        return None


class MetricsServer:
    """/metrics and /healthz over HTTP, in a daemon thread."""

    def __init__(self, metrics: ConsumerMetrics, port: int, host: str = "127.0.0.1") -> None:
        m = metrics

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, generate_latest(m.registry), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    why = m.problem()
                    self._send(503 if why else 200, ((why or "ok") + "\n").encode(), "text/plain; charset=utf-8")
                else:
                    self._send(404, b"/metrics or /healthz\n", "text/plain; charset=utf-8")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
                pass  # a scrape every few seconds is not news

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.address = f"http://{host}:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="changefeed-metrics", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def serve_metrics(port: int | None, host: str, health_timeout: float,
                  status: Mapping[str, Any] | None = None) -> tuple[ConsumerMetrics | None, MetricsServer | None]:
    """The CLI's `--metrics-port`: metrics seeded from the lake's status, served (nothing without a port)."""
    if port is None:
        return None, None
    m = ConsumerMetrics(health_timeout)
    if status:
        m.seed(status)
    try:
        server = MetricsServer(m, port, host)
    except OSError as e:
        from .errors import ChangefeedError

        raise ChangefeedError(f"--metrics-port {port} on {host}: {e.strerror or e}") from None
    return m, server
