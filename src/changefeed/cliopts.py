"""The typer options of the commands (and what `run` makes of its codec options), so cli.py reads as commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .config import PROTOCOLS, parse_option_pairs
from .spark.layout import LakeLayout

# shared by several commands
Protocol = Annotated[str, typer.Option("--protocol", "-p", help=f"one of {', '.join(PROTOCOLS)}")]
ProtocolOverride = Annotated[str | None, typer.Option("--protocol", "-p", help="overrides the URI's protocol")]
CodecOptions = Annotated[list[str] | None, typer.Option("--option", help="codec option K=V, sink-URI spelling")]
Input = Annotated[Path | None, typer.Option("--input", "-i", help="input file (default: stdin)")]
Output = Annotated[Path | None, typer.Option("--output", "-o", help="output file (default: stdout)")]
DeadLetterFile = Annotated[Path | None, typer.Option(help="append rejected lines here")]
Config = Annotated[Path | None, typer.Option("--config", help="changefeed TOML (TiCDC's keys)")]
TableFeatures = Annotated[str, typer.Option(
    help="auto: turn Delta's column mapping / type widening on when a DDL needs it; minimal: rewrite the table "
         "instead, so delta-rs, Polars and DuckDB keep reading it")]
Catalog = Annotated[str | None, typer.Option(
    help="a Spark catalog (spark_catalog: the session's, a Hive metastore with its settings) that names each table "
         "<db>.<table> (default: the TOML's \\[lake] catalog, else tables by path only)")]
DatabasePrefix = Annotated[str | None, typer.Option(help="put before each database name in --catalog and Iceberg")]
TableFormat = Annotated[str | None, typer.Option(
    help="delta (default), or delta+iceberg: each table also an Iceberg table over the same files (docs/catalog.md)")]
MaxRecords = Annotated[int | None, typer.Option(help="Kafka: records per micro-batch")]
Master = Annotated[str | None, typer.Option(help="Spark master (default local[2] or SPARK_MASTER)")]
SparkConf = Annotated[list[str] | None, typer.Option(
    "--conf", help="a Spark setting K=V, as spark-submit takes it (repeatable; over the TOML's \\[spark] and "
                   "spark-defaults.conf)")]
SparkConfig = Annotated[Path | None, typer.Option("--config", help="changefeed TOML: its \\[spark] table")]
Debug = Annotated[bool, typer.Option("--debug", help="show the full detail of errors")]
ConnectTimeout = Annotated[float, typer.Option(
    help="seconds to wait for a Kafka cluster to answer before giving up with the reason")]
WaitForTopic = Annotated[bool, typer.Option(
    "--wait-for-topic", help="wait for a topic the cluster does not have yet (default: refuse it)")]

# the commands that send a stream (produce, transcode, replay)
StreamSinkUri = Annotated[str, typer.Option("--sink-uri", help="kafka://host:port/topic?protocol=... or file:///...")]
WatermarkInterval = Annotated[int, typer.Option(help="commit time between watermarks")]
DdlToAllPartitions = Annotated[bool, typer.Option(
    help="canal-json: DDL to every partition (TiCDC's MQ sink) instead of partition 0 (the spec)")]

# consume
From = Annotated[str, typer.Option("--from", help="kafka://host:port/topic[,topic] or file:///dir/topic")]
Lake = Annotated[str, typer.Option("--lake", help="folder of the Delta tables (<lake>/<db>/<table>)")]
Checkpoint = Annotated[str | None, typer.Option(
    help=f"Spark checkpoint (default {LakeLayout('<lake>').checkpoint})")]
ConsumeScd = Annotated[int, typer.Option(
    "--scd", help="1: a mirror of each table; 2: history (__START_AT/__END_AT)")]
Trigger = Annotated[str, typer.Option(help="available-now, or processing-time=<interval> to keep running")]
OnDdlError = Annotated[str, typer.Option(help="stop, or skip (record the DDL as a dead letter)")]
Changelog = Annotated[str, typer.Option(
    help="minimal: the bronze changelog keeps what a restart reads; full: every change, as it came")]
VacuumRetention = Annotated[float | None, typer.Option(
    "--vacuum-retention", metavar="HOURS", min=0.0,
    help="VACUUM the consumer's tables as it runs: files its commits removed, once older than HOURS (default: never)")]
ChangelogRetention = Annotated[str | None, typer.Option(
    "--changelog-retention", metavar="DURATION",
    help="with --changelog full: remove applied changes older than this from the changelog (hours, or 36h, 7d; "
         "default: keep all)")]
ConsumeConfig = Annotated[Path | None, typer.Option(
    "--config", help="changefeed TOML (TiCDC's keys; its \\[consumer] table: these options, e.g. "
                     "vacuum-retention = 168)")]
WarmUp = Annotated[bool | None, typer.Option(
    "--warm-up/--no-warm-up", help="run a synthetic stream into a scratch lake before the stream, so Spark's first "
    "micro-batches are not its slowest (default: on a live stream, i.e. consume's processing-time trigger or run's "
    "--rate; CHANGEFEED_WARM_UP=0 turns the default off)")]
Watermarks = Annotated[bool | None, typer.Option("--watermarks/--no-watermarks",
                                                    help="apply at watermarks (default: when the protocol has them)")]

# run
RunSinkUri = Annotated[str | None, typer.Option(
    "--sink-uri", help="kafka://host:port/topic?protocol=... (default: files under --work)")]
RunSource = Annotated[str, typer.Option(help="workload, a file of event lines, or "
                                                "mysql://user:pass@host:port/?tables=db.* (a live server's binlog)")]
RunTransactions = Annotated[int, typer.Option(help="workload transactions")]
RunSeed = Annotated[int, typer.Option(help="workload seed")]
Work = Annotated[Path, typer.Option(help="folder for the stream, the lake and the report")]
RunLake = Annotated[str | None, typer.Option(
    "--lake", help="the lake elsewhere than <work>/lake: a folder, file:///..., or s3a://bucket/path")]
RunScd = Annotated[int, typer.Option("--scd", help="1: mirror tables; 2: history")]
Rate = Annotated[int | None, typer.Option(help="events per second the source sends at most")]
Fresh = Annotated[bool, typer.Option("--fresh/--resume", help="start from an empty --work folder")]


def run_codec_options(protocol: str, option: list[str] | None,
                      sink_uri: str | None) -> tuple[dict[str, str], str | None]:
    """`run`'s codec options, with the extensions that give it watermarks turned on unless asked otherwise, and
    its sink URI carrying them when it names no protocol itself."""
    opts_ = parse_option_pairs(option or [])
    if protocol == "canal-json" and not option:
        opts_ = {"enable-tidb-extension": "true"}  # watermarks: transaction-consistent tables
    if protocol == "avro":  # without them avro sends neither DDL nor watermarks (truncates go unseen)
        opts_ = {"enable-tidb-extension": "true", "avro-enable-watermark": "true", **opts_}
    if protocol == "debezium-avro":  # the same, and TiCDC's long mode refuses a BIGINT UNSIGNED above 2^63-1
        opts_ = {"enable-tidb-extension": "true", "avro-enable-watermark": "true",
                 "avro-bigint-unsigned-handling-mode": "string", **opts_}
    if sink_uri is not None and "protocol=" not in sink_uri:
        sep = "&" if "?" in sink_uri else "?"
        sink_uri += sep + "&".join([f"protocol={protocol}", *(f"{k}={v}" for k, v in opts_.items())])
    return opts_, sink_uri

# long-running consumers (consume, run): metrics.py
MetricsPort = Annotated[int | None, typer.Option(help="serve Prometheus /metrics and /healthz on this port")]
MetricsHost = Annotated[str, typer.Option(help="the address --metrics-port binds (0.0.0.0: every interface)")]
HealthTimeout = Annotated[float, typer.Option(help="/healthz answers 503 after this many seconds without a "
                                                   "completed micro-batch")]
