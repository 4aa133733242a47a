"""The API Spark and Delta users expect: `read_changes` gives a DataFrame of decoded changes,
`apply_changes` keeps Delta tables in step with them (the argument names of Spark's and Databricks'
`create_auto_cdc_flow`, so moving between the two is easy).
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..traits import StreamTraits, stream_traits
from .apply import ApplyOptions, BatchReport, ChangeApplier
from .avro_jvm import decode_avro
from .caching import cache_in_session
from .canal_jvm import decode_canal
from .cluster import preflight
from .decode import decode
from .layout import lake_path
from .objectstore import SchemaFolder, prepare_checkpoint, schema_folder
from .source import Source, parse_source, read_raw
from .table_features import check_mode

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery


@dataclass(frozen=True, eq=False)
class ChangeStream:
    """What `read_changes` knows of the DataFrame it returns and `apply_changes` needs: carried on the DataFrame
    (`_carry`, `_carried`), as Spark has no place for it."""

    traits: StreamTraits
    source: Source
    raw: DataFrame  # the raw records the changes are decoded from
    # with a JVM decoder: apply_changes decodes each micro-batch from its raw records itself, cached (the
    # decoder reads them in two passes: rows on the JVM, the rest in Python)
    jvm_decoder: Callable[[DataFrame], DataFrame] | None = None


def _carry(changes: DataFrame, stream: ChangeStream) -> DataFrame:
    changes._changefeed_stream = stream  # type: ignore[attr-defined]
    return changes


def _carried(changes: DataFrame) -> ChangeStream | None:
    stream = getattr(changes, "_changefeed_stream", None)
    return stream if isinstance(stream, ChangeStream) else None


def traits_of(changes: DataFrame) -> StreamTraits:
    """The traits of the stream a `read_changes` DataFrame decodes."""
    stream = _carried(changes)
    if stream is None:
        raise ValueError("these changes do not come straight from read_changes (a DataFrame made from them does not "
                         "keep what it knows of the stream): pass apply_changes(..., traits=stream_traits(protocol, "
                         "options)) from changefeed.traits")
    return stream.traits


def default_store(source: Source) -> str:
    h = hashlib.sha1(source.uri.encode()).hexdigest()[:16]
    return str(Path(tempfile.gettempdir()) / "changefeed-schemas" / h)


def read_changes(spark: SparkSession, source: str, protocol: str, options: dict[str, str] | None = None, *,
                 streaming: bool = True, schema_store: str | None = None,
                 max_records_per_trigger: int | None = None,
                 kafka_options: dict[str, str] | None = None, jvm_decode: bool = False,
                 kafka_settings: dict[str, str] | None = None) -> DataFrame:
    """Decoded changes of a stream (`kafka://host:port/topic` or `file:///folder/topic`), one row per change:
    source position, database, table, kind, commit_ts, schema version, before/after images (text maps),
    DDL, watermark; undecodable messages as kind='error' rows with their bytes and the reason.

    `jvm_decode=True` reads canal-json row and watermark messages with `from_json` on the JVM instead of
    the Python decoder in `mapInArrow`; measured on this project's VM it is the slower of the two (see
    bench/RESULTS.md), so it is not the default.
    Either way canal-json images keep the protocol's own value text (`types.typed(..., dialect="canal")`):
    values are not checked against their column types on the way in; one that does not fit its type
    (never in TiCDC's output) becomes NULL in the table, as Spark's PERMISSIVE JSON reading does.

    With protocol avro, `jvm_decode=True` reads framed row messages with `from_avro` and the registry's
    writer schemas (avro_jvm.py), same text as the Python decoder; also measured slower than the Python
    decoder here (see bench/RESULTS.md), so not the default. It collects each micro-batch's schema ids first,
    so a streaming DataFrame is still the Python decoder's: `apply_changes` runs the JVM decoder on each
    micro-batch from the raw records.

    `kafka_settings`: TiCDC's TLS/SASL options (`enable-tls`, `ca`, `sasl-user`, ...; sinkconfig.kafka_settings
    reads them from a URI and a changefeed TOML), mapped to Spark's Kafka source and the admin client."""
    src = parse_source(source, kafka_settings)  # TLS/SASL (security.py): the URI's, over kafka_settings
    traits = stream_traits(protocol, options)  # bad options fail here, not in a task
    raw = read_raw(spark, src, streaming=streaming, max_records_per_trigger=max_records_per_trigger,
                   kafka_options=kafka_options)
    store: str | SchemaFolder = schema_folder(spark, schema_store or default_store(src))  # S3: with its options
    dialect = traits.text_dialect
    jvm = jvm_decode and (dialect == "canal" or protocol == "avro")
    if jvm and dialect == "canal":
        def decoder(r: DataFrame) -> DataFrame:
            return decode_canal(r, options, store)  # rows and watermarks by from_json; DDL in Python
    elif jvm:
        def decoder(r: DataFrame) -> DataFrame:
            return decode_avro(r, options, store)  # framed rows by from_avro; the rest in Python
    else:
        def decoder(r: DataFrame) -> DataFrame:
            # canal dialect: rows read straight from the JSON (decode.py's raw fast path)
            return decode(r, protocol, options, store, dialect=dialect)
    if protocol == "avro" and jvm and raw.isStreaming:
        # the avro JVM decoder needs each micro-batch's schema ids first: apply_changes runs it per batch
        # (from `raw`); the streaming DataFrame itself is the Python decoder's (the same text)
        df = decode(raw, protocol, options, store)
    else:
        df = decoder(raw)
    return _carry(df, ChangeStream(traits, src, raw, decoder if jvm else None))


def apply_changes(changes: DataFrame, target: str, *, keys: list[str] | None = None,
                  sequence_by: str | list[str] = "commit_ts", stored_as_scd_type: int | str = 1,
                  apply_as_deletes: str | None = None, apply_as_truncates: str | None = None,
                  column_list: list[str] | None = None, except_column_list: list[str] | None = None,
                  track_history_column_list: list[str] | None = None, checkpoint: str | None = None,
                  trigger: str = "available-now", watermarks: bool | None = None, on_ddl_error: str = "stop",
                  table_features: str = "auto", table_writers: int = 4, changelog: str = "minimal",
                  partitions: dict[str, int] | Callable[[], dict[str, int]] | None = None, app_id: str = "changefeed",
                  on_batch: Callable[[BatchReport], None] | None = None,
                  traits: StreamTraits | None = None, vacuum_retention_hours: float | None = None,
                  compact: bool = True, catalog: str | None = None, database_prefix: str = "",
                  table_format: str = "delta", changelog_retention_hours: float | None = None,
                  batch_guard: Callable[[Callable[[DataFrame, int], BatchReport]],
                                        Callable[[DataFrame, int], BatchReport]] | None = None,
                  ) -> StreamingQuery | BatchReport:
    """Keep the Delta tables under `target` (a lake folder: `<target>/<database>/<table>`, layout.py) in step with
    `changes`. A streaming DataFrame starts a query (returned; `checkpoint` is required); a batch one is
    applied at once (returns its report). `table_features`: "auto" turns on Delta's column mapping or type
    widening when a DDL first needs it; "minimal" rewrites the table instead (table_features.py).
    `table_writers`: how many tables of one window are written at once (1: one after another).
    `changelog` (`<target>/_changefeed/changelog`): "minimal" keeps what a restart reads back (DDL, BOOTSTRAP,
    watermarks, each table shape, and the rows a micro-batch left for a later window); "full" every decoded change
    as it came, an audit log beside the tables. What a restart no longer needs is deleted from it as the consumer
    runs (the full one's only with `changelog_retention_hours`, once older than that: `apply.retention`).
    `traits` (`changefeed.traits.stream_traits(protocol, options)`): what the stream is like; by default those
    `read_changes` gave `changes` (a DataFrame made from them needs them given).
    `vacuum_retention_hours`: VACUUM the consumer's tables after micro-batches, with that retention (None: never);
    `compact`: compact small files (Delta's auto compaction, the changelog's): see `apply.maintenance`.
    `catalog`: a Spark catalog naming each table `<database_prefix><db>.<table>`; `table_format` "delta+iceberg":
    each table also an Iceberg table over the same files, which implies table_features="minimal" (`apply.names`).
    `batch_guard`: wraps the streaming query's micro-batch function (`stopping.GracefulStop.guard`: a stop on
    a signal lets the batch in hand complete)."""
    stream = _carried(changes)
    target = lake_path(target)  # one spelling of a local lake (file:///x is /x): Delta compares table paths
    checkpoint = lake_path(checkpoint) if checkpoint else None
    if traits is None:
        traits = traits_of(changes)
    preflight(changes.sparkSession, [target, *([checkpoint] if checkpoint else [])])  # a cluster reaches both
    if watermarks is None:
        watermarks = traits.watermarks
    if partitions is None and stream is not None:
        partitions = stream.source.partitions
    if changelog not in ("minimal", "full"):
        raise ValueError(f"changelog is minimal or full, not {changelog!r}")
    if table_format == "delta+iceberg":
        table_features = "minimal"  # Iceberg readers read neither column mapping nor type widening
    opts = ApplyOptions(keys=keys, sequence_by=[sequence_by] if isinstance(sequence_by, str) else list(sequence_by),
                        scd_type=int(stored_as_scd_type), apply_as_deletes=apply_as_deletes,
                        apply_as_truncates=apply_as_truncates, column_list=column_list,
                        except_column_list=except_column_list, track_history_column_list=track_history_column_list,
                        watermarks=watermarks, on_ddl_error=on_ddl_error,
                        table_features=check_mode(table_features), table_writers=max(1, table_writers),
                        ddl_definitions=traits.ddl_definitions, untimed_deletes=traits.untimed_deletes,
                        ddl_barrier=not watermarks and traits.ddl_broadcast,
                        text_dialect=traits.text_dialect, positions=traits.binlog_positions, changelog=changelog,
                        vacuum_retention_hours=vacuum_retention_hours, compact=compact, catalog=catalog,
                        database_prefix=database_prefix, table_format=table_format,
                        changelog_retention_hours=changelog_retention_hours)
    applier = ChangeApplier(changes.sparkSession, target, app_id=app_id, options=opts, partitions=partitions,
                            on_batch=on_batch)
    if not changes.isStreaming:
        return applier.process(changes, applier.next_batch_id())
    if not checkpoint:
        raise ValueError("a streaming apply_changes needs checkpoint= (where Spark keeps the source offsets)")
    prepare_checkpoint(changes.sparkSession, checkpoint)  # on S3: its folder, a checkpoint manager that can
    if stream is not None and stream.jvm_decoder is not None:  # it reads each micro-batch twice: cache its records
        decoder = stream.jvm_decoder

        def from_raw(batch: DataFrame, batch_id: int) -> BatchReport:
            cache_in_session(batch.sparkSession)  # no session clone per cache (caching.py)
            batch = batch.persist()
            try:
                return applier.process(decoder(batch), batch_id)
            finally:
                batch.unpersist()

        w = stream.raw.writeStream.foreachBatch(batch_guard(from_raw) if batch_guard else from_raw)
    else:
        w = changes.writeStream.foreachBatch(batch_guard(applier.process) if batch_guard else applier.process)
    w = w.option("checkpointLocation", checkpoint)
    if trigger == "available-now":
        w = w.trigger(availableNow=True)
    elif trigger.startswith("processing-time="):
        w = w.trigger(processingTime=trigger.split("=", 1)[1])
    elif trigger == "once":
        w = w.trigger(once=True)
    else:
        raise ValueError(f"trigger {trigger!r}: available-now, once or processing-time=<interval>")
    return w.start()


# Spark's Python data sources (the file:// stream) start their reader in a fresh Python process when a query
# starts, and wait 10 s for it to connect back (PythonWorkerFactory.createSimpleWorker: a constant, no setting).
# On a loaded machine a Python start takes longer, and the query fails before its first micro-batch; started
# again from its checkpoint it loses and repeats nothing (bench/soak.py failed so at load 16-30 on 2 cores).
WORKER_LATE = "Python worker failed to connect back"
WORKER_RESTARTS = 5  # query starts after such a failure, at most


def worker_was_late(exc: object) -> bool:
    """Whether a query failed because Spark's Python reader process did not connect back in time."""
    return exc is not None and WORKER_LATE in str(exc)
