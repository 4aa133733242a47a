"""canal-json produced to a real local Kafka broker, beside confluent-kafka producing the same bytes pre-encoded.

    .venv/bin/python bench/kafka.py [--rows 100000] [--brokers HOST:PORT]

Without --brokers a broker is started with scripts/kafka on free ports (its JVM may use every core; only
this Python process is pinned). The ceiling is a bare confluent-kafka Producer with the same settings
(idempotent, acks=all, linger 5 ms) sending the already-encoded values to the same partitions: what is
left between the two is our encoder, router and watermarks.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from canal_json import make_events, print_table
from changefeed.canal import CanalJSONEncoder
from changefeed.produce import Producer
from changefeed.sinkconfig import resolve
from changefeed.transport.kafka import KafkaTransport

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(data: Path) -> tuple[subprocess.Popen, str]:
    port, ctrl = _free_port(), _free_port()
    log = open(data / "broker.log", "wb")
    # the broker on the cores this process is not pinned to (all of them if it is not pinned)
    ours = os.sched_getaffinity(0)
    others = set(range(os.cpu_count() or 1)) - ours
    every_core = others or ours
    proc = subprocess.Popen([str(ROOT / "scripts" / "kafka"), "run", str(port), str(ctrl), str(data)],
                            stdout=log, stderr=log, preexec_fn=lambda: os.sched_setaffinity(0, every_core))
    deadline = time.time() + 240
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc, f"127.0.0.1:{port}"
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                raise RuntimeError(f"the Kafka broker did not start (see {data / 'broker.log'})") from None
            time.sleep(0.3)


@contextlib.contextmanager
def broker(brokers: str | None, data: Path) -> Iterator[str]:
    """`brokers` if given, else a broker of our own (data in `data`) for the block's duration."""
    if brokers is not None:
        yield brokers
        return
    proc, own = start_broker(data)
    try:
        yield own
    finally:
        gc.collect()  # the producers (in reference cycles with their callbacks) go before the broker
        proc.terminate()
        proc.wait(30)


def run(n: int, brokers: str | None = None) -> list[dict]:
    events = make_events(n)
    with tempfile.TemporaryDirectory() as tmp, broker(brokers, Path(tmp)) as where:
        return _measure(events, where)


def _warm_up(transport: KafkaTransport, topic: str) -> None:
    """Topic creation and the idempotent producer's id are not part of the measurement."""
    transport.partitions(topic)
    transport.send(topic + "_warm", 0, None, b"")
    transport.flush()


def _ours(events: list, brokers: str) -> float:
    """Seconds for event objects -> encoder -> router -> watermarks -> broker acknowledgement."""
    topic = f"bench_{uuid.uuid4().hex[:8]}"
    sink, cfg, router = resolve(f"kafka://{brokers}/{topic}?protocol=canal-json&enable-tidb-extension=true"
                                "&partition-num=3")
    transport = KafkaTransport(sink, cfg.max_message_bytes)
    _warm_up(transport, topic)
    producer = Producer(CanalJSONEncoder(cfg), router, transport)
    t0 = time.perf_counter()
    for ev in events:
        producer.send(ev)
    producer.close()
    return time.perf_counter() - t0


def _bare(records: list[tuple[int, bytes | None, bytes]], brokers: str) -> float:
    """Seconds for a bare confluent-kafka producer (same settings) to get the same bytes acknowledged."""
    topic = f"bench_{uuid.uuid4().hex[:8]}"
    sink, cfg, _ = resolve(f"kafka://{brokers}/{topic}?protocol=canal-json&partition-num=3")
    transport = KafkaTransport(sink, cfg.max_message_bytes)
    _warm_up(transport, topic)
    p = transport.producer
    t0 = time.perf_counter()
    for part, key, value in records:
        while True:
            try:
                p.produce(topic, value=value, key=key, partition=part)
                break
            except BufferError:
                p.poll(0.1)
    left = p.flush(120)
    if left:
        raise RuntimeError(f"{left} messages of the baseline were not delivered")
    return time.perf_counter() - t0


def _measure(events: list, brokers: str) -> list[dict]:
    n = len(events)
    _, cfg, router = resolve(f"kafka://{brokers}/x?protocol=canal-json&enable-tidb-extension=true&partition-num=3")
    enc = CanalJSONEncoder(cfg)
    records = []
    for ev in events:
        m = enc.encode(ev)[0]
        records.append((router.partition(ev) or 0, m.key, m.value))
    size = sum(len(v) for _, _, v in records)
    _bare(records, brokers)  # warms the broker's JIT: the first run of either would pay for it
    t_ours = min(_ours(events, brokers), _ours(events, brokers))
    t_bare = min(_bare(records, brokers), _bare(records, brokers))
    return [{"name": "canal-json to Kafka", "rows_per_s": n / t_ours, "mb_per_s": size / t_ours / 1e6,
             "baseline": "confluent-kafka, pre-encoded", "baseline_rows_per_s": n / t_bare, "target": 0}]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--brokers", help="an existing broker instead of starting one")
    args = ap.parse_args()
    print(f"canal-json to a local Kafka broker, {args.rows} rows, 3 partitions, one Python core")
    print_table(run(args.rows, args.brokers))


if __name__ == "__main__":
    main()
