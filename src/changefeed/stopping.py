"""A graceful stop on SIGTERM and SIGINT (what systemd, Kubernetes and YARN send): the running micro-batch
completes, the query stops, the command prints its summary and exits 0. A second signal stops at once (exit
128 + the signal): exactly-once makes that safe too, a restart replays the unfinished micro-batch.

Why a guard around each micro-batch: `StreamingQuery.stop()` interrupts the batch it finds running, so the stop
waits for the batch in hand to finish first; a batch Spark starts in between is refused before it touches the
lake (its offsets are not committed, so a restart takes it whole).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from .cliio import err

STOP_MARK = "changefeed: stopping on request"  # in the error a micro-batch refused after a signal raises

T = TypeVar("T")


@contextmanager
def jvm_ignores_sigterm() -> Iterator[None]:
    """Start Spark's JVM inside this: it inherits SIGTERM ignored (HotSpot then installs no handler of its own),
    so a SIGTERM to the whole process group (systemd's default KillMode, `timeout`) reaches only this process,
    which stops the query cleanly; the JVM still ends with it (PySpark's gateway exits when its stdin closes).
    SIGINT it ignores already (PySpark starts it so)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


class StopRequested(RuntimeError):
    """Raised by a micro-batch Spark starts after a stop was requested (nothing of it is applied)."""

    def __init__(self) -> None:
        super().__init__(STOP_MARK)


def _quiet(batch: Any) -> None:
    """Turn off Spark's and py4j's error logs of a micro-batch refused on a stop (its traceback is no failure)."""
    import logging

    logging.getLogger("py4j").setLevel(logging.CRITICAL + 1)
    try:
        jvm = batch.sparkSession._jvm
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
            "org.apache.spark.sql.execution.streaming", jvm.org.apache.logging.log4j.Level.OFF)
    except Exception:  # noqa: BLE001 - only the logs are at stake
        pass


class GracefulStop:
    """Turns the first SIGTERM/SIGINT into a clean stop of a streaming query (and of `run`'s source), the
    second into an immediate exit."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.signal_name: str | None = None
        self._busy = threading.Lock()
        self._query: Any = None
        self._stopper: threading.Thread | None = None
        self._done: int | None = None  # the latest micro-batch the guard saw complete
        self._said: threading.Thread | None = None  # says that a stop was requested

    def install(self) -> GracefulStop:
        """Handle SIGTERM and SIGINT from now on (after Spark is up: PySpark sets its own SIGINT handler)."""
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGTERM, signal.SIGINT):
                signal.signal(s, self._on_signal)
        return self

    def _on_signal(self, signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name
        if self.requested.is_set():
            try:
                err.print(f"error: {name} again: stopped at once (a restart replays the unfinished micro-batch)",
                          highlight=False)
            finally:  # a write the signal interrupted may refuse this one (a reentrant call): exit all the same
                os._exit(128 + signum)
        self.signal_name = name
        self.requested.set()
        # said from a thread, not from the handler: the handler runs inside whatever the main thread was doing,
        # a write to stderr included, and a second write into the same buffered stream from there raises
        self._said = threading.Thread(target=err.print, name="changefeed-stop-said", daemon=True,
                                      kwargs={"highlight": False},
                                      args=(f"{name}: finishing the running micro-batch, then stopping ({name} "
                                            "again to stop at once)",))
        self._said.start()
        self._start_stopper()

    def guard(self, process: Callable[[Any, int], T]) -> Callable[[Any, int], T]:
        """A micro-batch function that no stop interrupts, and that refuses to start once a stop is requested."""

        def guarded(batch: Any, batch_id: int) -> T:
            with self._busy:
                if self.requested.is_set():
                    _quiet(batch)  # the refusal ends the query as a stop, not as news
                    raise StopRequested()
                out = process(batch, batch_id)
                self._done = batch_id
                return out

        return guarded

    def attach(self, query: Any) -> None:
        """The query a stop ends (a signal that came before it started stops it now)."""
        self._query = query
        if self.requested.is_set():
            self._start_stopper()

    def _start_stopper(self) -> None:
        if self._query is None or self._stopper is not None:
            return
        self._stopper = threading.Thread(target=self._stop_query, name="changefeed-stop", daemon=True)
        self._stopper.start()

    def _stop_query(self) -> None:
        with self._busy:  # the micro-batch in hand completes
            done = self._done
        q = self._query
        deadline = time.monotonic() + 120
        while done is not None and q.isActive and time.monotonic() < deadline:
            last = q.lastProgress  # reported once Spark has committed the batch's offsets
            if last is not None and int(last["batchId"]) >= done:
                break
            time.sleep(0.1)
        q.stop()

    def wait(self, query: Any) -> bool:
        """Until the query ends; True when it ended on a requested stop (a refused micro-batch included), else
        Spark's own error, if any, is raised as `awaitTermination` raises it."""
        while query.isActive:
            time.sleep(0.2)
        if self._stopper is not None:
            self._stopper.join()
        if self._said is not None:
            self._said.join()
        exc = query.exception()
        if self.requested.is_set() and (exc is None or STOP_MARK in str(exc)):
            return True
        query.awaitTermination()
        return False
