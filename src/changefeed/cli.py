"""Command line: thin wrappers over the codecs; errors are one line, `--debug` shows the detail."""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from . import cliopts as opt
from .cliio import (
    byte_progress,
    command_spark,
    err,
    no_password,
    open_in,
    open_out,
    reported,
)
from .codeccmd import decode_file, encode_file
from .config import ConfigError, build_config, parse_option_pairs
from .consuming import reachable
from .errors import DecodeError
from .eventline import EventReader, EventWriter, read_lines
from .linecodec import tail_lines, topic_records, write_avro_schemas
from .runreport import print_roundtrip, print_verify
from .spark.layout import lake_path
from .spark.logs import spark_folder
from .spark.objectstore import check_store
from .workdir import replacing

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="TiCDC change-event protocols: encode, decode and move change streams.")


@app.command()
def encode(
    protocol: opt.Protocol = "canal-json",
    option: opt.CodecOptions = None,
    input: opt.Input = None,
    output: opt.Output = None,
    errors: Annotated[str, typer.Option(help="on a bad event line: fail or skip")] = "fail",
    dead_letter: opt.DeadLetterFile = None,
    build_ts: Annotated[int | None, typer.Option(help="fixed build time (ms) for the volatile `ts` fields")] = None,
    topic: Annotated[str | None, typer.Option(help="topic expression, e.g. tidb_{schema}_{table} (avro)")] = None,
    debug: opt.Debug = False,
) -> None:
    """Event lines in, message lines out."""
    with reported(debug):
        summary = encode_file(protocol, option, input, output, errors, dead_letter, build_ts, topic, byte_progress)
        err.print(summary, highlight=False)


@app.command()
def decode(
    protocol: opt.Protocol = "canal-json",
    option: opt.CodecOptions = None,
    input: opt.Input = None,
    output: opt.Output = None,
    errors: Annotated[str, typer.Option(help="on a bad message: fail or skip")] = "fail",
    dead_letter: opt.DeadLetterFile = None,
    debug: opt.Debug = False,
) -> None:
    """Message lines in, event lines out."""
    with reported(debug):
        err.print(decode_file(protocol, option, input, output, errors, dead_letter, byte_progress), highlight=False)


@app.command()
def roundtrip(
    protocol: opt.Protocol = "canal-json",
    option: opt.CodecOptions = None,
    input: Annotated[Path | None, typer.Option("--input", "-i", help="event lines (default: bundled example)")]
    = None,
    out: Annotated[Path, typer.Option(help="folder for the messages and decoded events")] = Path("out"),
    debug: opt.Debug = False,
) -> None:
    """Events -> protocol messages (a local file) -> events again, and check they are equal."""
    with reported(debug):
        from .roundtrip import roundtrip_file

        cfg = build_config(protocol, parse_option_pairs(option or []))
        src = input or Path(str(resources.files("changefeed") / "examples" / "events.jsonl"))
        rt = roundtrip_file(cfg, src, out, name=protocol, option="--out")
        print_roundtrip(rt, f"changefeed roundtrip: {src.name} through {protocol}")
        if not rt.report.ok:
            raise typer.Exit(1)


@app.command()
def schema(
    protocol: opt.Protocol = "avro",
    option: opt.CodecOptions = None,
    input: opt.Input = None,
    debug: opt.Debug = False,
) -> None:
    """The key and value Avro schemas the encoder would register, one JSON object per table (no registry needed)."""
    with reported(debug):
        opts = parse_option_pairs(option or [])
        cfg = build_config(protocol, opts)
        if cfg.protocol != "avro":
            raise ConfigError(f"schema prints Avro schemas: protocol {protocol} has none to register")
        with open_in(input) as fin:
            write_avro_schemas(cfg, read_lines(fin), sys.stdout.buffer)


@app.command()
def produce(
    sink_uri: Annotated[str, typer.Option("--sink-uri", help="kafka://host:port/topic?... or file:///dir/topic?...")],
    config: opt.Config = None,
    input: opt.Input = None,
    watermark_interval_ms: Annotated[int, typer.Option(help="commit time between watermarks")] = 1000,
    ddl_to_all_partitions: Annotated[bool, typer.Option(
        help="canal-json: DDL to every partition (TiCDC's MQ sink) instead of partition 0 (the spec)")] = False,
    connect_timeout: opt.ConnectTimeout = 30.0,
    debug: opt.Debug = False,
) -> None:
    """Event lines through encoder, router and transport."""
    with reported(debug):
        from .produce import open_producer
        from .transport.reach import set_connect_timeout

        set_connect_timeout(connect_timeout)

        producer, transport, sink = open_producer(sink_uri, config, ddl_to_all_partitions=ddl_to_all_partitions,
                                                  watermark_interval_ms=watermark_interval_ms)
        reader = EventReader()
        try:
            with open_in(input) as fin, byte_progress(input, "producing") as advance:
                for lineno, line in read_lines(fin):
                    advance(len(line) + 1)
                    try:
                        producer.send(reader.parse(line))
                    except DecodeError as e:
                        raise e.located(f"line {lineno}") from None
            producer.close()
        finally:
            transport.close()
        where = sink.folder if sink.scheme == "file" else ",".join(sink.brokers)
        err.print(f"produced {producer.events} events as {producer.sent} messages to "
                  f"{', '.join(producer.topics)} at {where}", highlight=False)


@app.command()
def tail(
    source: Annotated[str, typer.Option("--from", help="kafka://host:port/topic?... or file:///dir/topic?...")],
    protocol: opt.ProtocolOverride = None,
    option: opt.CodecOptions = None,
    output: opt.Output = None,
    connect_timeout: opt.ConnectTimeout = 30.0,
    debug: opt.Debug = False,
) -> None:
    """Every partition of a topic, decoded: event lines with topic, partition and offset added."""
    with reported(debug):
        from .sinkconfig import parse_sink_uri
        from .transport.reach import set_connect_timeout

        set_connect_timeout(connect_timeout)
        sink = parse_sink_uri(source)
        records = topic_records(sink)  # nothing is read before the output opens
        opts = dict(sink.codec_options)
        opts.update(parse_option_pairs(option or []))
        cfg = build_config(protocol or sink.protocol, opts)
        with open_out(output) as fout:
            n, partitions = tail_lines(records, cfg, fout)
        err.print(f"{n} events from {sink.topic} ({partitions} partitions)", highlight=False)


def _codec_opts(uri: str, protocol: str | None, option: list[str] | None) -> tuple[str, dict[str, str]]:
    """The protocol and codec options of a stream URI, with --protocol and --option over the URI's own."""
    from .sinkconfig import codec_options

    return codec_options(uri, protocol, parse_option_pairs(option or []))


@app.command()
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


@app.command()
def transcode(
    source: opt.From,
    sink_uri: Annotated[str, typer.Option("--sink-uri", help="kafka://host:port/topic?protocol=... or file:///...")],
    protocol: opt.ProtocolOverride = None,
    option: opt.CodecOptions = None,
    checkpoint: Annotated[str | None, typer.Option(help="the query's checkpoint folder (default: "
                                                        "./changefeed-transcode/<hash of --from and --sink-uri>)")
                          ] = None,
    trigger: opt.Trigger = "available-now",
    max_records_per_trigger: opt.MaxRecords = None,
    watermark_interval_ms: Annotated[int, typer.Option(help="commit time between watermarks")] = 1000,
    ddl_to_all_partitions: Annotated[bool, typer.Option(
        help="canal-json: DDL to every partition (TiCDC's MQ sink) instead of partition 0 (the spec)")] = False,
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


@app.command()
def replay(
    lake: opt.Lake,
    sink_uri: Annotated[str, typer.Option("--sink-uri", help="kafka://host:port/topic?protocol=... or file:///...")],
    from_ts: Annotated[int | None, typer.Option(help="the first commit ts sent (default: all)")] = None,
    tables: Annotated[str | None, typer.Option(help="db.table,db.* ... (default: every table)")] = None,
    watermark_interval_ms: Annotated[int, typer.Option(help="commit time between watermarks")] = 1000,
    ddl_to_all_partitions: Annotated[bool, typer.Option(
        help="canal-json: DDL to every partition (TiCDC's MQ sink) instead of partition 0 (the spec)")] = False,
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


@app.command()
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


@app.command()
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


@app.command()
def capture(
    source: Annotated[str, typer.Option("--source", help="mysql://user:pass@host:port/?server-id=N&tables=db.*"
                                                         "&checkpoint=FILE")],
    sink_uri: Annotated[str, typer.Option("--sink-uri", help="kafka://host:port/topic?protocol=... or file:///…")],
    checkpoint: Annotated[Path | None, typer.Option(help="the binlog position file (default: the URI's "
                                                         "checkpoint=, else changefeed-capture.checkpoint.json)")
                          ] = None,
    follow: Annotated[bool, typer.Option("--follow/--no-follow", help="wait for new changes at the binlog's end"
                                         )] = True,
    idle_exit: Annotated[float | None, typer.Option(help="with --follow: stop after this many seconds with "
                                                         "nothing new")] = None,
    config: opt.Config = None,
    debug: opt.Debug = False,
) -> None:
    """Capture a MySQL/MariaDB binlog into a TiCDC-format stream; resumes from its checkpoint (at-least-once)."""
    with reported(debug):
        from .mysql.capture import capture as run_capture
        from .mysql.uri import parse_mysql_uri

        uri = parse_mysql_uri(source)
        if checkpoint is not None:
            uri.checkpoint = checkpoint
        if uri.checkpoint is None:
            uri.checkpoint = Path("changefeed-capture.checkpoint.json")
        started = uri.checkpoint.exists()
        err.print(f"capturing {uri.where} ({', '.join(uri.tables)}) into {no_password(sink_uri)}, "
                  + (f"resuming from {uri.checkpoint}" if started else
                     f"from now{' after a snapshot' if uri.snapshot else ''}; checkpoint {uri.checkpoint}"),
                  highlight=False)

        def progress(rep: object) -> None:
            err.print(f"{getattr(rep, 'transactions', 0):,} transactions, {getattr(rep, 'events', 0):,} events; "
                      f"acknowledged up to {getattr(rep, 'position', '')}", highlight=False)

        rep = run_capture(uri, sink_uri, follow=follow, config=config, idle_exit_s=idle_exit,
                          on_progress=progress if debug else None)
        rate = rep.events / rep.seconds if rep.seconds > 0 else 0
        err.print(f"captured {rep.transactions:,} transactions, {rep.events:,} events -> {rep.messages:,} messages "
                  f"in {rep.seconds:.1f} s ({rate:,.0f} events/s); checkpoint at {rep.position or '-'}",
                  highlight=False)


@app.command()
def workload(
    output: Annotated[Path, typer.Option("--output", "-o", help="event lines of the stream")],
    transactions: Annotated[int, typer.Option(help="transactions (1 to 4 row changes each) after the DDL")] = 1000,
    seed: Annotated[int, typer.Option(help="the same seed gives the same stream")] = 1,
    expected: Annotated[Path | None, typer.Option(help="write the final upstream state here (for verify)")] = None,
    live_rows: Annotated[int, typer.Option(help="rows a table holds at most (bounds memory)")] = 20_000,
    debug: opt.Debug = False,
) -> None:
    """A synthetic TiDB-like change stream: every type family, multi-table transactions, DDL mid-stream."""
    with reported(debug):
        from .job import expected_lines
        from .workload import Workload

        w = Workload(seed, transactions, live_rows=live_rows)
        writer = EventWriter()
        n = 0
        with replacing(output) as f, Progress(TextColumn("workload"), BarColumn(), TextColumn(
                "{task.completed:,} events"), TimeRemainingColumn(), console=err, transient=True) as bar:
            task = bar.add_task("workload", total=None)
            for ev in w:
                f.write(writer.line(ev) + b"\n")
                n += 1
                if n % 5000 == 0:
                    bar.update(task, completed=n)
        if expected is not None:
            with replacing(expected, "--expected") as f:
                f.writelines(expected_lines(w.state))
        rows = sum(len(t.rows) for t in w.state.tables.values())
        err.print(f"wrote {n:,} events to {output}" + (f"; the final state ({len(w.state.tables)} tables, {rows:,} "
                  f"rows) to {expected}" if expected else ""), highlight=False)


@app.command()
def run(
    ctx: typer.Context,
    protocol: opt.Protocol = "canal-json",
    option: opt.CodecOptions = None,
    sink_uri: opt.RunSinkUri = None,
    source: opt.RunSource = "workload",
    transactions: opt.RunTransactions = 1000,
    seed: opt.RunSeed = 1,
    work: opt.Work = Path("changefeed-run"),
    lake: opt.RunLake = None,
    scd: opt.RunScd = 1,
    config: opt.Config = None,
    max_records_per_trigger: opt.MaxRecords = None,
    master: opt.Master = None,
    conf: opt.SparkConf = None,
    rate: opt.Rate = None,
    table_features: opt.TableFeatures = "auto",
    catalog: opt.Catalog = None,
    database_prefix: opt.DatabasePrefix = None,
    table_format: opt.TableFormat = None,
    vacuum_retention: opt.VacuumRetention = None,
    fresh: opt.Fresh = True,
    metrics_port: opt.MetricsPort = None,
    metrics_host: opt.MetricsHost = "127.0.0.1",
    health_timeout: opt.HealthTimeout = 600.0,
    warm_up: opt.WarmUp = None,
    debug: opt.Debug = False,
) -> None:
    """The main job: source -> encoder -> transport -> Spark -> Delta tables -> verify, with a closing report.
    SIGTERM or SIGINT: the source stops at a transaction boundary with a last watermark, what it sent is applied
    and verified, exit 0 (again: stop at once)."""
    with reported(debug):
        from .consumerconfig import command_line_source, with_toml
        from .job import RunOptions
        from .running import run_main_job

        names = ("scd", "max_records_per_trigger", "table_features", "vacuum_retention", "metrics_port",
                 "metrics_host", "health_timeout", "warm_up")
        given = locals()
        got = with_toml({n: given[n] for n in names}, command_line_source(ctx), config)  # [consumer] keys it has
        scd, max_records_per_trigger, table_features, vacuum_retention, metrics_port, metrics_host, health_timeout, \
            warm_up = (got[n] for n in names)
        opts_, sink_uri = opt.run_codec_options(protocol, option, sink_uri)
        from .spark.apply.names import lake_settings

        cat, prefix, fmt = lake_settings(str(config) if config else None, catalog, database_prefix, table_format)
        ro = RunOptions(protocol=protocol, options=opts_, sink_uri=sink_uri, work=work, source=source,
                        transactions=transactions, seed=seed, scd=scd, config=config,
                        max_records_per_trigger=max_records_per_trigger, rate=rate, table_features=table_features,
                        vacuum_retention=vacuum_retention, lake_uri=lake_path(lake) if lake else None, fresh=fresh,
                        catalog=cat, database_prefix=prefix, table_format=fmt)
        if not run_main_job(ro, lake=lake, work=work, fresh=fresh, master=master, conf=conf, config=config,
                            debug=debug, metrics_port=metrics_port, metrics_host=metrics_host,
                            health_timeout=health_timeout, warm_up=warm_up):
            raise typer.Exit(1)


def main() -> None:
    """`python -m changefeed.cli`: as the console script (entry.py), a plain encode/decode read without typer."""
    from .quickcli import main as quick_main

    quick_main(app)


if __name__ == "__main__":
    main()
