"""The Kafka transport (confluent-kafka): idempotent, acks=all, ordered per partition, topics created with
the sink's partition-num and replication-factor, delivery failures surfaced at flush (never lost silently)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ..errors import TransportError
from ..largemsg import MAX_RECORD_OVERHEAD
from ..security import kafka_security, librdkafka_config
from ..sinkconfig import SinkURI
from .files import Record
from .reach import ErrorTrap, check_topics, probe, quiet_config


def client_config(sink: SinkURI) -> dict[str, Any]:
    """The sink URI's TLS/SASL/client settings as librdkafka properties (security.py), with a silent log."""
    return {"bootstrap.servers": ",".join(sink.brokers), **librdkafka_config(kafka_security(sink.kafka))}


def probed_admin(sink: SinkURI, trap: ErrorTrap) -> AdminClient:
    """An admin client of the sink's cluster once the cluster answered: one line, within the connect timeout, when
    it cannot be used."""
    admin = AdminClient(quiet_config(client_config(sink), trap))
    probe(admin, ",".join(sink.brokers), trap)
    return admin


class KafkaTransport:
    def __init__(self, sink: SinkURI, max_message_bytes: int) -> None:
        self.sink = sink
        self._trap = ErrorTrap()
        base = quiet_config(client_config(sink), self._trap)
        self._where = ",".join(sink.brokers)
        self.admin = probed_admin(sink, self._trap)
        self.producer = Producer({
            **base, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
            # a report per failed message only: a Python callback per delivered message would halve throughput
            "delivery.report.only.error": True, "on_delivery": self._delivery,
            "compression.type": sink.compression,
            # librdkafka refuses a limit under 1000; the codec checks the real limit first.
            "message.max.bytes": max(1000, max_message_bytes + MAX_RECORD_OVERHEAD),
        })
        self._partitions: dict[str, int] = {}
        self._errors: list[str] = []
        self._produced = 0

    def partitions(self, topic: str) -> int:
        """The topic's partition count, creating the topic with the sink's partition-num if it is missing.

        A topic just created may be missing from the broker's metadata for a moment (KRaft publishes it
        asynchronously): counted then, it would have no partitions, and a watermark broadcast to it would
        reach none. So the count is taken only once the metadata shows the topic with its partitions."""
        n = self._partitions.get(topic)
        if n is not None:
            return n
        try:
            md = self.admin.list_topics(timeout=10)
        except KafkaException:
            md = probe(self.admin, self._where, self._trap)
        t = md.topics.get(topic)
        want = 1
        if t is None or t.error is not None or not t.partitions:
            if self.sink.kafka.get("auto-create-topic", "true").lower() == "false":  # TiCDC's switch
                raise TransportError(f"kafka {self._where}: no topic {topic!r} (auto-create-topic=false)")
            fs = self.admin.create_topics([NewTopic(topic, num_partitions=self.sink.partition_num,
                                                    replication_factor=self.sink.replication_factor)])
            try:
                fs[topic].result(timeout=30)
                want = self.sink.partition_num
            except KafkaException as e:
                if "TOPIC_ALREADY_EXISTS" not in str(e):
                    raise TransportError(f"cannot create topic {topic!r}: {e}") from None
            deadline = time.monotonic() + 30
            while True:
                t = self.admin.list_topics(topic=topic, timeout=10).topics.get(topic)
                if t is not None and t.error is None and len(t.partitions) >= want:
                    break
                if time.monotonic() > deadline:
                    raise TransportError(f"topic {topic!r} was created but the broker's metadata does not show "
                                         f"its {want} partition(s) after 30 s")
                time.sleep(0.1)
        self._wait_led(topic, sorted(t.partitions))  # also a topic another client created a moment ago
        n = self._partitions[topic] = len(t.partitions)
        return n

    def _wait_led(self, topic: str, partitions: list[int], timeout_s: float = 30) -> None:
        """Until the broker leads each partition of a topic (once per topic, before its first message): it answers
        a ListOffsets of each. One round trip for a topic that has long existed; a topic created a moment ago, by
        this transport or by another client, waits here.

        The metadata names a new partition's leader before that broker has taken it over. A first batch sent then
        is refused ("not leader") while the producer has the next one in flight; when the broker accepts that one
        (a new partition takes any first sequence of an idempotent producer), librdkafka counts the refused batch
        as delivered ("implicitly acked by subsequent batch success", its debug log) and it is lost: two CI
        flakes were that (a partition's first BOOTSTRAP, DDL and watermark missing; bench/RESULTS.md, 2026-11-29)."""
        from confluent_kafka.admin import OffsetSpec

        deadline = time.monotonic() + timeout_s
        left = [TopicPartition(topic, p) for p in partitions]
        while left:
            futures = self.admin.list_offsets({tp: OffsetSpec.latest() for tp in left}, request_timeout=10)
            waiting = []
            for tp, f in futures.items():
                try:
                    f.result()
                except KafkaException:
                    waiting.append(tp)
            left = waiting
            if not left:
                return
            if time.monotonic() > deadline:
                raise TransportError(f"kafka {self._where}: partitions {[tp.partition for tp in left]} of topic "
                                     f"{topic!r} have no leader serving them after {timeout_s:.0f} s")
            time.sleep(0.05)

    def _delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._errors.append(f"{msg.topic()}[{msg.partition()}]: {err}")

    @property
    def delivered(self) -> int:
        """Messages acknowledged by the broker (exact once flush() has returned)."""
        return self._produced - len(self._errors) - len(self.producer)

    def send(self, topic: str, partition: int, key: bytes | None, value: bytes | None) -> None:
        self.partitions(topic)
        while True:
            try:
                self.producer.produce(topic, value=value, key=key, partition=partition)
                break
            except BufferError:
                self.producer.poll(0.1)  # the local queue is full: let deliveries drain
        self._produced += 1
        if not self._produced & 255:
            self.producer.poll(0)  # serve failure reports now and then; flush() serves the rest

    def broadcast(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        for p in range(self.partitions(topic)):
            self.send(topic, p, key, value)

    def flush(self, timeout_s: float = 120) -> None:
        left = self.producer.flush(timeout_s)
        if left:
            why = f" (kafka {self._where}: {self._trap.cause()})" if self._trap.last is not None else ""
            raise TransportError(f"{left} messages were not delivered within {timeout_s:.0f} s{why}")
        if self._errors:
            first = self._errors[0]
            raise TransportError(f"{len(self._errors)} messages could not be delivered (first: {first})")

    def close(self) -> None:
        self.flush()


def read_topic(sink: SinkURI, topic: str, timeout_s: float = 30) -> Iterator[Record]:
    """Every record of every partition of a topic, from the beginning to the end it had when called.

    Records come in offset order within a partition, partitions interleaved as the broker serves them."""
    trap = ErrorTrap()
    conf = {**quiet_config(client_config(sink), trap), "group.id": f"changefeed-tail-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False, "enable.partition.eof": True}
    consumer = Consumer(conf)
    where = ",".join(sink.brokers)
    try:
        md = check_topics(probe(consumer, where, trap), where, [topic], wait=False, refresh=lambda: None)
        end: dict[int, int] = {}
        for p in sorted(md.topics[topic].partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high > low:
                end[p] = high
        if not end:
            return
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in end])
        while end:
            msg = consumer.poll(timeout_s)
            if msg is None:
                raise TransportError(f"{topic}{sorted(end)}: nothing arrived within {timeout_s:.0f} s")
            p = msg.partition()
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    reached_end(end, p, msg.offset())
                    continue
                raise TransportError(f"{topic}[{p}]: {msg.error()}")
            if p not in end or msg.offset() >= end[p]:
                continue  # written after we started
            yield Record(topic, p, msg.offset(), msg.key(), msg.value())
            if msg.offset() + 1 >= end[p]:
                del end[p]
    finally:
        consumer.close()


def reached_end(end: dict[int, int], partition: int, offset: int) -> None:
    """A partition's end-of-log event: the partition is done only when the offset it reports reaches the end taken at
    the start (the last offsets of a log can be transaction markers, never delivered as records). An earlier one
    leaves the partition to read on: a read ends by its records or by `read_topic`'s timeout, never short."""
    if offset >= end.get(partition, -1):
        end.pop(partition, None)
