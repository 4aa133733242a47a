"""Raw records of a change stream as a Spark DataFrame: Kafka through Spark's own source, local files
through a Python data source that reads the file transport's layout (transport/files.py).

Both give the same columns, `RAW_SCHEMA`, one Spark partition per topic-partition, in offset order, so a
decoder that runs per Spark partition sees each Kafka partition's messages in the order they were written.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlsplit

import orjson

from ..config import ConfigError
from ..security import KafkaSecurity, jvm_properties, kafka_security, librdkafka_config, spark_kafka_options
from ..transport.reach import BrokerWatch, ErrorTrap, check_topics, probe, quiet_config, wait_for_brokers

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RAW_SCHEMA = "topic string, partition int, offset long, key binary, value binary"
FILE_SOURCE = "changefeed-files"


def is_pattern(topic: str) -> bool:
    """A topic name with `*` or `?` stands for every topic it matches (glob rules), found as they appear:
    the Avro protocols write one topic per table, created as tables are."""
    return any(ch in topic for ch in "*?")


def pattern_regex(topics: list[str]) -> str:
    """The Java regex Kafka's `subscribePattern` takes for glob topic names."""
    return "|".join(fnmatch.translate(t).removeprefix("(?s:").removesuffix(")\\Z") for t in topics)


def expand_topics(topics: list[str], existing: list[str]) -> list[str]:
    """The topics a list of names and patterns stands for, among those that exist, in order, once each."""
    out: dict[str, None] = {}
    for t in topics:
        if is_pattern(t):
            out.update((e, None) for e in sorted(existing) if fnmatch.fnmatchcase(e, t))
        else:
            out[t] = None
    return list(out)


@dataclass
class Source:
    """Where a change stream is read from: `kafka://host:port/topic[,topic]` or `file:///folder/topic`; a
    topic may be a glob pattern (`tidb_app_*`), which also takes the topics created later."""

    scheme: str
    topics: list[str]
    brokers: list[str] = field(default_factory=list)
    folder: Path | None = None
    params: dict[str, str] = field(default_factory=dict)

    @property
    def uri(self) -> str:
        if self.scheme == "file":
            return f"file://{self.folder}/{','.join(self.topics)}"
        return f"kafka://{','.join(self.brokers)}/{','.join(self.topics)}"

    def security(self) -> KafkaSecurity:
        """The TLS/SASL settings of a Kafka source (its URI's parameters and those given with it)."""
        return kafka_security(self.params)

    def client_config(self) -> dict[str, Any]:
        """librdkafka's settings for this source's brokers (the admin client counting partitions)."""
        return {"bootstrap.servers": ",".join(self.brokers), **librdkafka_config(self.security())}

    def metadata(self) -> Any:
        """The cluster's metadata; a broker that has gone away is waited for, said once (reach.py)."""
        admin, trap = _admin(self.client_config())
        return wait_for_brokers(lambda: admin.list_topics(timeout=10), ",".join(self.brokers), trap)

    def watch(self) -> Any:
        """A context that says so, once, while the brokers do not answer (reach.BrokerWatch); none for files."""
        import contextlib

        if self.scheme != "kafka":
            return contextlib.nullcontext()
        admin, trap = _admin(self.client_config())
        return BrokerWatch(admin, ",".join(self.brokers), trap)

    def probe(self, wait_for_topic: bool = False) -> None:
        """Refuse, in one line and within the connect timeout, brokers that cannot be used and a topic they do
        not have (or wait for it, said once)."""
        admin, trap = _admin(self.client_config())
        where = ",".join(self.brokers)
        md = probe(admin, where, trap)
        check_topics(md, where, self.topics, wait_for_topic, lambda: probe(admin, where, trap))

    @property
    def patterned(self) -> bool:
        return any(is_pattern(t) for t in self.topics)

    def partitions(self) -> dict[str, int]:
        """Partitions per topic (every topic a pattern matches now): a watermark is global only once every
        partition has sent one."""
        if self.scheme == "file":
            assert self.folder is not None
            out = {}
            for t in _file_topics(self.folder, self.topics):
                meta = self.folder / t / "meta.json"
                out[t] = int(orjson.loads(meta.read_bytes())["partitions"]) if meta.exists() else 0
            return out
        md = self.metadata()
        names = expand_topics(self.topics, [t for t in md.topics if not t.startswith("_")])
        return {t: len(md.topics[t].partitions) if t in md.topics and md.topics[t].error is None else 0
                for t in names}


_ADMINS: dict[str, tuple[Any, ErrorTrap]] = {}  # one admin client per cluster and settings, kept: a new one
# costs a connection (~57 ms); its log is silent (reach.py): once a broker has gone (a test's, a run's end)
# librdkafka would print every reconnect attempt; a failing `list_topics` still raises


def _admin(conf: dict[str, Any]) -> tuple[Any, ErrorTrap]:
    """The admin client of a cluster's settings, made once per process (`Source.partitions` runs every
    micro-batch), with the trap of its errors."""
    from confluent_kafka.admin import AdminClient

    key = repr(sorted(conf.items()))
    made = _ADMINS.get(key)
    if made is None:
        trap = ErrorTrap()
        made = _ADMINS[key] = (AdminClient(quiet_config(conf, trap)), trap)
    return made


def parse_source(uri: str, settings: dict[str, str] | None = None) -> Source:
    """A source URI; `settings` (TLS/SASL, e.g. a changefeed TOML's) under the URI's own parameters."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    params = {**(settings or {}), **dict(parse_qsl(parts.query, keep_blank_values=True))}
    if scheme == "kafka+ssl":
        params.setdefault("enable-tls", "true")
    path = unquote(parts.path)
    if scheme == "file":
        p = Path(path)
        if not path or path.endswith("/"):
            raise ConfigError(f"source {uri!r}: file:///folder/topic — the last path segment is the topic")
        return Source("file", [t for t in p.name.split(",") if t], folder=p.parent, params=params)
    if scheme in ("kafka", "kafka+ssl"):
        topics = [t for t in path.strip("/").split(",") if t]
        brokers = [b for b in parts.netloc.rsplit("@", 1)[-1].split(",") if b]
        if not topics or not brokers:
            raise ConfigError(f"source {uri!r}: kafka://host:port/topic[,topic...]")
        return Source("kafka", topics, brokers=brokers, params=params)
    raise ConfigError(f"source {uri!r}: scheme {parts.scheme!r} is not supported (kafka:// or file://)")


def uncapped(source: str, max_records_per_trigger: int | None) -> str | None:
    """What a command says when `--max-records-per-trigger` cannot bound its source's micro-batches (None: it can).
    A `file://` stream is Spark's Python data source, whose reader Spark 4.0 asks only for the latest offset, not
    giving the batch's start or a limit (admission control came to Python sources after 4.0, SPARK-55304); a cap
    there would also end an available-now run after its first batch."""
    if not max_records_per_trigger or parse_source(source).scheme == "kafka":
        return None
    return (f"--max-records-per-trigger {max_records_per_trigger} applies to Kafka sources only: a micro-batch of "
            f"{source.split('?', 1)[0]} takes every record written since the one before")


def read_raw(spark: SparkSession, source: Source | str, *, streaming: bool = True,
             max_records_per_trigger: int | None = None, kafka_options: dict[str, str] | None = None) -> DataFrame:
    """The stream's records as `RAW_SCHEMA` rows (a streaming DataFrame unless streaming=False)."""
    src = parse_source(source) if isinstance(source, str) else source
    if src.scheme == "kafka":
        r = spark.readStream if streaming else spark.read
        sec = src.security()
        for k, v in jvm_properties(sec).items():
            spark._jvm.java.lang.System.setProperty(k, v)  # type: ignore[union-attr]
        if sec.protocol != "PLAINTEXT":  # a plan Spark prints shows source options: not the JAAS line or key
            spark.conf.set("spark.sql.redaction.options.regex", "(?i)url|jaas|keystore|password|secret|token")
        r = r.format("kafka").option("kafka.bootstrap.servers", ",".join(src.brokers))
        r = r.options(**spark_kafka_options(sec))
        if src.patterned:  # new topics found within a second (Kafka's default metadata age is 5 minutes)
            r = r.option("subscribePattern", pattern_regex(src.topics)).option("kafka.metadata.max.age.ms", "1000")
        else:
            r = r.option("subscribe", ",".join(src.topics))
        r = r.option("startingOffsets", "earliest").option("failOnDataLoss", "true")
        # a task whose range ends at the log's end waited Kafka's default fetch.max.wait.ms (500 ms) there: a
        # micro-batch at the head of a stream took ~1 s longer (bench/RESULTS.md); kafka_options can set it
        r = r.option("kafka.fetch.max.wait.ms", "10")
        if streaming and max_records_per_trigger:
            r = r.option("maxOffsetsPerTrigger", str(max_records_per_trigger))
        if not streaming:
            r = r.option("endingOffsets", "latest")
        for k, v in (kafka_options or {}).items():
            r = r.option(k if k.startswith("kafka.") else f"kafka.{k}", v)
        return r.load().selectExpr("topic", "partition", "offset", "key", "value")
    register_file_source(spark)
    r = spark.readStream if streaming else spark.read
    r = r.format(FILE_SOURCE).option("path", str(src.folder)).option("topics", ",".join(src.topics))
    return r.load()


def register_file_source(spark: SparkSession) -> None:
    spark.dataSource.register(FileTopicSource)


# --- the Python data source over the file transport --------------------------------------------------

try:
    from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
except ImportError:  # pragma: no cover - pyspark is a dependency; this keeps the module importable for docs
    DataSource = DataSourceReader = DataSourceStreamReader = InputPartition = object  # type: ignore[misc,assignment]


class _Range(InputPartition):  # type: ignore[misc]
    """Records [start, end) of one partition file, starting at byte `pos`."""

    def __init__(self, path: str, topic: str, partition: int, start: int, end: int | None, pos: int) -> None:
        self.path, self.topic, self.partition = path, topic, partition
        self.start, self.end, self.pos = start, end, pos


def _file_topics(folder: Path, topics: list[str]) -> list[str]:
    """The file transport's topics that names and patterns stand for (a topic is a folder)."""
    existing = [d.name for d in folder.iterdir() if d.is_dir()] if any(map(is_pattern, topics)) and \
        folder.is_dir() else []
    return expand_topics(topics, existing)


def _partition_files(folder: Path, topics: list[str]) -> list[tuple[str, int, Path]]:
    out = []
    for t in _file_topics(folder, topics):
        meta = folder / t / "meta.json"
        if not meta.exists():
            continue
        n = int(orjson.loads(meta.read_bytes())["partitions"])
        out.extend((t, p, folder / t / f"partition-{p}.jsonl") for p in range(n))
    return out


def _read_range(r: _Range) -> Iterator[Any]:
    """The records of a range as Arrow batches; a torn last line (a writer mid-append) is left for later."""
    import pyarrow as pa

    from ..eventline import payload_from_json
    from .pyworker import cheap_zip_invalidation

    cheap_zip_invalidation()  # this worker's next tasks start without re-reading pyspark.zip (pyworker.py)
    if not os.path.exists(r.path):
        return
    schema = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                        ("key", pa.binary()), ("value", pa.binary())])
    offs: list[int] = []
    keys: list[bytes | None] = []
    vals: list[bytes | None] = []

    def batch() -> Any:
        return pa.RecordBatch.from_arrays(
            [pa.array([r.topic] * len(offs)), pa.array([r.partition] * len(offs), pa.int32()),
             pa.array(offs, pa.int64()), pa.array(keys, pa.binary()), pa.array(vals, pa.binary())], schema=schema)
    with open(r.path, "rb") as f:
        f.seek(r.pos)
        off = r.start
        for line in f:
            if r.end is not None and off >= r.end or not line.endswith(b"\n"):
                break
            rec = orjson.loads(line)
            offs.append(rec["offset"])
            keys.append(payload_from_json(rec.get("key"), "key"))
            vals.append(payload_from_json(rec.get("value"), "value"))
            off += 1
            if len(offs) >= 8192:
                yield batch()
                offs, keys, vals = [], [], []
    if offs:
        yield batch()


class _BatchReader(DataSourceReader):  # type: ignore[misc]
    def __init__(self, folder: Path, topics: list[str]) -> None:
        self.folder, self.topics = folder, topics

    def partitions(self) -> Sequence[_Range]:
        return [_Range(str(path), t, p, 0, None, 0) for t, p, path in _partition_files(self.folder, self.topics)]

    def read(self, partition: _Range) -> Iterator[Any]:  # type: ignore[override]
        return _read_range(partition)


class _StreamReader(DataSourceStreamReader):  # type: ignore[misc]
    """Offsets are {"topic/partition": [next offset, its byte position]}; the driver scans only new bytes."""

    def __init__(self, folder: Path, topics: list[str]) -> None:
        self.folder, self.topics = folder, topics
        self._known: dict[str, list[int]] = {}

    def initialOffset(self) -> dict:
        return {f"{t}/{p}": [0, 0] for t, p, _ in _partition_files(self.folder, self.topics)}

    def _scan(self, key: str, path: Path, start: list[int]) -> list[int]:
        """The last complete record after `start` (offset, byte position)."""
        off, pos = self._known.get(key, start)
        if off < start[0]:
            off, pos = start
        if not path.exists():
            return [off, pos]
        with open(path, "rb") as f:
            f.seek(pos)
            for line in f:
                if not line.endswith(b"\n"):
                    break
                off += 1
                pos += len(line)
        self._known[key] = [off, pos]
        return [off, pos]

    def latestOffset(self) -> dict:
        return {f"{t}/{p}": self._scan(f"{t}/{p}", path, [0, 0])
                for t, p, path in _partition_files(self.folder, self.topics)}

    def partitions(self, start: dict, end: dict) -> Sequence[_Range]:
        out = []
        for t, p, path in _partition_files(self.folder, self.topics):
            key = f"{t}/{p}"
            s = start.get(key, [0, 0])
            e = end.get(key, s)
            if e[0] > s[0]:
                out.append(_Range(str(path), t, p, s[0], e[0], s[1]))
        return out

    def read(self, partition: _Range) -> Iterator[Any]:  # type: ignore[override]
        return _read_range(partition)

    def commit(self, end: dict) -> None:
        pass


class FileTopicSource(DataSource):  # type: ignore[misc]
    """`spark.read(Stream).format("changefeed-files").option("path", folder).option("topics", "a,b")`."""

    @classmethod
    def name(cls) -> str:
        return FILE_SOURCE

    def schema(self) -> str:
        return RAW_SCHEMA

    def _args(self) -> tuple[Path, list[str]]:
        folder = self.options.get("path")
        topics = [t for t in (self.options.get("topics") or "").split(",") if t]
        if not folder or not topics:
            raise ConfigError("the changefeed-files source needs options path and topics")
        return Path(folder), topics

    def reader(self, schema: Any) -> _BatchReader:
        return _BatchReader(*self._args())

    def streamReader(self, schema: Any) -> _StreamReader:
        folder, topics = self._args()
        return _StreamReader(folder, topics)
