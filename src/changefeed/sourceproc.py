"""The `run` job's source and producer in a process of their own, as a live upstream is.

Why a process: in the consumer's process the producer is a thread, and generating, encoding and sending each
event is Python that holds the GIL (~110 us an event for the workload: at 5,000 events/s about half a core).
The driver's own Python (planning a micro-batch, the small tables it merges in Arrow, the commit) then runs
at half speed whenever the producer is busy, and the lag it adds is the consumer's. A spawned process (not a
fork: the parent holds a JVM and py4j threads) shares neither the GIL nor the driver's heap.

The child reports over a pipe what the consumer's lag is measured against: when each commit ts left it
(sampled every 20 ms, as the thread did), then its totals and the upstream state to verify against. A stop is
an Event the child reads between transactions. The child ignores SIGINT and SIGTERM (the parent decides how
the source stops); if the parent dies the child ends within half a second, reporting or not (a binlog source
waiting for its next event reports nothing for as long as the database is quiet).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from .upstream import UpstreamState

# job.py's RunOptions, RunReport and _Sent, named loosely here: job.py imports this module
RunOptions = RunReport = _Sent = Any


class _PipeSent:
    """`_Sent.note` in the child: each note goes to the parent, which keeps the record."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def note(self, commit_ts: int, at: float, events: int) -> None:
        self.conn.send(("sent", commit_ts, at, events))


def _child(work: Callable[..., tuple[RunReport, UpstreamState | None]], opts: RunOptions, sink_uri: str,
           config: str | None, t0: float, conn: Connection, go: Any, stop: Any) -> None:
    """The source's process: wait for the consumer to be up, produce (`work`: job.produce_source), report totals
    and the upstream state."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    threading.Thread(target=_end_with, args=(os.getppid(),), name="changefeed-source-parent", daemon=True).start()
    go.wait()
    try:
        rep, state = work(opts, sink_uri, config, t0, _PipeSent(conn), stop)
        conn.send(("done", rep.events, rep.messages, rep.produce_seconds, rep.stopped, state))
    except (BrokenPipeError, EOFError):
        return  # the parent is gone: nobody to produce for
    except BaseException as e:  # noqa: BLE001 - the parent raises it, as the thread's failure was raised
        try:
            pickle.dumps(e)
            conn.send(("failed", e))
        except Exception:  # noqa: BLE001 - an exception that does not pickle: its line
            conn.send(("failed", RuntimeError(f"{type(e).__name__}: {e}")))
    finally:
        conn.close()


def _end_with(parent: int) -> None:
    """The child's end once its parent is gone (killed: nothing told it), whatever it is doing."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


class SourceProcess:
    """The parent's side: start the child early (its imports overlap the consumer's start), `start` it producing
    once the consumer is up, then `join` it like the thread it replaces; its notes land in `sent` and
    `on_progress` as they come, and `state`, the totals in `rep`, once it is done."""

    def __init__(self, work: Callable[..., tuple[RunReport, UpstreamState | None]], opts: RunOptions,
                 sink_uri: str, config: str | None, t0: float, rep: RunReport, sent: _Sent,
                 on_progress: Callable[[int], None], stop: threading.Event | None) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.rep, self.sent, self.on_progress, self.stop = rep, sent, on_progress, stop
        self.go, self.child_stop = ctx.Event(), ctx.Event()
        self.conn, child_conn = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_child, name="changefeed-source", daemon=True,
                                args=(work, opts, sink_uri, config, t0, child_conn, self.go, self.child_stop))
        self.proc.start()
        child_conn.close()
        self.state: UpstreamState | None = None
        self.failure: BaseException | None = None
        self.reader = threading.Thread(target=self._read, name="changefeed-source-reader", daemon=True)

    def start(self) -> None:
        self.reader.start()
        self.go.set()

    def _read(self) -> None:
        """The child's notes, until it is done; a requested stop is passed on to it."""
        conn, stopped = self.conn, False
        while True:
            if not stopped and self.stop is not None and self.stop.is_set():
                self.child_stop.set()
                stopped = True
            try:
                if not conn.poll(0.1):
                    continue
                msg = conn.recv()
            except (EOFError, OSError):  # the child ended (killed?) before its last word
                self.proc.join(5)
                self.failure = RuntimeError(f"the source's process ended without a report (exit code "
                                            f"{self.proc.exitcode})")
                return
            if msg[0] == "sent":
                _, ts, at, events = msg
                self.sent.note(ts, at, events)
                self.on_progress(events)
            elif msg[0] == "done":
                _, self.rep.events, self.rep.messages, self.rep.produce_seconds, self.rep.stopped, self.state = msg
                self.on_progress(self.rep.events)
                return
            else:
                self.failure = msg[1]
                return

    def is_alive(self) -> bool:
        return self.reader.is_alive()

    def join(self, timeout: float | None = None) -> None:
        self.reader.join(timeout)
        if not self.reader.is_alive():
            self.proc.join(5)

    def close(self) -> None:
        """The child's end, however the run ended: one never started has sent nothing and must not (it ends
        now); one producing stops at its next transaction boundary, as on a requested stop."""
        if not self.go.is_set():
            self.proc.kill()  # it ignores SIGTERM (the parent decides how the source stops)
        else:
            self.child_stop.set()
            if self.reader.is_alive():
                self.reader.join(30)
            if self.proc.is_alive():
                self.proc.kill()  # it ignores SIGTERM (the parent decides how the source stops)
        self.proc.join(5)
        self.conn.close()
