"""`changefeed consume`'s run, once its options are resolved: the source and the lake checked before Spark
starts, the query (started again from its checkpoint when the brokers went away or Spark's Python reader was
late), a graceful stop, metrics, and the summary. `run_*` pieces shared with `changefeed run` and `transcode`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cliio import command_spark, err, require_source
from .runreport import ConsumeTotals
from .spark.layout import LakeLayout, lake_path, schema_store
from .spark.logs import spark_folder
from .spark.objectstore import check_store
from .stopping import GracefulStop, jvm_ignores_sigterm
from .workdir import open_checkpoint, open_lake

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from .config import CodecConfig
    from .metrics import ConsumerMetrics, MetricsServer
    from .spark.apply import BatchReport


def consume_into_lake(source: str, lake: str, proto: str, opts: dict[str, str], naming: tuple[Any, Any, Any], *,
                      config: Path | None, master: str | None, conf: list[str] | None, debug: bool, scd: int,
                      trigger: str, max_records_per_trigger: int | None, on_ddl_error: str, table_features: str,
                      changelog: str, changelog_retention: float | None, watermarks: bool | None,
                      vacuum_retention: float | None, checkpoint: str | None, connect_timeout: float,
                      wait_for_topic: bool, metrics_port: int | None, metrics_host: str,
                      health_timeout: float, warm_up: bool | None = None) -> None:
    """Apply the stream at `source` to `lake` until it is drained (available-now) or stopped by a signal."""
    from .spark.pipeline import WORKER_RESTARTS, apply_changes, read_changes, worker_was_late
    from .spark.source import parse_source, uncapped

    base = source.split("?", 1)[0]
    require_source(base, waits=trigger != "available-now")  # a topic that is not there: one line, exit 1
    lake = lake_path(lake)
    checkpoint = lake_path(checkpoint) if checkpoint else None
    cp = checkpoint or LakeLayout(lake).checkpoint
    open_lake(lake)  # refused, in one line, when it holds the user's files
    if checkpoint:
        open_checkpoint(checkpoint)
    settings = reachable(source, config, connect_timeout, wait_for_topic, opts)  # before Spark starts
    from .spark.warmup import announce_and_warm, jvm_launched, should_warm_up

    launched = jvm_launched()
    spark_dir = spark_folder(lake)
    with jvm_ignores_sigterm():
        spark = command_spark(master, spark_dir, debug, conf, config)
    check_store(spark, lake, timeout=connect_timeout)  # a wrong endpoint or bad credentials: one line naming the store
    if checkpoint:
        check_store(spark, checkpoint, "--checkpoint", connect_timeout)
    from .spark.apply import claim_lake

    claim_lake(spark, lake)  # another consumer of the lake: refused now, before the warm-up and the query
    stop = GracefulStop().install()  # after Spark is up: PySpark sets a SIGINT handler of its own
    # the metrics and a stop served from here on, the warm-up included: a supervisor's probe or SIGTERM then
    # finds the service it started, not a process that ignores it for the warm-up's seconds
    metrics, server = serve_metrics_for(spark, lake, metrics_port, metrics_host, health_timeout)
    if should_warm_up(warm_up, launched, live=trigger.startswith("processing-time")):
        announce_and_warm(spark, spark_dir, lambda line: err.print(line, highlight=False), stop.requested.is_set)
    totals = ConsumeTotals()  # the clock starts once Spark is up
    src = parse_source(base, settings)

    def on_batch(r: BatchReport) -> None:
        totals.batch(r)
        if metrics is not None:
            metrics.batch(r)

    said = uncapped(base, max_records_per_trigger)
    if said:
        err.print(said, highlight=False)
    late = 0  # query starts that failed on Spark's Python reader connecting back late (spark/pipeline.py)
    try:
        while True:  # once more from the checkpoint when the query stopped while the brokers were away
            changes = read_changes(spark, base, proto, opts, schema_store=schema_store(cp),
                                   max_records_per_trigger=max_records_per_trigger, kafka_settings=settings)
            query: Any = apply_changes(changes, lake, checkpoint=cp, stored_as_scd_type=scd, trigger=trigger,
                                       watermarks=watermarks, on_ddl_error=on_ddl_error, on_batch=on_batch,
                                       table_features=table_features, changelog=changelog,
                                       vacuum_retention_hours=vacuum_retention, batch_guard=stop.guard,
                                       catalog=naming[0], database_prefix=naming[1], table_format=naming[2],
                                       changelog_retention_hours=changelog_retention)
            stop.attach(query)
            if metrics is not None:
                metrics.query = query
            with src.watch() as watch:  # a broker that goes away is said, once
                try:
                    stopped = stop.wait(query)
                    break
                except Exception as e:
                    if worker_was_late(e) and late < WORKER_RESTARTS and not stop.requested.is_set():
                        late += 1
                        err.print("Spark's Python reader did not connect back within 10 s (a loaded machine): "
                                  "starting the query again from its checkpoint", highlight=False)
                        continue
                    if watch is None or not watch.saw_down:
                        raise
            src.metadata()  # waits for the brokers (said once), then the query resumes from its checkpoint
            err.print("the query stopped while the brokers were away: resuming from its checkpoint",
                      highlight=False)
    finally:
        if server is not None:
            server.close()
    totals.print_end(lake)
    if stopped:
        err.print(f"stopped on {stop.signal_name}: the micro-batch in hand completed; a restart goes on from "
                  "there", highlight=False)


def reachable(source: str, config: Path | None, connect_timeout: float, wait_for_topic: bool,
              codec: dict[str, str]) -> dict[str, str]:
    """A Kafka source's TLS/SASL settings (URI over TOML), once its brokers, topics and schema registry answer:
    refused in one line, within the connect timeout, when they cannot be used."""
    from .sinkconfig import kafka_settings
    from .transport.reach import set_connect_timeout

    set_connect_timeout(connect_timeout)
    settings = kafka_settings(source, config)
    if not source.lower().startswith("kafka"):
        return settings
    from .spark.source import parse_source

    parse_source(source.split("?", 1)[0], settings).probe(wait_for_topic)
    if codec.get("schema-registry"):
        from .config import build_config

        registry_answers(build_config("avro", {k: v for k, v in codec.items() if k.startswith("schema-registry")}),
                         connect_timeout)
    return settings


def registry_answers(cfg: CodecConfig, timeout_s: float) -> None:
    """The config's schema registry lists its subjects within the timeout (one try more): a registry that is down
    is one line before any work starts."""
    from .avro.registry import SchemaRegistry
    from .codecs import registry_tls_args

    SchemaRegistry(cfg.schema_registry, timeout_s=timeout_s, retries=1, **registry_tls_args(cfg)).subjects()


def serve_metrics_for(spark: SparkSession, lake: str, port: int | None, host: str,
                      health_timeout: float) -> tuple[ConsumerMetrics | None, MetricsServer | None]:
    """`--metrics-port`: served from the lake's last progress record on."""
    if port is None:
        return None, None
    from .metrics import serve_metrics
    from .status import delta_tables, lake_status, progress_records

    status = lake_status(progress_records(lake, lambda: spark), delta_tables(lake))
    metrics, server = serve_metrics(port, host, health_timeout, status)
    if server is not None:
        err.print(f"metrics on {server.address}/metrics, health on {server.address}/healthz", highlight=False)
    return metrics, server
