"""What `run`, `consume`, `verify` and `roundtrip` print: progress bars, batch lines and closing tables."""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from .cliio import err, no_password

if TYPE_CHECKING:
    from .roundtrip import RoundtripRun
    from .spark.apply import BatchReport
    from .spark.verify import VerifyReport


class RunBars:
    """Progress bars per stage for `run`."""

    def __init__(self, bar: Progress) -> None:
        self.bar = bar
        self.first: float | None = None
        self.produce = bar.add_task("produce", total=None, info="starting Spark")
        self.apply = bar.add_task("apply", total=None, info="")
        self.verify = bar.add_task("verify", total=1, info="", visible=False)

    def stage(self, name: str, total: int | None = None) -> None:
        """At verify, the produce and apply bars are complete and the verify bar shows."""
        if name == "verify":
            self.bar.update(self.produce, total=1, completed=1)
            self.bar.update(self.apply, total=1, completed=1)
            self.bar.update(self.verify, visible=True, info="comparing the lake with upstream")

    def produced(self, events: int) -> None:
        """Events sent so far, and the rate since the first."""
        if self.first is None:
            self.first = time.monotonic()
        secs = max(time.monotonic() - self.first, 1e-9)
        self.bar.update(self.produce, info=f"{events:,} events ({events / secs:,.0f}/s)")

    def batch(self, rep: object, changes_total: int, lag: float | None = None) -> None:
        """A micro-batch applied: on the bar, and as a line when stderr is not a terminal."""
        from .tso import to_datetime

        at = getattr(rep, "applied_ts", 0) or getattr(rep, "max_ts", 0)
        upto = to_datetime(at).strftime("%H:%M:%S.%f")[:-3] if at else "-"
        self.bar.update(self.apply, info=f"{changes_total:,} changes, batch {getattr(rep, 'batch_id', 0)}, "
                                         f"tables at commit time {upto}")
        if not err.is_terminal:  # redirected: the bars do not render, so one line a micro-batch
            err.print(batch_line(rep, lag), highlight=False)


def batch_line(r: object, lag: float | None) -> str:
    """One line per micro-batch, for `run` and `consume` when their output goes to a file: what came in,
    how many tables it touched, how far behind the source the lake is, how long the batch took."""
    from .tso import to_datetime

    at = getattr(r, "applied_ts", 0)
    upto = to_datetime(at).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if at else "-"
    lag_text = f", lag {lag:.1f} s" if lag is not None else ""
    return (f"batch {getattr(r, 'batch_id', 0)}: {getattr(r, 'rows_in', 0):,} changes in, "
            f"{len(getattr(r, 'tables', ()) or ())} tables, {getattr(r, 'errors', 0)} dead letters, "
            f"{getattr(r, 'ddl_applied', 0)} DDL, applied up to {upto}{lag_text} ({getattr(r, 'seconds', 0.0):.1f} s)")


class ConsumeTotals:
    """What `consume` prints: a line per micro-batch as it is applied, and the totals at the end."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.total: Counter[str] = Counter()

    def batch(self, r: BatchReport) -> None:
        """A micro-batch applied: counted, and printed with how far the lake is behind the source."""
        from .tso import to_datetime

        self.total.update(rows=r.rows_in, errors=r.errors, ddl=r.ddl_applied)
        lag = time.time() - to_datetime(r.applied_ts).timestamp() if r.applied_ts else None
        err.print(batch_line(r, lag), highlight=False)

    def print_end(self, lake: str) -> None:
        """The closing line: changes, rate since the start, dead letters and DDL."""
        total = self.total
        secs = time.monotonic() - self.started
        err.print(f"consumed {total['rows']:,} changes into {lake} in {secs:.1f} s "
                  f"({total['rows'] / secs:,.0f} changes/s), {total['errors']} dead letters, {total['ddl']} DDL",
                  highlight=False)


def print_run(rep: object) -> None:
    """The closing table of `run`: each stage's count and rate, the lag, and each table against upstream."""
    from .job import RunReport

    assert isinstance(rep, RunReport)
    o = rep.options
    t = Table(title=f"changefeed run: {no_password(o.source)} -> {o.protocol} -> "
                    f"{'Kafka' if o.sink_uri and o.sink_uri.startswith('kafka') else 'files'} -> Spark -> Delta")
    for col in ("stage", "count", "per second", "detail"):
        t.add_column(col, justify="right" if col in ("count", "per second") else "left")
    rate = (lambda n, s: f"{n / s:,.0f}" if s > 0 else "-")  # noqa: E731
    t.add_row("produce", f"{rep.events:,}", rate(rep.events, rep.produce_seconds),
              f"events -> {rep.messages:,} messages in {rep.produce_seconds:.1f} s")
    t.add_row("consume", f"{rep.changes:,}", rate(rep.changes, rep.consume_seconds),
              f"changes in {rep.batches} micro-batches, {rep.ddl} DDL, {rep.dead_letters} dead letters "
              f"({rep.consume_seconds:.1f} s)")
    lags = sorted(rep.lags)
    if lags:
        p95, p99 = (lags[min(len(lags) - 1, (len(lags) * p + 99) // 100 - 1)] for p in (95, 99))  # nearest rank
        t.add_row("lag", "", "", f"end to end: median {lags[len(lags) // 2]:.1f} s, p95 {p95:.1f} s, "
                                 f"p99 {p99:.1f} s, max {lags[-1]:.1f} s")
    v = rep.verification
    if v is not None:
        for tc in v.tables:
            t.add_row(f"  {tc.name}", f"{tc.actual or 0:,}", "", "rows, equal upstream" if tc.ok else
                      f"rows, upstream {tc.expected:,}: {tc.problem or 'DIFFERENT'} ({tc.missing} missing, "
                      f"{tc.extra} extra)")
        t.add_row("verify", "passed" if v.ok else "FAILED", "", f"{len(v.tables)} tables against "
                  f"{rep.expected} ({rep.verify_seconds:.1f} s)")
    for line in rep.upgrades:
        t.add_row("  feature", "", "", line)
    if rep.stopped:
        t.add_row("stopped", "", "", f"{rep.stopped}, at a transaction boundary with a last watermark; "
                  "verified against what it sent")
    t.add_row("total", f"{rep.seconds:.1f} s", "", f"chart: {rep.chart}")
    Console().print(t)
    if v is not None:
        for tc in v.tables:
            for line in tc.samples[:5]:
                err.print(f"{tc.name}: {line}", highlight=False)


def print_verify(rep: VerifyReport, title: str) -> None:
    """The table of `verify`: each table's rows and checksum against upstream, then the first differing rows
    and the verdict."""
    table = Table(title=title)
    for col in ("table", "upstream rows", "lake rows", "missing", "extra", "checksum", "result"):
        table.add_column(col)
    for t in rep.tables:
        same = "same" if t.expected_checksum == t.actual_checksum else "differs"
        table.add_row(t.name, f"{t.expected:,}", "-" if t.actual is None else f"{t.actual:,}", str(t.missing),
                      str(t.extra), same, "ok" if t.ok else (t.problem or "DIFFERENT"))
    Console().print(table)
    for t in rep.tables:
        for line in t.samples:
            err.print(f"{t.name}: {line}", highlight=False)
    if not rep.ok:
        err.print("verification FAILED", highlight=False)
    else:
        err.print(f"verification passed: {len(rep.tables)} tables equal upstream", highlight=False)


def print_roundtrip(rt: RoundtripRun, title: str) -> None:
    """The table of `roundtrip`: what each stage read or wrote, and whether the events came back equal."""
    report = rt.report
    table = Table(title=title, show_header=True)
    table.add_column("stage")
    table.add_column("count", justify="right")
    table.add_column("detail")
    kinds = Counter(ev.kind.value for ev in rt.originals)
    table.add_row("events read", str(len(rt.originals)), ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    table.add_row("messages written", str(rt.messages),
                  f"{rt.message_bytes} bytes in {rt.messages_path} ({rt.encode_ms:.1f} ms)")
    table.add_row("events decoded", str(len(rt.decoded)), f"{rt.events_path} ({rt.decode_ms:.1f} ms)")
    table.add_row("round trip", "ok" if report.ok else "MISMATCH", report.summary)
    Console().print(table)
    for line in report.problems[:20]:
        err.print(f"  {line}", highlight=False)
