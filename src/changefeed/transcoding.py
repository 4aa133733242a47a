"""The `transcode` and `replay` commands' workflow (cli.py holds only their options): Spark as the producer."""

from __future__ import annotations

import hashlib
from pathlib import Path

from .cliio import command_spark, err, no_password, require_source
from .spark.layout import lake_path
from .spark.logs import spark_folder
from .stopping import GracefulStop, jvm_ignores_sigterm
from .workdir import open_checkpoint

DEFAULT_CHECKPOINTS = Path("changefeed-transcode")  # under the current folder: one checkpoint per (from, sink)


def default_checkpoint(source: str, sink_uri: str) -> Path:
    h = hashlib.sha1(f"{source}\n{sink_uri}".encode()).hexdigest()[:12]
    return DEFAULT_CHECKPOINTS / h


def sink_reachable(sink_uri: str, config: Path | None) -> None:
    """A Kafka sink's brokers (and its schema registry) answer before Spark starts: refused in one line within the
    connect timeout, not a failed query minutes later."""
    from .consuming import registry_answers
    from .sinkconfig import resolve
    from .transport.reach import ErrorTrap, connect_timeout

    sink, cfg, _ = resolve(sink_uri, config)
    if sink.scheme == "kafka":
        from .transport.kafka import probed_admin

        probed_admin(sink, ErrorTrap())
    if cfg.schema_registry:
        registry_answers(cfg, connect_timeout())


def run_transcode(source: str, sink_uri: str, protocol: str, options: dict[str, str], *, checkpoint: str | None,
                  trigger: str, config: Path | None, settings: dict[str, str], master: str | None,
                  conf: list[str] | None, debug: bool, max_records_per_trigger: int | None,
                  watermark_interval_ms: int, ddl_to_all_partitions: bool) -> None:
    """A stream re-encoded into another, until drained (available-now) or stopped (SIGTERM/SIGINT: the micro-batch
    in hand completes; a restart goes on from the checkpoint)."""
    from .spark.source import uncapped
    from .spark.transcode import start_transcode

    base = source.split("?", 1)[0]
    require_source(base, waits=trigger != "available-now")
    said = uncapped(base, max_records_per_trigger)
    if said:
        err.print(said, highlight=False)
    cp = lake_path(checkpoint) if checkpoint else str(default_checkpoint(no_password(source), no_password(sink_uri)))
    sink_reachable(sink_uri, config)
    open_checkpoint(cp)  # refused, in one line, when it holds the user's files
    with jvm_ignores_sigterm():
        spark = command_spark(master, spark_folder(None), debug, conf, config)
    stop = GracefulStop().install()
    query, writer = start_transcode(spark, base, protocol, options, sink_uri, checkpoint=cp, trigger=trigger,
                                    config=str(config) if config else None, kafka_settings=settings,
                                    max_records_per_trigger=max_records_per_trigger,
                                    watermark_interval_ms=watermark_interval_ms,
                                    ddl_to_all_partitions=ddl_to_all_partitions, batch_guard=stop.guard)
    stop.attach(query)
    stopped = stop.wait(query)
    if not stopped and trigger == "available-now":
        writer.finish(spark)
    st = writer.state
    err.print(f"transcoded {st.events:,} changes as {st.messages:,} messages to {no_password(sink_uri)} "
              f"({st.batches} micro-batches; checkpoint {cp}; last watermark {st.floor})", highlight=False)
    if stopped:
        err.print(f"stopped on {stop.signal_name}: the micro-batch in hand completed; a restart goes on from there",
                  highlight=False)


def run_replay(lake: str, sink_uri: str, *, from_ts: int | None, tables: list[str] | None, config: Path | None,
               master: str | None, conf: list[str] | None, debug: bool, watermark_interval_ms: int,
               ddl_to_all_partitions: bool) -> None:
    """A lake's full changelog sent again, in commit order."""
    from .errors import ChangefeedError
    from .spark.objectstore import check_store
    from .spark.transcode import replay

    lake = lake_path(lake)
    if "://" not in lake and not Path(lake).is_dir():
        raise ChangefeedError(f"--lake {lake}: no such folder")
    sink_reachable(sink_uri, config)
    spark = command_spark(master, spark_folder(lake) if "://" not in lake else spark_folder(None), debug, conf,
                          config)
    check_store(spark, lake)
    rep = replay(spark, lake, sink_uri, from_ts=from_ts, tables=tables, config=str(config) if config else None,
                 watermark_interval_ms=watermark_interval_ms, ddl_to_all_partitions=ddl_to_all_partitions)
    err.print(f"replayed {rep.events:,} changes as {rep.messages:,} messages to {', '.join(rep.topics)} "
              f"(last watermark {rep.resolved})", highlight=False)
