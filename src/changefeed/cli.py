"""Command line: thin wrappers over the codecs; errors are one line, `--debug` shows the detail."""

from __future__ import annotations

import contextlib
import sys
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated

import orjson
import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn
from rich.table import Table

from .codecs import ConsumerDecoder, make_decoder, make_encoder
from .config import PROTOCOLS, ConfigError, build_config, parse_option_pairs
from .errors import ChangefeedError, DecodeError
from .eventline import EventReader, EventWriter, Message, message_from_line, message_to_line, read_lines
from .spark.layout import LakeLayout, schema_store
from .workdir import open_checkpoint, open_folder, open_lake, output_file

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from .roundtrip import RoundtripRun

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="TiCDC change-event protocols: encode, decode and move change streams.")
err = Console(stderr=True, soft_wrap=True)  # an error stays one line, however long

ProtocolOpt = Annotated[str, typer.Option("--protocol", "-p", help=f"one of {', '.join(PROTOCOLS)}")]
OptionOpt = Annotated[list[str] | None, typer.Option("--option", help="codec option K=V, sink-URI spelling")]
InOpt = Annotated[Path | None, typer.Option("--input", "-i", help="input file (default: stdin)")]
OutOpt = Annotated[Path | None, typer.Option("--output", "-o", help="output file (default: stdout)")]
TableFeaturesOpt = Annotated[str, typer.Option(
    help="auto: turn Delta's column mapping / type widening on when a DDL needs it; minimal: rewrite the table "
         "instead, so delta-rs, Polars and DuckDB keep reading it")]
DebugOpt = Annotated[bool, typer.Option("--debug", help="show the full detail of errors")]


@contextlib.contextmanager
def _reported(debug: bool) -> Iterator[None]:
    """Errors become one readable line (and exit 1); --debug adds the traceback."""
    try:
        yield
    except (ChangefeedError, OSError) as e:
        if debug:
            err.print(traceback.format_exc(), markup=False, highlight=False)
        err.print(f"[bold red]error:[/] {e}", highlight=False)
        raise typer.Exit(1) from None
    except Exception as e:
        if not type(e).__module__.startswith(("pyspark", "py4j")):
            raise
        if debug:
            err.print(traceback.format_exc(), markup=False, highlight=False)
        err.print(f"[bold red]error:[/] the Spark query stopped: {_spark_reason(e)} (--debug for the detail)",
                  highlight=False)
        raise typer.Exit(1) from None


def _spark_reason(e: Exception) -> str:
    """The line of a Spark error that says what went wrong: the Python error raised in a micro-batch, else the
    first line of the JVM's message."""
    import re

    text = getattr(e, "desc", None) or str(e)
    named = re.findall(r"^\s*((?:[\w.]+\.)?\w*(?:Error|Exception): .+)$", text, flags=re.M)
    py = [x for x in named if not x.startswith(("org.", "java.", "scala.", "py4j."))]
    line = (py or named or [x for x in text.splitlines() if x.strip()] or [type(e).__name__])[-1 if py else 0]
    return line.strip()


@contextlib.contextmanager
def _open_in(path: Path | None) -> Iterator[IO[bytes]]:
    if path is None or str(path) == "-":
        yield sys.stdin.buffer
    else:
        with open(path, "rb") as f:
            yield f


@contextlib.contextmanager
def _open_out(path: Path | None) -> Iterator[IO[bytes]]:
    if path is None or str(path) == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
    else:
        with open(output_file(path), "wb", buffering=1 << 20) as f:
            yield f


@contextlib.contextmanager
def _progress(path: Path | None, what: str) -> Iterator[callable]:  # type: ignore[valid-type]
    """A byte-progress bar on a terminal for file inputs; a no-op otherwise."""
    if path is None or str(path) == "-" or not err.is_terminal:
        yield lambda n: None
        return
    total = path.stat().st_size
    with Progress(TextColumn(what), BarColumn(), TransferSpeedColumn(), TimeRemainingColumn(), console=err,
                  transient=True) as prog:
        task = prog.add_task(what, total=total)
        yield lambda n: prog.advance(task, n)


class _DeadLetter:
    """Rejected input lines with why they were rejected, one JSON object per line."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.count = 0
        self._f: IO[bytes] | None = None

    def put(self, lineno: int, line: bytes, e: DecodeError) -> None:
        self.count += 1
        if self.path is None:
            return
        if self._f is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._f = open(self.path, "ab")
        rec = {"line": lineno, "error": e.reason, "field": e.field, "offset": e.offset,
               "input": line.decode("utf-8", "replace")}
        self._f.write(orjson.dumps(rec) + b"\n")

    def close(self) -> None:
        if self._f is not None:
            self._f.close()


def _bad_line(e: DecodeError, lineno: int, line: bytes, errors: str, dead: _DeadLetter) -> None:
    located = e.located(f"line {lineno}")
    dead.put(lineno, line, e)
    if errors == "fail":
        raise located
    err.print(f"[yellow]skipped:[/] {located}", highlight=False)


@app.command()
def encode(
    protocol: ProtocolOpt = "canal-json",
    option: OptionOpt = None,
    input: InOpt = None,
    output: OutOpt = None,
    errors: Annotated[str, typer.Option(help="on a bad event line: fail or skip")] = "fail",
    dead_letter: Annotated[Path | None, typer.Option(help="append rejected lines here")] = None,
    build_ts: Annotated[int | None, typer.Option(help="fixed build time (ms) for the volatile `ts` fields")] = None,
    topic: Annotated[str | None, typer.Option(help="topic expression, e.g. tidb_{schema}_{table} (avro)")] = None,
    debug: DebugOpt = False,
) -> None:
    """Event lines in, message lines out."""
    with _reported(debug):
        if errors not in ("fail", "skip"):
            raise ConfigError(f"--errors must be fail or skip, got {errors!r}")
        cfg = build_config(protocol, parse_option_pairs(option or []))
        encoder = make_encoder(cfg, clock_ms=(lambda: build_ts) if build_ts is not None else None, topic=topic)
        reader = EventReader()
        dead = _DeadLetter(dead_letter)
        n_events = n_msgs = 0
        try:
            with _open_in(input) as fin, _open_out(output) as fout, _progress(input, "encoding") as advance:
                for lineno, line in read_lines(fin):
                    advance(len(line) + 1)
                    try:
                        ev = reader.parse(line)
                    except DecodeError as e:
                        _bad_line(e, lineno, line, errors, dead)
                        continue
                    try:
                        msgs = encoder.encode(ev)
                    except ChangefeedError as e:
                        raise ChangefeedError(f"line {lineno}: {e}") from e
                    n_events += 1
                    for m in msgs:
                        fout.write(message_to_line(m) + b"\n")
                    n_msgs += len(msgs)
        finally:
            dead.close()
        skipped = f", {dead.count} rejected" if dead.count else ""
        err.print(f"encoded {n_events} events into {n_msgs} {protocol} messages{skipped}", highlight=False)


def _finish_decoder(decoder: ConsumerDecoder, errors: str, dead: _DeadLetter) -> None:
    """Messages a decoder still holds at the end (simple-protocol DML that never got its schema)."""
    try:
        decoder.finish()
    except DecodeError as e:
        if errors == "fail":
            raise
        for raw in decoder.take_pending():
            dead.put(0, message_to_line(Message(key=None, value=raw)), e)
        err.print(f"[yellow]skipped:[/] {e}", highlight=False)


@app.command()
def decode(
    protocol: ProtocolOpt = "canal-json",
    option: OptionOpt = None,
    input: InOpt = None,
    output: OutOpt = None,
    errors: Annotated[str, typer.Option(help="on a bad message: fail or skip")] = "fail",
    dead_letter: Annotated[Path | None, typer.Option(help="append rejected lines here")] = None,
    debug: DebugOpt = False,
) -> None:
    """Message lines in, event lines out."""
    with _reported(debug):
        if errors not in ("fail", "skip"):
            raise ConfigError(f"--errors must be fail or skip, got {errors!r}")
        cfg = build_config(protocol, parse_option_pairs(option or []))
        decoder = make_decoder(cfg)
        writer = EventWriter()
        dead = _DeadLetter(dead_letter)
        kinds: Counter[str] = Counter()
        n_msgs = 0
        try:
            with _open_in(input) as fin, _open_out(output) as fout, _progress(input, "decoding") as advance:
                for lineno, line in read_lines(fin):
                    advance(len(line) + 1)
                    try:
                        m = message_from_line(line)
                        events = decoder.decode(m.value, m.key)
                    except DecodeError as e:
                        _bad_line(e, lineno, line, errors, dead)
                        continue
                    n_msgs += 1
                    for ev in events:
                        kinds[ev.kind.value] += 1
                        fout.write(writer.line(ev) + b"\n")
                _finish_decoder(decoder, errors, dead)
        finally:
            dead.close()
        detail = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
        skipped = f"; {dead.count} rejected" if dead.count else ""
        err.print(f"decoded {n_msgs} {protocol} messages into {sum(kinds.values())} events ({detail}){skipped}",
                  highlight=False)


@app.command()
def roundtrip(
    protocol: ProtocolOpt = "canal-json",
    option: OptionOpt = None,
    input: Annotated[Path | None, typer.Option("--input", "-i", help="event lines (default: bundled example)")]
    = None,
    out: Annotated[Path, typer.Option(help="folder for the messages and decoded events")] = Path("out"),
    debug: DebugOpt = False,
) -> None:
    """Events -> protocol messages (a local file) -> events again, and check they are equal."""
    with _reported(debug):
        from .roundtrip import roundtrip_file

        cfg = build_config(protocol, parse_option_pairs(option or []))
        src = input or Path(str(resources.files("changefeed") / "examples" / "events.jsonl"))
        rt = roundtrip_file(cfg, src, out, name=protocol, option="--out")
        _print_roundtrip(rt, f"changefeed roundtrip: {src.name} through {protocol}")
        if not rt.report.ok:
            raise typer.Exit(1)


def _print_roundtrip(rt: RoundtripRun, title: str) -> None:
    report = rt.report
    table = Table(title=title, show_header=True)
    table.add_column("stage")
    table.add_column("count", justify="right")
    table.add_column("detail")
    kinds = Counter(ev.kind.value for ev in rt.originals)
    table.add_row("events read", str(len(rt.originals)), ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    table.add_row("messages written", str(rt.messages),
                  f"{rt.message_bytes} bytes in {rt.messages_path} ({rt.encode_ms:.1f} ms)")
    table.add_row("events decoded", str(len(rt.decoded)), f"{rt.events_path} ({rt.decode_ms:.1f} ms)")
    table.add_row("round trip", "ok" if report.ok else "MISMATCH", report.summary)
    Console().print(table)
    for line in report.problems[:20]:
        err.print(f"  {line}", highlight=False)


@app.command()
def schema(
    protocol: ProtocolOpt = "avro",
    option: OptionOpt = None,
    input: InOpt = None,
    debug: DebugOpt = False,
) -> None:
    """The key and value Avro schemas the encoder would register, one JSON object per table (no registry needed)."""
    with _reported(debug):
        opts = parse_option_pairs(option or [])
        cfg = build_config(protocol, opts)
        if cfg.protocol != "avro":
            raise ConfigError(f"schema prints Avro schemas: protocol {protocol} has none to register")
        from .avro.schema import key_schema, value_schema

        reader = EventReader()
        seen: set[tuple] = set()
        out = sys.stdout.buffer
        with _open_in(input) as fin:
            for lineno, line in read_lines(fin):
                try:
                    ev = reader.parse(line)
                except DecodeError as e:
                    raise e.located(f"line {lineno}") from None
                for t in (ev.table, ev.pre_table):
                    if t is None or not t.columns or t.signature() in seen:
                        continue
                    seen.add(t.signature())
                    out.write(orjson.dumps({"schema": t.schema, "table": t.table,
                                            "key": key_schema(t, cfg), "value": value_schema(t, cfg)}) + b"\n")


@app.command()
def produce(
    sink_uri: Annotated[str, typer.Option("--sink-uri", help="kafka://host:port/topic?... or file:///dir/topic?...")],
    config: Annotated[Path | None, typer.Option("--config", help="changefeed TOML (TiCDC's keys)")] = None,
    input: InOpt = None,
    watermark_interval_ms: Annotated[int, typer.Option(help="commit time between watermarks")] = 1000,
    ddl_to_all_partitions: Annotated[bool, typer.Option(
        help="canal-json: DDL to every partition (TiCDC's MQ sink) instead of partition 0 (the spec)")] = False,
    debug: DebugOpt = False,
) -> None:
    """Event lines through encoder, router and transport."""
    with _reported(debug):
        from .produce import open_producer

        producer, transport, sink = open_producer(sink_uri, config, ddl_to_all_partitions=ddl_to_all_partitions,
                                                  watermark_interval_ms=watermark_interval_ms)
        reader = EventReader()
        try:
            with _open_in(input) as fin, _progress(input, "producing") as advance:
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
    protocol: Annotated[str | None, typer.Option("--protocol", "-p", help="overrides the URI's protocol")] = None,
    option: OptionOpt = None,
    output: OutOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Every partition of a topic, decoded: event lines with topic, partition and offset added."""
    with _reported(debug):
        from .sinkconfig import parse_sink_uri
        from .transport.files import read_topic

        sink = parse_sink_uri(source)
        if sink.scheme != "file":
            from .transport.kafka import read_topic as read_kafka
        opts = dict(sink.codec_options)
        opts.update(parse_option_pairs(option or []))
        cfg = build_config(protocol or sink.protocol, opts)
        writer = EventWriter()
        decoders: dict[int, object] = {}
        n = 0
        with _open_out(output) as fout:
            records = read_topic(sink.folder, sink.topic) if sink.scheme == "file" else read_kafka(  # type: ignore
                sink, sink.topic)
            for rec in records:
                dec = decoders.get(rec.partition)
                if dec is None:
                    dec = decoders[rec.partition] = make_decoder(cfg)  # a consumer per partition
                try:
                    events = dec.decode(rec.value, rec.key)  # type: ignore[attr-defined]
                except DecodeError as e:
                    raise e.located(f"{rec.topic}/{rec.partition}@{rec.offset}") from None
                for ev in events:
                    obj = orjson.loads(writer.line(ev))
                    obj.update(topic=rec.topic, partition=rec.partition, offset=rec.offset)
                    fout.write(orjson.dumps(obj) + b"\n")
                    n += 1
        err.print(f"{n} events from {sink.topic} ({len(decoders)} partitions)", highlight=False)


def _spark(master: str | None) -> SparkSession:
    """The session a command runs on (the active one, else a new one), with Spark's log down to errors: a
    failure is reported in one line by `_reported`."""
    from .spark import spark_session

    spark = spark_session(master)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _codec_opts(uri: str, protocol: str | None, option: list[str] | None) -> tuple[str, dict[str, str]]:
    from .sinkconfig import codec_options

    return codec_options(uri, protocol, parse_option_pairs(option or []))


@app.command()
def consume(
    source: Annotated[str, typer.Option("--from", help="kafka://host:port/topic[,topic] or file:///dir/topic")],
    lake: Annotated[str, typer.Option("--lake", help="folder of the Delta tables (<lake>/<db>/<table>)")],
    protocol: Annotated[str | None, typer.Option("--protocol", "-p", help="overrides the URI's protocol")] = None,
    option: OptionOpt = None,
    checkpoint: Annotated[str | None, typer.Option(
        help=f"Spark checkpoint (default {LakeLayout('<lake>').checkpoint})")] = None,
    scd: Annotated[int, typer.Option(
        "--scd", help="1: a mirror of each table; 2: history (__START_AT/__END_AT)")] = 1,
    trigger: Annotated[str, typer.Option(help="available-now, or processing-time=<interval> to keep running")]
    = "available-now",
    max_records_per_trigger: Annotated[int | None, typer.Option(help="Kafka: records per micro-batch")] = None,
    on_ddl_error: Annotated[str, typer.Option(help="stop, or skip (record the DDL as a dead letter)")] = "stop",
    table_features: TableFeaturesOpt = "auto",
    changelog: Annotated[str, typer.Option(
        help="minimal: the bronze changelog keeps what a restart reads; full: every change, as it came")]
    = "minimal",
    watermarks: Annotated[bool | None, typer.Option("--watermarks/--no-watermarks",
                                                    help="apply at watermarks (default: when the protocol has them)")]
    = None,
    master: Annotated[str | None, typer.Option(help="Spark master (default local[2] or SPARK_MASTER)")] = None,
    debug: DebugOpt = False,
) -> None:
    """A change stream into Delta tables, in commit order, exactly once (Spark Structured Streaming)."""
    with _reported(debug):
        from .spark.apply import BatchReport
        from .spark.pipeline import apply_changes, read_changes
        from .tso import to_datetime

        proto, opts = _codec_opts(source, protocol, option)
        base = source.split("?", 1)[0]
        cp = checkpoint or LakeLayout(lake).checkpoint
        open_lake(lake)  # refused, in one line, when it holds the user's files
        if checkpoint:
            open_checkpoint(checkpoint)
        spark = _spark(master)
        started = time.monotonic()
        total = Counter()

        def report(r: BatchReport) -> None:
            total.update(rows=r.rows_in, errors=r.errors, ddl=r.ddl_applied)
            lag = time.time() - to_datetime(r.applied_ts).timestamp() if r.applied_ts else None
            err.print(batch_line(r, lag), highlight=False)

        changes = read_changes(spark, base, proto, opts, schema_store=schema_store(cp),
                               max_records_per_trigger=max_records_per_trigger)
        query = apply_changes(changes, lake, checkpoint=cp, stored_as_scd_type=scd, trigger=trigger,
                              watermarks=watermarks, on_ddl_error=on_ddl_error, on_batch=report,
                              table_features=table_features, changelog=changelog)
        query.awaitTermination()  # type: ignore[union-attr]
        secs = time.monotonic() - started
        err.print(f"consumed {total['rows']:,} changes into {lake} in {secs:.1f} s "
                  f"({total['rows'] / secs:,.0f} changes/s), {total['errors']} dead letters, {total['ddl']} DDL",
                  highlight=False)


@app.command()
def verify(
    lake: Annotated[str, typer.Option("--lake", help="the lake changefeed consume wrote")],
    against: Annotated[str, typer.Option("--against", help="event lines FILE, a stream URI to decode, or "
                                                          "mysql://user:pass@host:port/?tables=db.* (live tables)")],
    protocol: Annotated[str | None, typer.Option("--protocol", "-p", help="the stream's protocol")] = None,
    option: OptionOpt = None,
    master: Annotated[str | None, typer.Option(help="Spark master")] = None,
    debug: DebugOpt = False,
) -> None:
    """Compare the lake with the upstream state: counts, checksums, the first differing rows."""
    with _reported(debug):
        from .mysql.uri import is_mysql_uri
        from .spark.verify import expected_from
        from .spark.verify import verify as run_verify

        if is_mysql_uri(against):  # the live tables, read consistently now
            from .mysql.source import live_state
            from .mysql.uri import parse_mysql_uri

            expected, _ = live_state(parse_mysql_uri(against))
        elif "://" in against:
            proto, opts = _codec_opts(against, protocol, option)
            expected = expected_from(against.split("?", 1)[0], proto, opts)
        else:
            expected = expected_from(against)
        rep = run_verify(_spark(master), lake, expected)
        table = Table(title=f"{lake} against {_no_password(against)}")
        for col in ("table", "upstream rows", "lake rows", "missing", "extra", "checksum", "result"):
            table.add_column(col)
        for t in rep.tables:
            same = "same" if t.expected_checksum == t.actual_checksum else "differs"
            table.add_row(t.name, f"{t.expected:,}", "-" if t.actual is None else f"{t.actual:,}", str(t.missing),
                          str(t.extra), same, "ok" if t.ok else (t.problem or "DIFFERENT"))
        Console().print(table)
        for t in rep.tables:
            for line in t.samples:
                err.print(f"{t.name}: {line}", highlight=False)
        if not rep.ok:
            err.print("verification FAILED", highlight=False)
            raise typer.Exit(1)
        err.print(f"verification passed: {len(rep.tables)} tables equal upstream", highlight=False)


def _no_password(uri: str) -> str:
    import re

    return re.sub(r"^(\w+://[^:/@]*):[^@/]*@", r"\1@", uri)


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
    config: Annotated[Path | None, typer.Option("--config", help="changefeed TOML (TiCDC's keys)")] = None,
    debug: DebugOpt = False,
) -> None:
    """Capture a MySQL/MariaDB binlog into a TiCDC-format stream; resumes from its checkpoint (at-least-once)."""
    with _reported(debug):
        from .mysql.capture import capture as run_capture
        from .mysql.uri import parse_mysql_uri

        uri = parse_mysql_uri(source)
        if checkpoint is not None:
            uri.checkpoint = checkpoint
        if uri.checkpoint is None:
            uri.checkpoint = Path("changefeed-capture.checkpoint.json")
        started = uri.checkpoint.exists()
        err.print(f"capturing {uri.where} ({', '.join(uri.tables)}) into {_no_password(sink_uri)}, "
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
    debug: DebugOpt = False,
) -> None:
    """A synthetic TiDB-like change stream: every type family, multi-table transactions, DDL mid-stream."""
    with _reported(debug):
        from .job import expected_lines
        from .workload import Workload

        w = Workload(seed, transactions, live_rows=live_rows)
        writer = EventWriter()
        n = 0
        with open(output_file(output), "wb") as f, Progress(TextColumn("workload"), BarColumn(), TextColumn(
                "{task.completed:,} events"), TimeRemainingColumn(), console=err, transient=True) as bar:
            task = bar.add_task("workload", total=None)
            for ev in w:
                f.write(writer.line(ev) + b"\n")
                n += 1
                if n % 5000 == 0:
                    bar.update(task, completed=n)
        if expected is not None:
            with open(output_file(expected, "--expected"), "wb") as f:
                f.writelines(expected_lines(w.state))
        rows = sum(len(t.rows) for t in w.state.tables.values())
        err.print(f"wrote {n:,} events to {output}" + (f"; the final state ({len(w.state.tables)} tables, {rows:,} "
                  f"rows) to {expected}" if expected else ""), highlight=False)


@app.command()
def run(
    protocol: ProtocolOpt = "canal-json",
    option: OptionOpt = None,
    sink_uri: Annotated[str | None, typer.Option(
        "--sink-uri", help="kafka://host:port/topic?protocol=... (default: files under --work)")] = None,
    source: Annotated[str, typer.Option(help="workload, a file of event lines, or "
                                             "mysql://user:pass@host:port/?tables=db.* (a live server's binlog)")
                      ] = "workload",
    transactions: Annotated[int, typer.Option(help="workload transactions")] = 1000,
    seed: Annotated[int, typer.Option(help="workload seed")] = 1,
    work: Annotated[Path, typer.Option(help="folder for the stream, the lake and the report")] = Path(
        "changefeed-run"),
    scd: Annotated[int, typer.Option("--scd", help="1: mirror tables; 2: history")] = 1,
    config: Annotated[Path | None, typer.Option("--config", help="changefeed TOML (TiCDC's keys)")] = None,
    max_records_per_trigger: Annotated[int | None, typer.Option(help="Kafka: records per micro-batch")] = None,
    master: Annotated[str | None, typer.Option(help="Spark master (default local[2] or SPARK_MASTER)")] = None,
    rate: Annotated[int | None, typer.Option(help="events per second the source sends at most")] = None,
    table_features: TableFeaturesOpt = "auto",
    fresh: Annotated[bool, typer.Option("--fresh/--resume", help="start from an empty --work folder")] = True,
    debug: DebugOpt = False,
) -> None:
    """The main job: source -> encoder -> transport -> Spark -> Delta tables -> verify, with a closing report."""
    with _reported(debug):
        from .job import RunOptions
        from .job import run as run_job

        opts_ = parse_option_pairs(option or [])
        if protocol == "canal-json" and not option:
            opts_ = {"enable-tidb-extension": "true"}  # watermarks: transaction-consistent tables
        if protocol == "avro":  # without them avro sends neither DDL nor watermarks (truncates go unseen)
            opts_ = {"enable-tidb-extension": "true", "avro-enable-watermark": "true", **opts_}
        if sink_uri is not None and "protocol=" not in sink_uri:
            sep = "&" if "?" in sink_uri else "?"
            sink_uri += sep + "&".join([f"protocol={protocol}", *(f"{k}={v}" for k, v in opts_.items())])
        ro = RunOptions(protocol=protocol, options=opts_, sink_uri=sink_uri, work=work, source=source,
                        transactions=transactions, seed=seed, scd=scd, config=config,
                        max_records_per_trigger=max_records_per_trigger, rate=rate, table_features=table_features)
        folder = open_folder(work, "--work")  # one line, and nothing removed, if it holds the user's files
        if fresh:
            folder.clear("--work")  # only what an earlier run made there
        with Progress(TextColumn("{task.description:<8}"), BarColumn(), TextColumn("{task.fields[info]}"),
                      console=err, transient=False) as bar:
            hooks = _RunBars(bar)
            rep = run_job(_spark(master), ro, hooks)
        _print_run(rep)
        if rep.verification is None or not rep.verification.ok:
            raise typer.Exit(1)


class _RunBars:
    """Progress bars per stage for `run`."""

    def __init__(self, bar: Progress) -> None:
        self.bar = bar
        self.first: float | None = None
        self.produce = bar.add_task("produce", total=None, info="starting Spark")
        self.apply = bar.add_task("apply", total=None, info="")
        self.verify = bar.add_task("verify", total=1, info="", visible=False)

    def stage(self, name: str, total: int | None = None) -> None:
        if name == "verify":
            self.bar.update(self.produce, total=1, completed=1)
            self.bar.update(self.apply, total=1, completed=1)
            self.bar.update(self.verify, visible=True, info="comparing the lake with upstream")

    def produced(self, events: int) -> None:
        if self.first is None:
            self.first = time.monotonic()
        secs = max(time.monotonic() - self.first, 1e-9)
        self.bar.update(self.produce, info=f"{events:,} events ({events / secs:,.0f}/s)")

    def batch(self, rep: object, changes_total: int, lag: float | None = None) -> None:
        from .tso import to_datetime

        at = getattr(rep, "applied_ts", 0) or getattr(rep, "max_ts", 0)
        upto = to_datetime(at).strftime("%H:%M:%S.%f")[:-3] if at else "-"
        self.bar.update(self.apply, info=f"{changes_total:,} changes, batch {getattr(rep, 'batch_id', 0)}, "
                                         f"tables at commit time {upto}")
        if not err.is_terminal:  # redirected: the bars do not render, so one line a micro-batch
            err.print(batch_line(rep, lag), highlight=False)


def batch_line(r: object, lag: float | None) -> str:
    """One line per micro-batch, for `run` and `consume` when their output goes to a file: what came in,
    how many tables it touched, how far behind the source the lake is, how long the batch took."""
    from .tso import to_datetime

    at = getattr(r, "applied_ts", 0)
    upto = to_datetime(at).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if at else "-"
    lag_text = f", lag {lag:.1f} s" if lag is not None else ""
    return (f"batch {getattr(r, 'batch_id', 0)}: {getattr(r, 'rows_in', 0):,} changes in, "
            f"{len(getattr(r, 'tables', ()) or ())} tables, {getattr(r, 'errors', 0)} dead letters, "
            f"{getattr(r, 'ddl_applied', 0)} DDL, applied up to {upto}{lag_text} ({getattr(r, 'seconds', 0.0):.1f} s)")


def _print_run(rep: object) -> None:
    from .job import RunReport

    assert isinstance(rep, RunReport)
    o = rep.options
    t = Table(title=f"changefeed run: {_no_password(o.source)} -> {o.protocol} -> "
                    f"{'Kafka' if o.sink_uri and o.sink_uri.startswith('kafka') else 'files'} -> Spark -> Delta")
    for col in ("stage", "count", "per second", "detail"):
        t.add_column(col, justify="right" if col in ("count", "per second") else "left")
    rate = (lambda n, s: f"{n / s:,.0f}" if s > 0 else "-")  # noqa: E731
    t.add_row("produce", f"{rep.events:,}", rate(rep.events, rep.produce_seconds),
              f"events -> {rep.messages:,} messages in {rep.produce_seconds:.1f} s")
    t.add_row("consume", f"{rep.changes:,}", rate(rep.changes, rep.consume_seconds),
              f"changes in {rep.batches} micro-batches, {rep.ddl} DDL, {rep.dead_letters} dead letters "
              f"({rep.consume_seconds:.1f} s)")
    lags = sorted(rep.lags)
    if lags:
        p95 = lags[min(len(lags) - 1, (len(lags) * 95 + 99) // 100 - 1)]  # nearest rank
        t.add_row("lag", "", "", f"end to end: median {lags[len(lags) // 2]:.1f} s, p95 {p95:.1f} s, "
                                 f"max {lags[-1]:.1f} s")
    v = rep.verification
    if v is not None:
        for tc in v.tables:
            t.add_row(f"  {tc.name}", f"{tc.actual or 0:,}", "", "rows, equal upstream" if tc.ok else
                      f"rows, upstream {tc.expected:,}: {tc.problem or 'DIFFERENT'} ({tc.missing} missing, "
                      f"{tc.extra} extra)")
        t.add_row("verify", "passed" if v.ok else "FAILED", "", f"{len(v.tables)} tables against "
                  f"{rep.expected} ({rep.verify_seconds:.1f} s)")
    for line in rep.upgrades:
        t.add_row("  feature", "", "", line)
    t.add_row("total", f"{rep.seconds:.1f} s", "", f"chart: {rep.chart}")
    Console().print(t)
    if v is not None:
        for tc in v.tables:
            for line in tc.samples[:5]:
                err.print(f"{tc.name}: {line}", highlight=False)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
