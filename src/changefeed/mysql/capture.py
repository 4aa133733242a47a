"""The capture loop: binlog transactions -> producer -> transport, with the position checkpointed only after
the transport acknowledged everything before it.

`transport.flush()` returns once every message sent so far is durable (files: fsync; Kafka: delivered, or it
raises), so the checkpoint written after it never runs ahead of the stream: a crash before the next
checkpoint replays from the last one (at-least-once), never leaving a gap.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..model import Event, Kind
from . import checkpoint as ckpt
from .source import BinlogSource, Transaction
from .uri import MySQLURI


@dataclass
class CaptureReport:
    transactions: int = 0
    events: int = 0
    messages: int = 0
    checkpoints: int = 0
    seconds: float = 0.0
    position: str = ""


def capture(uri: MySQLURI, sink_uri: str, *, follow: bool = True, config: str | Path | None = None,
            idle_exit_s: float | None = None, on_progress: Callable[[CaptureReport], None] | None = None,
            max_transactions: int | None = None) -> CaptureReport:
    """Capture until the binlog ends (`follow=False`), forever (`follow=True`), or until nothing new came for
    `idle_exit_s` seconds. Resumes from `uri.checkpoint` when it exists."""
    from ..produce import open_producer

    if uri.checkpoint is None:
        raise ValueError("capture needs a checkpoint file (?checkpoint=PATH in the source URI)")
    resume = ckpt.load(uri.checkpoint)
    src = BinlogSource(uri, resume=resume)
    producer, transport, _ = open_producer(sink_uri, config, ddl_to_all_partitions=True)
    rep = CaptureReport()
    t0 = time.monotonic()
    last_flush = t0
    last_new = t0
    pending: Transaction | None = None  # the last transaction sent but not yet acknowledged
    interval = uri.flush_interval_ms / 1000
    pending_done = False

    def commit() -> None:
        nonlocal pending, last_flush
        if pending is None:
            return
        if pending.commit_ts:
            producer.send(Event(kind=Kind.WATERMARK, commit_ts=pending.commit_ts))  # the tables are complete here
        transport.flush()  # everything before the position is acknowledged ...
        ckpt.save(uri.checkpoint, src.checkpoint(pending))  # ... so the position may be kept
        rep.checkpoints += 1
        rep.position = str(pending.position)
        pending = None
        last_flush = time.monotonic()

    try:
        for tx in src.transactions(follow=follow):
            now = time.monotonic()
            if tx.events:
                for ev in tx.events:
                    producer.send(ev)
                rep.events += len(tx.events)
                rep.transactions += 1
                pending = tx
                last_new = now
            elif pending is None and idle_exit_s is not None and now - last_new >= idle_exit_s:
                break
            if pending is not None and not tx.partial and (now - last_flush >= interval or not tx.events):
                commit()
                if on_progress is not None:
                    rep.messages = producer.sent
                    on_progress(rep)
            if max_transactions is not None and rep.transactions >= max_transactions:
                break
        else:
            pending_done = True  # the source is exhausted: even a partial last piece completed what it began
        if pending is not None and (not pending.partial or pending_done):
            commit()
        producer.close()
    finally:
        transport.close()
        src.close()
    rep.messages = producer.sent
    rep.seconds = time.monotonic() - t0
    return rep
