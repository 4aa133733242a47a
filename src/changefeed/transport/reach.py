"""Whether a Kafka cluster can be used, said in one line and promptly.

librdkafka retries an unreachable broker forever and prints each attempt (`%3|...|FAIL|`); a client here
logs to a silent logger instead, keeps the last error it reported, and `probe` turns "nothing within the
connect timeout", a refused login or an untrusted certificate into one `TransportError` naming the brokers
and the cause. A broker that goes away later is waited for (`wait_for_brokers`), said once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ..errors import TransportError
from ..redact import redact

DEFAULT_CONNECT_TIMEOUT_S = 30.0
_timeout = [DEFAULT_CONNECT_TIMEOUT_S]

QUIET = logging.getLogger("changefeed.kafka.client")  # librdkafka's own log: its errors reach error_cb too
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False
log = logging.getLogger("changefeed.kafka")

# librdkafka error codes that no retry mends: a refused login, a failed TLS handshake, a bad setting
_AUTHENTICATION, _SSL = -169, -181
_FATAL_WORDS = ("SASL authentication", "Authentication failed", "SSL handshake failed", "certificate verify failed",
                "Invalid credentials", "invalid credentials", "UNSUPPORTED_SASL_MECHANISM", "SASL handshake failed",
                "bad certificate", "certificate required", "unknown ca")


def set_connect_timeout(seconds: float | None) -> None:
    """The process' connect timeout (the CLI's --connect-timeout)."""
    if seconds is not None:
        if seconds <= 0:
            raise TransportError(f"--connect-timeout must be positive, got {seconds}")
        _timeout[0] = float(seconds)


def connect_timeout() -> float:
    return _timeout[0]


class ErrorTrap:
    """The client's `error_cb`: keeps its last error, for the line that says why nothing connected."""

    def __init__(self) -> None:
        self.last: Any = None

    def __call__(self, e: Any) -> None:
        self.last = e

    @property
    def fatal(self) -> bool:
        e = self.last
        if e is None:
            return False
        return e.code() in (_AUTHENTICATION, _SSL) or any(w in e.str() for w in _FATAL_WORDS)

    def cause(self) -> str:
        e = self.last
        return _short(e.str()) if e is not None else "no answer"


def _short(text: str) -> str:
    """librdkafka's message without its bookkeeping ("(after 3ms in state ..., 2 identical error(s) ...)")."""
    import re

    text = re.sub(r"\s*\(after \d+ms in state [^)]*\)", "", text)
    text = re.sub(r"\s*\(\d+ identical error\(s\) suppressed\)", "", text)
    return redact(text.strip())


def quiet_config(conf: dict[str, Any], trap: ErrorTrap) -> dict[str, Any]:
    """A client config whose log is silent and whose errors go to `trap`."""
    return {**conf, "logger": QUIET, "error_cb": trap}


def probe(admin: Any, brokers: str, trap: ErrorTrap, timeout_s: float | None = None) -> Any:
    """The cluster's metadata, or a TransportError once the timeout passes (at once for a refused login or an
    untrusted certificate)."""
    from confluent_kafka import KafkaException

    timeout = connect_timeout() if timeout_s is None else timeout_s
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            return admin.list_topics(timeout=max(0.1, min(1.0, left)))
        except KafkaException as e:
            failure = e.args[0] if e.args and hasattr(e.args[0], "str") else None
        if hasattr(admin, "poll"):
            admin.poll(0)  # serves error_cb: the reason (refused, unknown host, bad login) is in it
        if trap.last is None:
            trap.last = failure
        if trap.fatal:
            raise TransportError(f"kafka {brokers}: refused: {trap.cause()}")
        if time.monotonic() >= deadline:
            raise TransportError(f"kafka {brokers}: not reachable within {timeout:g} s ({trap.cause()}); "
                                 "--connect-timeout sets the wait")


def check_topics(md: Any, brokers: str, topics: list[str], wait: bool, refresh: Callable[[], Any]) -> Any:
    """Refuse (or, with `wait`, wait for) topics the cluster does not have; patterns are never refused."""
    def missing(m: Any) -> list[str]:
        return [t for t in topics if not any(c in t for c in "*?") and
                (t not in m.topics or m.topics[t].error is not None)]
    gone = missing(md)
    if not gone:
        return md
    if not wait:
        raise TransportError(f"kafka {brokers}: no topic {', '.join(gone)} (--wait-for-topic waits for it)")
    log.warning(f"kafka {brokers}: no topic {', '.join(gone)} yet; waiting for it")
    while gone:
        time.sleep(1.0)
        md = refresh()
        gone = missing(md)
    return md


_DOWN: set[str] = set()  # clusters said to be unreachable, so that it is said once, by whoever sees it first
_DOWN_LOCK = threading.Lock()


def _down(brokers: str, cause: str) -> None:
    with _DOWN_LOCK:
        if brokers not in _DOWN:
            _DOWN.add(brokers)
            log.warning(f"kafka {brokers}: not reachable ({cause}); waiting for it to come back")


def _up(brokers: str) -> None:
    with _DOWN_LOCK:
        if brokers in _DOWN:
            _DOWN.discard(brokers)
            log.warning(f"kafka {brokers}: reachable again; resuming")


def wait_for_brokers(list_topics: Callable[[], Any], brokers: str, trap: ErrorTrap) -> Any:
    """Metadata from a cluster that may have gone away: waits for it to come back, saying so once (and again
    when it is back)."""
    from confluent_kafka import KafkaException

    while True:
        try:
            md = list_topics()
            _up(brokers)
            return md
        except KafkaException as e:
            _down(brokers, trap.cause() if trap.last is not None else _short(str(e)))
            time.sleep(1.0)


class BrokerWatch:
    """While a long query runs, asks the cluster for its metadata every few seconds: a cluster that stops
    answering is said once (Spark's Kafka client waits for it silently), and again when it is back."""

    def __init__(self, admin: Any, brokers: str, trap: ErrorTrap, every_s: float = 5.0) -> None:
        self.admin, self.brokers, self.trap, self.every_s = admin, brokers, trap, every_s
        self.saw_down = False  # the cluster stopped answering at some point while watched
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="changefeed-broker-watch", daemon=True)

    def __enter__(self) -> BrokerWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self.every_s + 15)

    @property
    def down(self) -> bool:
        return self.brokers in _DOWN

    def _run(self) -> None:
        from confluent_kafka import KafkaException

        while not self._stop.wait(self.every_s):
            try:
                self.admin.list_topics(timeout=10)
                _up(self.brokers)
            except KafkaException as e:
                self.admin.poll(0)
                self.saw_down = True
                _down(self.brokers, self.trap.cause() if self.trap.last is not None else _short(str(e)))
