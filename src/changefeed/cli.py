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
    err,
    no_password,
    open_in,
    open_out,
    reported,
)
from .clilake import consume, replay, status, transcode, verify
from .codeccmd import decode_file, encode_file
from .config import ConfigError, build_config, parse_option_pairs
from .errors import DecodeError
from .eventline import EventReader, EventWriter, read_lines
from .linecodec import tail_lines, topic_records, write_avro_schemas
from .runreport import print_roundtrip
from .spark.layout import lake_path
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
    watermark_interval_ms: opt.WatermarkInterval = 1000,
    ddl_to_all_partitions: opt.DdlToAllPartitions = False,
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


for _command in (consume, transcode, replay, status, verify):  # clilake.py
    app.command()(_command)


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
