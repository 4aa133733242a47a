"""Compare a lake with the upstream state it should mirror, like sync-diff-inspector: counts, a checksum per
table, and the first differing rows.

The expected state comes from event lines (computed by upstream.py), or from a stream decoded in Python (merged
in commit order, DDL once), never from the lake or the Spark pipeline itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..eventline import EventReader, read_lines
from ..model import Event, Kind
from ..upstream import UpstreamState, final_state
from .apply import END_AT, START_AT, q
from .layout import LakeLayout, lake_path
from .types import table_schema, text_of, typed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass
class TableCheck:
    name: str
    expected: int
    actual: int | None  # None: the table is missing from the lake
    missing: int = 0  # expected rows the lake lacks (or holds with other values)
    extra: int = 0  # rows the lake holds that upstream does not
    expected_checksum: int = 0
    actual_checksum: int = 0
    samples: list[str] = field(default_factory=list)
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None and self.missing == 0 and self.extra == 0 and self.actual == self.expected


@dataclass
class VerifyReport:
    tables: list[TableCheck]

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.tables)


def events_from_lines(path: Path) -> Iterator[Event]:
    reader = EventReader()
    with open(path, "rb") as f:
        for _, line in read_lines(f):
            yield reader.parse(line)


def events_from_stream(uri: str, protocol: str | None = None, options: dict[str, str] | None = None) -> list[Event]:
    """A stream decoded in Python, partition by partition, merged in commit order with each DDL once."""
    from ..codecs import make_decoder
    from ..config import build_config
    from ..sinkconfig import parse_sink_uri
    from ..transport.files import read_topic

    sink = parse_sink_uri(uri if "protocol=" in uri or not protocol else
                          uri + ("&" if "?" in uri else "?") + f"protocol={protocol}")
    opts = dict(sink.codec_options)
    opts.update(options or {})
    cfg = build_config(protocol or sink.protocol, opts)
    if sink.scheme == "file":
        records: Iterable[Any] = read_topic(sink.folder, sink.topic)  # type: ignore[arg-type]
    else:
        from ..transport.kafka import read_topic as read_kafka

        records = read_kafka(sink, sink.topic)
    decoders: dict[int, Any] = {}
    out: list[tuple[int, int, int, int, Event]] = []
    seen_ddl: set[tuple[int, str]] = set()
    seen_rows: set[tuple] = set()
    for rec in records:
        dec = decoders.get(rec.partition)
        if dec is None:
            dec = decoders[rec.partition] = make_decoder(cfg)
        for i, ev in enumerate(dec.decode(rec.value, rec.key)):
            if ev.kind is Kind.DDL:
                k = (ev.commit_ts, ev.query or "")
                if k in seen_ddl:
                    continue
                seen_ddl.add(k)
            elif ev.kind in (Kind.INSERT, Kind.UPDATE, Kind.DELETE):
                ident = (ev.commit_ts, ev.kind, repr(ev.before), repr(ev.after))
                if ident in seen_rows:
                    continue  # an at-least-once redelivery
                seen_rows.add(ident)
            else:
                continue
            rank = 0 if ev.kind is Kind.DELETE else 1
            out.append((ev.commit_ts, rank, rec.partition, rec.offset * 1000 + i, ev))
    out.sort(key=lambda x: x[:4])
    return [x[4] for x in out]


def expected_frame(spark: SparkSession, st: Any, json_as_variant: bool = False) -> DataFrame:
    t = st.table
    names = [c.name for c in t.columns]
    conv = [text_of(c.type) for c in t.columns]
    import pyarrow as pa
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    rows = list(st.rows.values())
    # as Arrow: a local relation on the JVM (Python rows would be an RDD read back through a Python worker per
    # task, the slowest part of verifying many small tables)
    data = pa.table({f"c{i}": pa.array([f(r.get(n)) for r in rows], pa.string())
                     for i, (n, f) in enumerate(zip(names, conv, strict=True))}) if names else None
    cols = T.StructType([T.StructField(f"c{i}", T.StringType()) for i in range(len(names))])
    text = spark.createDataFrame(data, cols) if data is not None else spark.createDataFrame([[]] * len(rows), cols)
    schema = table_schema(t, json_as_variant=json_as_variant)
    return text.select(*[typed(F.col(f"c{i}"), c.type, json_as_variant=json_as_variant).cast(schema[i].dataType)
                         .alias(c.name) for i, c in enumerate(t.columns)])


def _read_table(store: Any, path: str) -> DataFrame:
    """A table of the lake: a plain local table (no column mapping, deletion vectors, partitions...) straight
    from the Parquet files its log lists (read on the driver by delta-rs); any other through Delta. Delta's
    reader rebuilds each table's snapshot with Spark jobs of its own (four or five a table, measured), which over
    a thousand tables cost more than the comparison itself."""
    import json
    from urllib.parse import unquote

    from pyspark.sql import types as T

    plain = _plain_files(store, path)
    if plain is None:
        return store.read(path)
    from pyspark.sql import functions as F

    schema = T.StructType.fromJson(json.loads(plain.schema_json))
    phys = plain.physical() or {}  # column mapping: the files name each column by its physical name
    stored = T.StructType([T.StructField(phys.get(f.name, f.name), f.dataType, f.nullable) for f in schema.fields])
    # the files are known: their statuses read on the driver, not by a listing job (Spark starts one for more
    # than 32 paths)
    with store.session_conf("spark.sql.sources.parallelPartitionDiscovery.threshold", "1000000"):
        df = store.spark.read.schema(stored).parquet(*[f"{path}/{unquote(rel)}" for rel in plain.files])
    return df.select(*[F.col(q(phys.get(f.name, f.name))).alias(f.name) for f in schema.fields]) if phys else df


def _hashes(df: DataFrame, i: int, side: str) -> DataFrame:
    """A table's rows as (its index, which side, the row's hash): every table's rows in one relation, so one
    aggregation (one shuffle) sums them all."""
    from pyspark.sql import functions as F

    h = F.xxhash64(*[F.col(q(c)) for c in df.columns]) if df.columns else F.lit(0).cast("long")
    return df.select(F.lit(i).alias("i"), F.lit(side).alias("side"), h.alias("h"))


def _union_all(frames: list[DataFrame]) -> DataFrame:
    """The frames as one, unioned as a balanced tree (a chain of a thousand unions is slow to analyse)."""
    while len(frames) > 1:
        frames = [frames[k].union(frames[k + 1]) if k + 1 < len(frames) else frames[k]
                  for k in range(0, len(frames), 2)]
    return frames[0]


def _summaries(frames: list[DataFrame], chunk: int) -> dict[tuple[int, str], tuple[int, int]]:
    """(index, side) -> (rows, checksum: the sum of the row hashes, so the same multiset of rows in any order
    gives the same sum) of every table, one aggregation per `chunk` frames. A table without rows has no
    entry."""
    from pyspark.sql import functions as F

    out: dict[tuple[int, str], tuple[int, int]] = {}
    for k in range(0, len(frames), chunk):
        agg = _union_all(frames[k:k + chunk]).groupBy("i", "side").agg(
            F.count(F.lit(1)).alias("n"), F.sum(F.col("h").cast("decimal(38,0)")).alias("h"))
        for r in agg.collect():
            out[(r["i"], r["side"])] = (int(r["n"]), int(r["h"] or 0) % (1 << 64))
    return out


def verify(spark: SparkSession, lake: str, expected: UpstreamState, *, samples: int = 5,
           chunk: int = 500) -> VerifyReport:
    """Every table's count and checksum on both sides in one pass (`verify_groups`: the expected rows of tables of
    one shape as one relation, the plain local tables of one schema as one scan; one aggregation per `chunk`
    frames), then the rows that differ only for the tables whose count, checksum or columns differ."""
    from ..spark.apply import ChangeApplier
    from . import verify_groups as vg

    lake = lake_path(lake)
    probe = ChangeApplier(spark, lake)
    checks: list[TableCheck] = []
    frames: list[DataFrame] = []
    compared: set[int] = set()  # tables whose lake rows were read in the expected columns
    expected_paths = set()
    states = sorted(expected.tables.items())
    shapes: dict[tuple, list[tuple[int, Any]]] = {}
    grouped: dict[tuple, list[tuple[int, str, Any]]] = {}
    for i, ((db, name), st) in enumerate(states):
        path = probe.path(db, name)
        expected_paths.add(path)
        checks.append(TableCheck(f"{db}.{name}", len(st.rows), None))
        sig = vg.signature(st.table)
        if sig:
            shapes.setdefault(sig, []).append((i, st))
        else:
            frames.append(_hashes(expected_frame(spark, st), i, "upstream"))
        if not probe.exists(path):
            checks[i].problem = f"no Delta table at {path}"
            continue
        plain = _plain_files(probe.store, path)
        if sig and plain is not None and vg.lake_columns(plain) == {n for n, _ in sig}:
            grouped.setdefault((plain.schema_json, repr(plain.physical()), sig), []).append((i, path, plain))
            continue
        one = _lake_frame(probe.store, path, table_schema(st.table))
        if one is None:
            lake_df = _read_table(probe.store, path)
            cols = sorted(c for c in lake_df.columns if c not in (START_AT, END_AT))
            checks[i].problem = f"columns differ: lake has {cols}, upstream {sorted(n for n, _ in sig)}"
            frames.append(_hashes(_current(lake_df).select(), i, "lake"))
            continue
        frames.append(_hashes(one, i, "lake"))
        compared.add(i)
    for group in shapes.values():
        frames.append(vg.hashed(vg.expected_rows(spark, group), "upstream"))
    for tables in grouped.values():
        want = table_schema(states[tables[0][0]][1].table)
        many = vg.lake_rows(spark, tables, want)
        if many is not None:
            frames.append(vg.hashed(many, "lake"))
            compared.update(i for i, _, _ in tables)
            continue
        for i, path, _ in tables:  # (two tables with a file of the same name: each read alone)
            frames.append(_hashes(cast("DataFrame", _lake_frame(probe.store, path, want)), i, "lake"))
            compared.add(i)
    # tables the lake holds that upstream does not (dropped upstream, or never there)
    extra_paths = sorted(set(_lake_tables(spark, lake)) - expected_paths)
    for j, path in enumerate(extra_paths, start=len(checks)):
        frames.append(_hashes(spark.read.format("delta").load(path).select(), j, "lake"))
    got = _summaries(frames, chunk) if frames else {}
    for i, check in enumerate(checks):
        check.expected_checksum = got.get((i, "upstream"), (0, 0))[1]
        if i in compared or check.problem is None or not check.problem.startswith("no Delta table"):
            check.actual, check.actual_checksum = got.get((i, "lake"), (0, 0))
        if i in compared and (check.actual != check.expected or check.actual_checksum != check.expected_checksum):
            st = states[i][1]  # only here: each side of this table alone, and the rows that differ
            exp = expected_frame(spark, st)
            lake_df = cast("DataFrame", _lake_frame(probe.store, probe.path(*states[i][0]), exp.schema))
            missing = exp.exceptAll(lake_df)
            extra = lake_df.exceptAll(exp)
            check.missing = missing.count()
            check.extra = extra.count()
            for label, df in (("upstream only", missing), ("lake only", extra)):
                for r in df.limit(samples).collect():
                    check.samples.append(f"{label}: {r.asDict()}")
    for j, path in enumerate(extra_paths, start=len(checks)):
        n = got.get((j, "lake"), (0, 0))[0]
        checks.append(TableCheck(path[len(lake) + 1:].replace("/", "."), 0, n, extra=n,
                                 problem="a table upstream does not have"))
    return VerifyReport(checks)


def _plain_files(store: Any, path: str) -> Any:
    """A plain local table's files (`TableFiles`: rewritable, read straight from Parquet), else None."""
    if store.logs.local(path) is None:
        return None
    try:
        tf = store.logs.files(path)
    except Exception:  # noqa: BLE001 - delta-rs cannot read it: Delta's reader says why, if anything
        return None
    return tf if tf.refused is None and tf.files else None


def _current(df: DataFrame) -> DataFrame:
    """An SCD2 table's open versions without its validity columns (any other table as it is)."""
    if END_AT in df.columns:
        return df.where(f"{q(END_AT)} IS NULL").drop(START_AT, END_AT)
    return df


def _lake_frame(store: Any, path: str, want: Any) -> DataFrame | None:
    """One table's current rows in the columns and types of `want` (None: its columns are not those)."""
    lake_df = _current(_read_table(store, path))
    if set(lake_df.columns) != set(want.fieldNames()):
        return None
    return lake_df.select(*[lake_df[q(f.name)].cast(f.dataType).alias(f.name) for f in want.fields])


def _lake_tables(spark: SparkSession, lake: str) -> list[str]:
    jvm = spark._jvm  # type: ignore[attr-defined]
    root = jvm.org.apache.hadoop.fs.Path(lake)
    fs = root.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    out = []
    if not fs.exists(root):
        return out
    layout = LakeLayout(lake)
    for db in fs.listStatus(root):
        name = db.getPath().getName()
        if not db.isDirectory() or name.startswith("_"):
            continue
        for t in fs.listStatus(db.getPath()):
            if t.isDirectory() and fs.exists(jvm.org.apache.hadoop.fs.Path(t.getPath(), "_delta_log")):
                out.append(layout.table(name, t.getPath().getName()))
    return out


def stream_at(against: str, upto: int | None, protocol: str | None = None,
              options: dict[str, str] | None = None) -> tuple[UpstreamState, int]:
    """The upstream state of a stream up to commit ts `upto` (the lake's applied watermark: what TiCDC's
    consumer would have applied), and how many of its changes (rows and DDL) lie past it."""
    events = events_from_stream(against, protocol, options)
    if not upto:
        return final_state(events), 0
    past = sum(1 for ev in events if ev.commit_ts > upto and ev.kind is not Kind.WATERMARK)
    return final_state(events, upto=upto), past


def expected_from(against: str, protocol: str | None = None, options: dict[str, str] | None = None) -> UpstreamState:
    """FILE: event lines; kafka://… or file:///…: a stream, decoded here."""
    if "://" in against:
        return final_state(events_from_stream(against, protocol, options))
    return final_state(events_from_lines(Path(against)))
