"""Event lines to a transport: encoder -> router -> producer, with watermarks after complete transactions.

A transaction is complete when the next commit ts begins; a WATERMARK for the last complete commit ts goes
out once `watermark_interval_ms` of commit time has passed since the previous one, and at the end. Row
messages go to the partition the router picks; DDL, WATERMARK and BOOTSTRAP to every partition (of the
table's topic, or of every topic for watermarks and schema-level DDL), unless a codec pins a partition.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .model import Event, Kind
from .routing import Router
from .transport.base import Transport
from .tso import physical_ms

__all__ = ["Producer", "Transport", "open_producer"]


class Producer:
    def __init__(self, encoder: Any, router: Router, transport: Transport, *, watermark_interval_ms: int = 1000,
                 watermarks: bool = True) -> None:
        self.encoder = encoder
        self.router = router
        self.transport = transport
        self.interval = watermark_interval_ms
        self.watermarks = watermarks
        self.topics: dict[str, None] = {router.default_topic: None}
        self._current: int | None = None
        self._last_watermark_ms: int | None = None
        self._resolved: int | None = None
        self.sent = 0
        self.events = 0

    @property
    def last_commit_ts(self) -> int | None:
        return self._current

    def _topic_of(self, ev: Event) -> str | None:
        t = ev.route_table
        if t is None or not t.table:
            return None
        topic = self.router.topic(t.schema, t.table)
        self.topics.setdefault(topic, None)
        return topic

    def _emit(self, ev: Event) -> None:
        for part in self.router.split_update(ev):
            topic = self._topic_of(part)
            for m in self.encoder.encode(part):
                key, value = m.key, m.value
                if m.kind is Kind.WATERMARK or (m.kind is Kind.DDL and topic is None):
                    zero = m.kind is Kind.DDL and self.router.canal_ddl_to_partition_zero
                    for t in list(self.topics):
                        if zero:
                            self.transport.send(t, 0, key, value)
                        else:
                            self.transport.broadcast(t, key, value)
                    self.sent += 1
                    continue
                own = topic
                if m.kind is Kind.BOOTSTRAP and m.table and topic is None:
                    # a bootstrap due by time comes with a watermark (no table): to its table's own topic, as
                    # TiCDC's bootstraper keeps each table's topic (pkg/sink/codec/bootstraper.go)
                    own = self.router.topic(m.schema or "", m.table)
                target = m.topic or own or self.router.default_topic
                self.topics.setdefault(target, None)
                if m.partition is not None:
                    self.transport.send(target, m.partition, key, value)
                elif m.kind in (Kind.DDL, Kind.BOOTSTRAP):
                    p = self.router.partition(part) if m.kind is Kind.DDL else None
                    if p is None:
                        self.transport.broadcast(target, key, value)
                    else:
                        self.transport.send(target, p, key, value)
                else:
                    self.router.partition_num = self.transport.partitions(target)
                    self.transport.send(target, self.router.partition(part) or 0, key, value)
                self.sent += 1

    def _watermark(self, ts: int) -> None:
        if self._resolved is not None and ts <= self._resolved:
            return  # a watermark never goes back (nor repeats)
        self._emit(Event(kind=Kind.WATERMARK, commit_ts=ts))
        self._resolved = ts
        self._last_watermark_ms = physical_ms(ts)

    def send(self, ev: Event) -> None:
        self.events += 1
        if ev.kind is Kind.WATERMARK:
            self._watermark(ev.commit_ts)
            return
        if self.watermarks and self._current is not None and ev.commit_ts != self._current:
            done = self._current  # the transaction at `done` is complete
            if self._last_watermark_ms is None or physical_ms(done) - self._last_watermark_ms >= self.interval:
                self._watermark(done)
        self._current = ev.commit_ts
        self._emit(self.router.column_selector.apply(ev))

    def close(self) -> None:
        if self.watermarks and self._current is not None:
            self._watermark(self._current)
        self.transport.flush()


def open_producer(sink_uri: str, config: str | Path | None = None, *, ddl_to_all_partitions: bool = False,
                  watermark_interval_ms: int = 1000) -> tuple[Producer, Any, Any]:
    """A producer for a sink URI (file:// or kafka://) and its transport (close it after the producer);
    also returns the parsed sink."""
    from .codecs import make_encoder
    from .sinkconfig import resolve
    from .transport.files import FileProducer

    sink, cfg, router = resolve(sink_uri, config)
    router.canal_ddl_to_partition_zero = cfg.protocol == "canal-json" and not ddl_to_all_partitions
    router.split_key_changes = cfg.protocol == "avro"
    if sink.scheme == "file":
        transport: Any = FileProducer(sink.folder, sink.partition_num)
    else:
        from .transport.kafka import KafkaTransport

        transport = KafkaTransport(sink, cfg.max_message_bytes)
    # The Avro protocols name schema subjects after the topic: they take each table's topic from the router
    # (debezium-avro keeps Debezium's <cluster>.<db>.<table> topics unless dispatchers name topics).
    avro_topics = router if cfg.protocol == "avro" or router.has_topic_rules else None
    producer = Producer(make_encoder(cfg, topic=avro_topics), router, transport,
                        watermark_interval_ms=watermark_interval_ms)
    return producer, transport, sink
