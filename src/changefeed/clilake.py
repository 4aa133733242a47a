"""The commands over a lake: consume a stream into it, transcode and replay streams on Spark, and read where a
consumer stands (status) and whether the lake holds what upstream does (verify). Registered on the app by cli.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from . import cliopts as opt
from .cliio import command_spark, err, no_password, reported
from .config import parse_option_pairs
from .consuming import reachable
from .runreport import print_verify
from .spark.layout import lake_path
from .spark.logs import spark_folder
from .spark.objectstore import check_store


def _codec_opts(uri: str, protocol: str | None, option: list[str] | None) -> tuple[str, dict[str, str]]:
    """The protocol and codec options of a stream URI, with --protocol and --option over the URI's own."""
    from .sinkconfig import codec_options

    return codec_options(uri, protocol, parse_option_pairs(option or []))


def consume(
    ctx: typer.Context,
    source: opt.From,
    lake: opt.Lake,
    protocol: opt.ProtocolOverride = None,
    option: opt.CodecOptions = None,
    checkpoint: opt.Checkpoint = None,
    scd: opt.ConsumeScd = 1,
    trigger: opt.Trigger = "available-now",
    max_records_per_trigger: opt.MaxRecords = None,
    on_ddl_error: opt.OnDdlError = "stop",
    table_features: opt.TableFeatures = "auto",
    catalog: opt.Catalog = None,
    database_prefix: opt.DatabasePrefix = None,
    table_format: opt.TableFormat = None,
    changelog: opt.Changelog = "minimal",
    watermarks: opt.Watermarks = None,
    vacuum_retention: opt.VacuumRetention = None,
    changelog_retention: opt.ChangelogRetention = None,
    master: opt.Master = None,
    config: opt.ConsumeConfig = None,
    connect_timeout: opt.ConnectTimeout = 30.0,
    wait_for_topic: opt.WaitForTopic = False,
    metrics_port: opt.MetricsPort = None,
    metrics_host: opt.MetricsHost = "127.0.0.1",
    health_timeout: opt.HealthTimeout = 600.0,
    warm_up: opt.WarmUp = None,
    conf: opt.SparkConf = None,
    debug: opt.Debug = False,
) -> None:
    """A change stream into Delta tables, in commit order, exactly once (Spark Structured Streaming).
    SIGTERM or SIGINT: the running micro-batch completes, then the summary, exit 0 (again: stop at once)."""
    with reported(debug):
        from .consumerconfig import command_line_source, hours, with_toml

        names = ("scd", "trigger", "max_records_per_trigger", "on_ddl_error", "table_features", "changelog",
                 "changelog_retention", "watermarks", "vacuum_retention", "checkpoint", "connect_timeout",
                 "wait_for_topic", "metrics_port", "metrics_host", "health_timeout", "warm_up")
        if changelog_retention is not None:
            changelog_retention = hours(changelog_retention, "--changelog-retention")  # type: ignore[assignment]
        given = locals()
        got = with_toml({n: given[n] for n in names}, command_line_source(ctx), config)  # [consumer] keys
        proto, opts = _codec_opts(source, protocol, option)
        from .consuming import consume_into_lake
        from .spark.apply.names import lake_settings

        naming = lake_settings(str(config) if config else None, catalog, database_prefix, table_format)
        consume_into_lake(source, lake, proto, opts, naming, config=config, master=master, conf=conf, debug=debug,
                          **got)


def transcode(
    source: opt.From,
    sink_uri: opt.StreamSinkUri,
    protocol: opt.ProtocolOverride = None,
    option: opt.CodecOptions = None,
    checkpoint: Annotated[str | None, typer.Option(help="the query's checkpoint folder (default: "
                                                        "./changefeed-transcode/<hash of --from and --sink-uri>)")
                          ] = None,
    trigger: opt.Trigger = "available-now",
    max_records_per_trigger: opt.MaxRecords = None,
    watermark_interval_ms: opt.WatermarkInterval = 1000,
    ddl_to_all_partitions: opt.DdlToAllPartitions = False,
    master: opt.Master = None,
    config: opt.Config = None,
    connect_timeout: opt.ConnectTimeout = 30.0,
    conf: opt.SparkConf = None,
    debug: opt.Debug = False,
) -> None:
    """A change stream re-encoded into another protocol or topic on Spark, routed as TiCDC routes (streaming,
    from a checkpoint; at least once, what a restart sends again is the micro-batch it was in)."""
    with reported(debug):
        from .transcoding import run_transcode

        proto, opts = _codec_opts(source, protocol, option)
        settings = reachable(source, config, connect_timeout, False, opts)
        run_transcode(source, sink_uri, proto, opts, checkpoint=checkpoint, trigger=trigger, config=config,
                      settings=settings, master=master, conf=conf, debug=debug,
                      max_records_per_trigger=max_records_per_trigger, watermark_interval_ms=watermark_interval_ms,
                      ddl_to_all_partitions=ddl_to_all_partitions)


def replay(
    lake: opt.Lake,
    sink_uri: opt.StreamSinkUri,
    from_ts: Annotated[int | None, typer.Option(help="the first commit ts sent (default: all)")] = None,
    tables: Annotated[str | None, typer.Option(help="db.table,db.* ... (default: every table)")] = None,
    watermark_interval_ms: opt.WatermarkInterval = 1000,
    ddl_to_all_partitions: opt.DdlToAllPartitions = False,
    master: opt.Master = None,
    config: opt.Config = None,
    connect_timeout: opt.ConnectTimeout = 30.0,
    conf: opt.SparkConf = None,
    debug: opt.Debug = False,
) -> None:
    """A lake's bronze changelog (consumed with --changelog full) sent again as a stream, in commit order."""
    with reported(debug):
        from .transport.reach import set_connect_timeout

        set_connect_timeout(connect_timeout)
        from .transcoding import run_replay

        run_replay(lake, sink_uri, from_ts=from_ts, tables=[t for t in (tables or "").split(",") if t] or None,
                   config=config, master=master, conf=conf, debug=debug,
                   watermark_interval_ms=watermark_interval_ms, ddl_to_all_partitions=ddl_to_all_partitions)


def status(
    lake: Annotated[str, typer.Option("--lake", help="the lake changefeed consume writes")],
    json: Annotated[bool, typer.Option("--json", help="one JSON object (the names of /metrics' figures)")] = False,
    master: opt.Master = None,
    debug: opt.Debug = False,
) -> None:
    """Where a consumer stands in a lake, from its progress records: applied commit ts, lag, watermarks, totals."""
    with reported(debug):
        import orjson

        from .errors import ChangefeedError
        from .status import delta_tables, lake_status, local_folder, progress_records, status_lines

        folder = local_folder(lake)
        if folder is not None and not folder.is_dir():
            raise ChangefeedError(f"--lake {lake}: no such folder")
        st = lake_status(progress_records(lake, lambda: command_spark(master)), delta_tables(lake))
        if json:
            sys.stdout.buffer.write(orjson.dumps(st, option=orjson.OPT_INDENT_2) + b"\n")
        else:
            for line in status_lines(st, lake):
                print(line)


def verify(
    lake: Annotated[str, typer.Option("--lake", help="the lake changefeed consume wrote")],
    against: Annotated[str, typer.Option("--against", help="event lines FILE, a stream URI to decode, or "
                                                          "mysql://user:pass@host:port/?tables=db.* (live tables)")],
    protocol: Annotated[str | None, typer.Option("--protocol", "-p", help="the stream's protocol")] = None,
    option: opt.CodecOptions = None,
    master: Annotated[str | None, typer.Option(help="Spark master")] = None,
    connect_timeout: opt.ConnectTimeout = 30.0,
    conf: opt.SparkConf = None,
    config: opt.SparkConfig = None,
    debug: opt.Debug = False,
) -> None:
    """Compare the lake with the upstream state: counts, checksums, the first differing rows."""
    with reported(debug):
        from .transport.reach import set_connect_timeout

        set_connect_timeout(connect_timeout)
        from .mysql.uri import is_mysql_uri
        from .spark.verify import expected_from
        from .spark.verify import verify as run_verify

        if is_mysql_uri(against):  # the live tables, read consistently now
            from .mysql.source import live_state
            from .mysql.uri import parse_mysql_uri

            expected, _ = live_state(parse_mysql_uri(against))
        elif "://" in against:  # compared at the lake's applied watermark, as TiCDC's consumer sees the stream
            from .spark.verify import stream_at
            from .status import applied_ts

            proto, opts = _codec_opts(against, protocol, option)
            upto = applied_ts(lake, lambda: command_spark(master))
            expected, past = stream_at(against, upto, proto, opts)  # with the URI's TLS/SASL settings
            if upto:
                err.print(f"compared at the lake's applied watermark {upto}: {past:,} changes of the stream lie "
                          "past it", highlight=False)
        else:
            expected = expected_from(against)
        lake = lake_path(lake)
        spark = command_spark(master, spark_folder(lake) if Path(lake).is_dir() else spark_folder(None), debug, conf,
                              config)
        check_store(spark, lake)
        rep = run_verify(spark, lake, expected)
        print_verify(rep, f"{lake} against {no_password(against)}")
        if not rep.ok:
            raise typer.Exit(1)
