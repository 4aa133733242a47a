"""Applying decoded changes to Delta tables: in commit order, transaction-consistent, exactly once.

Every micro-batch first lands in the bronze changelog (append-only, one Delta commit per batch, idempotent
through Delta's txnAppId/txnVersion). Rows are then applied from the changelog only up to the global
watermark (the smallest of the partitions' watermarks), in commit order, table by table, split at each DDL's
commit ts so that a DDL is applied (once) between the rows before and after it. Each table's commit carries
`txnVersion` = the commit ts it is complete up to: a replay after a crash finds the table's own version in its
Delta log and skips what it already holds, and rows at or below the applied watermark (an at-least-once
redelivery) never enter a window again. Streams without watermarks (Avro, real Debezium) are applied batch by
batch, each key in its commit (or binlog) order.
"""

from __future__ import annotations

import bisect
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from ..errors import ApplyError
from ..eventline import table_from_json
from ..model import Column as ModelColumn
from ..model import Index, TableInfo
from . import table_features as features
from .layout import LakeLayout
from .types import table_schema, text_of, typed

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

ROW_KINDS_SQL = "('insert', 'update', 'delete')"
DEAD_LETTER_SCHEMA = "topic string, partition int, offset long, key binary, value binary, reason string, _batch long"
START_AT, END_AT = "__START_AT", "__END_AT"
_POSITION = ("__pos_file", "__pos_pos", "__pos_row")  # a change's binlog position, as _order carries it
_PLACE = ("topic", "partition", "offset", "idx")  # where a change sits in its stream
CHANGELOG_STATS = "_batch,commit_ts,topic,partition,offset"


_COLUMN_RENAMING = ("ActionRenameColumn", "ActionModifyColumn", "ActionMultiSchemaChange")
# DDL that change a table's columns: without the definition after them the lake cannot follow
_COLUMN_CHANGING = (*_COLUMN_RENAMING, "ActionAddColumn", "ActionAddColumns", "ActionDropColumn",
                    "ActionDropColumns", "ActionSetDefaultValue", "ActionCreateTable")


_RENAME = re.compile(r"^\s*(?:RENAME\s+TABLE|ALTER\s+TABLE)\s+((?:`(?:[^`]|``)+`|[\w$]+)(?:\s*\.\s*(?:`(?:[^`]|``)+`|"
                     r"[\w$]+))?)", re.I)


def _renamed_from(query: str) -> tuple[str | None, str] | None:
    """(schema or None, table) a RENAME TABLE / ALTER TABLE ... RENAME statement starts from."""
    m = _RENAME.match(query or "")
    if not m:
        return None
    parts = [p.strip().strip("`").replace("``", "`") for p in re.split(r"\.(?=(?:[^`]*`[^`]*`)*[^`]*$)", m.group(1))]
    return (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])


def _table_of(table_def: str) -> TableInfo:
    """A table definition as a change row carries it: an event-line table, or the shape canal-json's JVM
    decoder writes (its `mysqlType` map in column order and `pkNames`)."""
    obj = orjson.loads(table_def)
    if "mysqlType" not in obj:
        return table_from_json(obj)
    pk = obj.get("pkNames") or []
    cols = [ModelColumn(n, _shape_type(mt), primary_key=n in pk) for n, mt in obj["mysqlType"].items()]
    return TableInfo(obj["schema"], obj["table"], columns=cols,
                     indexes=[Index("PRIMARY", list(pk), primary=True, unique=True)] if pk else [])


def _shape_type(mysql_type: str) -> str:
    """A column type as canal-json's short `mysqlType` gives it, widened where the short form would lose values:
    a bare `decimal` (TiCDC writes it for every DECIMAL(p,s)) is not MySQL's DECIMAL(10,0), so it is kept as its
    exact text (a DECIMAL(65,30) lands as a string); a bare `bit` may be BIT(64)."""
    base = mysql_type.strip().lower()
    if base in ("decimal", "decimal unsigned", "numeric"):
        return "decimal(65,30)" + (" unsigned" if base.endswith("unsigned") else "")
    if base == "bit":
        return "bit(64)"
    return mysql_type


def read_progress(spark: SparkSession, lake: str, *, last: bool = False) -> list[dict[str, Any]]:
    """The consumer's progress records (one per micro-batch: applied watermark, per-partition watermarks,
    rows, errors, seconds per step), oldest first; `last=True`: only the latest."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    folder = jvm.org.apache.hadoop.fs.Path(LakeLayout(lake).progress)
    fs = folder.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    if not fs.exists(folder):
        return []
    names = sorted(st.getPath().getName() for st in fs.listStatus(folder))
    names = [n for n in names if n.startswith("batch-") and n.endswith(".json")]
    out = []
    for n in names[-1:] if last else names:
        stream = fs.open(jvm.org.apache.hadoop.fs.Path(folder, n))
        try:
            out.append(orjson.loads(bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream))))
        finally:
            stream.close()
    return out


def _richness(d: Ddl) -> tuple[bool, bool]:
    return bool(d.after is not None and d.after.columns), bool(d.before is not None and d.before.columns)


def q(name: str) -> str:
    """A quoted SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def _lit(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass
class Ddl:
    commit_ts: int
    query: str
    ddl_type: str
    database: str | None
    table: str | None
    after: TableInfo | None
    before: TableInfo | None


@dataclass
class BatchReport:
    batch_id: int
    rows_in: int = 0
    rows_applied: int = 0
    errors: int = 0
    ddl_applied: int = 0
    watermark: int = 0
    applied_ts: int = 0
    max_ts: int = 0  # the latest commit ts among the batch's changes
    tables: set[str] = field(default_factory=set)
    seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)  # seconds per step, for reports and benchmarks
    upgrades: list[features.Upgrade] = field(default_factory=list)  # Delta features a DDL turned on


class _Laps:
    """Adds the time since the previous lap to a report's phase."""

    def __init__(self, rep: BatchReport) -> None:
        self.rep = rep
        self.t = time.monotonic()

    def __call__(self, phase: str) -> None:
        now = time.monotonic()
        self.rep.phases[phase] = self.rep.phases.get(phase, 0.0) + now - self.t
        self.t = now


@dataclass
class ApplyOptions:
    keys: list[str] | None = None
    sequence_by: list[str] = field(default_factory=lambda: ["commit_ts"])
    scd_type: int = 1
    apply_as_deletes: str | None = None
    apply_as_truncates: str | None = None
    column_list: list[str] | None = None
    except_column_list: list[str] | None = None
    track_history_column_list: list[str] | None = None
    watermarks: bool = True
    on_ddl_error: str = "stop"  # stop | skip
    json_as_variant: bool = False
    ddl_definitions: bool = True  # the protocol's DDL carry table definitions (the avro protocol's do not)
    text_dialect: str = "text"  # how images hold values: "text" (types.text_of) or "canal" (canal-json's own)
    untimed_deletes: bool = False  # deletes may carry no commit ts (the avro protocol's tombstones)
    # without watermarks: the stream sends each DDL to every partition of its topic, after the rows before it
    # (TiCDC's MQ sink); a DDL then waits for every partition's copy, and rows after it wait for the DDL
    ddl_barrier: bool = False
    positions: bool = True  # changes may carry a binlog position that orders them within a commit ts (debezium)
    table_features: str = features.AUTO  # auto: turn a Delta feature on when a DDL needs it; minimal: rewrite
    # tables of one window written at once (each its own Spark jobs and Delta commit, from its own thread):
    # a window of many tables costs about its largest tables, not the sum of every table's fixed cost
    table_writers: int = 4


class ChangeApplier:
    """The driver side of a consumer: owns the lake's layout and the consumer's progress."""

    def __init__(self, spark: SparkSession, lake: str, *, app_id: str = "changefeed",
                 options: ApplyOptions | None = None,
                 partitions: dict[str, int] | Callable[[], dict[str, int]] | None = None,
                 on_batch: Callable[[BatchReport], None] | None = None) -> None:
        self._main_spark = spark
        self._local = threading.local()  # a writer thread's own session (its txnAppId/txnVersion confs)
        self._pool: ThreadPoolExecutor | None = None
        self.lake = lake.rstrip("/")
        self.app_id = app_id
        self.o = options or ApplyOptions()
        if self.o.scd_type not in (1, 2):
            raise ApplyError(f"stored_as_scd_type must be 1 or 2, not {self.o.scd_type}")
        if self.o.on_ddl_error not in ("stop", "skip"):
            raise ApplyError(f"on_ddl_error is stop or skip, not {self.o.on_ddl_error!r}")
        if self.o.track_history_column_list is not None and self.o.scd_type != 2:
            raise ApplyError("track_history_column_list applies to stored_as_scd_type=2")
        self._partitions = partitions
        self.on_batch = on_batch
        self._upgrades: list[features.Upgrade] = []  # Delta features turned on during this micro-batch
        self.layout = LakeLayout(self.lake)
        self.bronze = self.layout.changelog
        self.dead = self.layout.dead_letters
        self.progress = self.layout.progress
        self._loaded = False
        self.applied_ts = 0
        self.watermarks: dict[str, int] = {}
        self.defs: dict[tuple[str, str], TableInfo] = {}
        self.pending: dict[tuple[int, str], Ddl] = {}
        self._versions: dict[str, int] = {}
        self._defs_ts = 0  # the commit ts of the latest DDL the definitions include
        self._known: dict[tuple[str, str], dict[str, ModelColumn]] = {}  # every column a table's name has had
        # a stream with neither DDL definitions nor watermarks (avro without TiCDC's extension sends no DDL):
        # tables follow the columns their rows carry (new ones added; dropped ones kept, NULL from then on)
        self._drifts = not self.o.ddl_definitions and not self.o.watermarks
        self._drift: dict[tuple[str, str], TableInfo] = {}
        # per partition: the least commit ts its next change can have (for deletes that carry none)
        self.floors: dict[str, int] = {}
        self._ddl_ts = 0  # the commit ts of the latest DDL applied
        # micro-batches still cached because they hold rows past the applied watermark: (changes, rows)
        self._held: dict[int, tuple[DataFrame, DataFrame]] = {}
        # batches whose rows are not all applied yet: their latest commit ts
        self._pending_rows: dict[int, int] = {}
        # without watermarks (ddl_barrier): per partition, the latest DDL it delivered a copy of; per pending
        # DDL, the topics its copies came on; batches holding rows past a DDL still waiting: rows above this ts
        self._ddl_seen: dict[str, int] = {}
        self._copies: dict[tuple[int, str], set[str]] = {}
        self._key_held: dict[int, tuple[int, int]] = {}  # batch -> (rows applied up to, its latest commit ts)
        # per cached batch with rows to apply: each table's least and latest commit ts and its number of changes
        self._spans: dict[int, dict[tuple[str, str], tuple[int, int, int]]] = {}
        # without watermarks: per partition and table, the latest commit ts applied; an older row there is a
        # redelivery (TiCDC's own consumer drops it the same way for debezium)
        self._key_floors: dict[str, int] = {}

    @property
    def spark(self) -> SparkSession:
        """The session of the calling thread: the consumer's, or a writer thread's clone of it. Delta reads a
        commit's txnAppId/txnVersion from session confs, so tables written at once each need their own."""
        return getattr(self._local, "spark", None) or self._main_spark

    def _apply_tables(self, work: list[tuple[str, str, DataFrame, int]]) -> list[tuple[str, str]]:
        """Each (database, table, rows, version) written as `_apply_rows` writes it, up to `table_writers` at
        once; the tables that took rows. Every write stays its own idempotent Delta commit, so a failure
        part-way leaves each table whole, at its old or its new version."""
        if len(work) <= 1 or self.o.table_writers <= 1:
            return [(db, tbl) for db, tbl, rows, v in work if self._apply_rows(db, tbl, rows, v)]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.o.table_writers, thread_name_prefix="changefeed-writer")

        def one(item: tuple[str, str, DataFrame, int]) -> bool:
            if getattr(self._local, "spark", None) is None:
                from pyspark.sql import SparkSession

                main = self._main_spark
                self._local.spark = SparkSession(main.sparkContext, main._jsparkSession.cloneSession())  # type: ignore[attr-defined]
            db, tbl, rows, v = item
            return self._apply_rows(db, tbl, rows, v)

        done = list(self._pool.map(one, work))
        return [(db, tbl) for (db, tbl, _, _), ok in zip(work, done, strict=True) if ok]

    # --- paths and Delta helpers ----------------------------------------------------------------
    def path(self, database: str, table: str) -> str:
        return self.layout.table(database, table)

    def _jvm_log(self, path: str) -> Any:
        jvm = self.spark._jvm  # type: ignore[attr-defined]
        return jvm.org.apache.spark.sql.delta.DeltaLog.forTable(self.spark._jsparkSession, path)  # type: ignore[attr-defined]

    def exists(self, path: str) -> bool:
        jvm = self.spark._jvm  # type: ignore[attr-defined]
        return bool(jvm.io.delta.tables.DeltaTable.isDeltaTable(self.spark._jsparkSession, path))  # type: ignore[attr-defined]

    def txn_version(self, path: str) -> int:
        """The commit ts a table is complete up to for this consumer (-1: none, or no table).

        Read from the table's Delta log once (its txnVersion for our app id, or the DDL version property),
        then kept here as this consumer commits."""
        v = self._versions.get(path)
        if v is None:
            v = self._versions[path] = self._read_version(path)
        return v

    def _read_version(self, path: str) -> int:
        if not self.exists(path):
            return -1
        jvm = self.spark._jvm  # type: ignore[attr-defined]
        none = jvm.scala.Option.empty()
        snap = self._jvm_log(path).update(False, none, none)
        v = snap.transactions().get(self.app_id)
        txn = int(v.get()) if v.isDefined() else -1
        prop = snap.metadata().configuration().get(self._ddl_property)
        return max(txn, int(prop.get()) if prop.isDefined() else -1)

    @property
    def _ddl_property(self) -> str:
        return f"changefeed.{self.app_id}.ddlVersion"

    def _with_txn(self, version: int, fn: Callable[[], Any], path: str | None = None) -> Any:
        conf = self.spark.conf
        conf.set("spark.databricks.delta.write.txnAppId", self.app_id)
        conf.set("spark.databricks.delta.write.txnVersion", str(version))
        try:
            out = fn()
        finally:
            conf.unset("spark.databricks.delta.write.txnAppId")
            conf.unset("spark.databricks.delta.write.txnVersion")
        if path is not None:
            self._versions[path] = max(self._versions.get(path, -1), version)
        return out

    def _mark(self, path: str, version: int) -> None:
        """Record that a DDL is applied: a table property (a metadata-only commit, no Spark job)."""
        self.spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({_lit(self._ddl_property)} = '{version}')")
        self._versions[path] = max(self._versions.get(path, -1), version)

    def _drop(self, path: str) -> None:
        """DROP TABLE: remove the table's folder, only when it is a Delta table (what the pipeline made),
        never a folder of the user's that happens to sit at that path."""
        fs, p = self._fs(path)
        if fs.exists(p) and fs.exists(self._fs(f"{path}/_delta_log")[1]):
            fs.delete(p, True)
        self._versions.pop(path, None)

    def _tables_of(self, db: str) -> list[str]:
        fs, p = self._fs(self.layout.database(db))
        if not fs.exists(p):
            return []
        return [self.layout.table(db, st.getPath().getName()) for st in fs.listStatus(p) if st.isDirectory()
                and fs.exists(st.getPath().suffix("/_delta_log"))]  # Delta tables only, not the user's folders

    def _fs(self, path: str) -> tuple[Any, Any]:
        jvm = self.spark._jvm  # type: ignore[attr-defined]
        p = jvm.org.apache.hadoop.fs.Path(path)
        return p.getFileSystem(self.spark._jsc.hadoopConfiguration()), p  # type: ignore[attr-defined]

    # --- consumer state ---------------------------------------------------------------------------
    def _load(self) -> None:
        """Progress, watermarks, table definitions and pending DDL, from the lake itself."""
        if self._loaded:
            return
        self._loaded = True
        from pyspark.sql import functions as F

        if not self.exists(self.dead):  # there from the start, so readers find it empty rather than missing
            self._create_log(self.dead, self.spark.createDataFrame([], DEAD_LETTER_SCHEMA).schema,
                             "topic,partition,offset,_batch")
        last = self._last_progress()
        if last is not None:
            self.applied_ts = last["applied_ts"]
            self.watermarks = last["watermarks"]
            self.floors = last.get("floors") or {}
            self._ddl_ts = last.get("ddl_ts") or 0
            self._key_held = {int(b): (v[0], v[1]) for b, v in (last.get("held") or {}).items()}
            self._key_floors = last.get("key_floors") or {}
        if self.exists(self.bronze):
            bronze = self.spark.read.format("delta").load(self.bronze)
            self._learn(self._ctrl_rows(bronze))
            if self.o.watermarks:
                self._pending_rows = {r["_batch"]: r["ts"] for r in bronze.where(
                    f"kind IN {ROW_KINDS_SQL} AND commit_ts > {self.applied_ts}").groupBy("_batch").agg(
                    F.max("commit_ts").alias("ts")).collect()}

    def _ctrl_rows(self, rows: DataFrame) -> list[Any]:
        """What the driver learns from changes: DDL and BOOTSTRAP (and truncates the user marks) in order,
        and each table shape the row messages carried (once per shape, not once per row)."""
        from pyspark.sql import functions as F

        cond = "kind IN ('ddl', 'bootstrap')"
        if self.o.apply_as_truncates:
            cond += f" OR coalesce({self.o.apply_as_truncates}, false)"
        # the decoder writes a row's table definition only where it first meets a shape: few rows, one job
        shape = "kind IN ('insert', 'update', 'delete') AND table_def IS NOT NULL"
        got = rows.where(f"({cond}) OR ({shape})").select(*self._ctrl_columns(), F.expr(shape).alias("_shape")) \
            .collect()
        ctrl = sorted((r for r in got if not r["_shape"]),
                      key=lambda r: (r["commit_ts"], r["topic"], r["partition"], r["offset"], r["idx"]))
        first: dict[str, int] = {}
        for r in got:
            if r["_shape"] and (r["table_def"] not in first or r["commit_ts"] < first[r["table_def"]]):
                first[r["table_def"]] = r["commit_ts"]
        shapes = sorted(first.items(), key=lambda x: x[1])
        return [*({"kind": "insert", "table_def": d, "_truncate": False} for d, _ in shapes), *ctrl]

    def _ctrl_columns(self) -> list[Any]:
        from pyspark.sql import functions as F

        truncate = F.expr(self.o.apply_as_truncates) if self.o.apply_as_truncates else F.lit(False)
        return ["kind", "commit_ts", "topic", "partition", "offset", "idx", "database", "table", "ddl", "ddl_type",
                "table_def", "pre_table_def", F.coalesce(truncate, F.lit(False)).alias("_truncate")]

    def _learn(self, rows: list[Any]) -> None:
        for r in rows:
            if r["kind"] == "ddl" or r["_truncate"]:
                dtype = "ActionTruncateTable" if r["_truncate"] else r["ddl_type"] or ""
                d = Ddl(r["commit_ts"], r["ddl"] or f"TRUNCATE TABLE {r['database']}.{r['table']}", dtype,
                        r["database"], r["table"],
                        table_from_json(orjson.loads(r["table_def"])) if r["table_def"] else None,
                        table_from_json(orjson.loads(r["pre_table_def"])) if r["pre_table_def"] else None)
                copy = r["kind"] == "ddl" and r["topic"] is not None  # a broadcast copy, from its partition
                if copy:
                    k = f"{r['topic']}/{r['partition']}"
                    self._ddl_seen[k] = max(self._ddl_seen.get(k, 0), d.commit_ts)
                # applied already: below the applied watermark, or (without watermarks) at or below the latest
                # DDL taken (every partition has a copy of a DDL, in commit order: later copies are repeats)
                if d.commit_ts > (self.applied_ts if self.o.watermarks else self._ddl_ts):
                    if copy:
                        self._copies.setdefault((d.commit_ts, d.query), set()).add(r["topic"])
                    have = self.pending.get((d.commit_ts, d.query))
                    # the same DDL from several partitions: keep the copy that carries the most definition
                    if have is None or _richness(d) > _richness(have):
                        self.pending[(d.commit_ts, d.query)] = d
                elif d.commit_ts > self._defs_ts:
                    if not self.o.ddl_definitions and (d.after is None or not d.after.columns):
                        self._interpret(d)
                    self._learn_ddl(d)
                # else: a redelivered DDL, older than the definitions held: it must not roll them back
            elif r["table_def"] and r["kind"] in ("insert", "update", "delete", "bootstrap"):
                t = _table_of(r["table_def"])
                key = (t.schema, t.table)
                have = self.defs.get(key)
                # a newer schema version wins; at the same version BOOTSTRAP (all facts) wins over what a row
                # message implied; an older one (a redelivered message) never rolls the definition back
                if have is None or (t.version is not None and (
                        have.version is None or t.version > have.version
                        or (r["kind"] == "bootstrap" and t.version == have.version))):
                    self._set_def(key, t)
                elif t.version is None and self._drifts and not have.same_definition(t):
                    self._drift[key] = t

    def _set_def(self, key: tuple[str, str], t: TableInfo) -> None:
        self.defs[key] = t
        known = self._known.setdefault(key, {})
        for c in t.columns:
            known[c.name] = c

    def _learn_ddl(self, d: Ddl) -> None:
        self._defs_ts = max(self._defs_ts, d.commit_ts)
        renamed = d.before is not None and d.after is not None and d.after.table and (
            (d.before.schema, d.before.table) != (d.after.schema, d.after.table))
        if d.before is not None and d.before.table and (renamed or d.ddl_type in ("ActionDropTable", "ActionDropView")):
            self.defs.pop((d.before.schema, d.before.table), None)
        if d.ddl_type in ("ActionDropTable", "ActionDropView") and d.database and d.table:
            self.defs.pop((d.database, d.table), None)
        if d.after is not None and d.after.columns:
            self._set_def((d.after.schema, d.after.table), d.after)

    def next_batch_id(self) -> int:
        """For changes applied as a batch: one more than the last batch the lake recorded."""
        last = self._last_progress()
        return 0 if last is None else int(last["batch_id"]) + 1

    def _last_progress(self) -> dict[str, Any] | None:
        got = read_progress(self.spark, self.lake, last=True)
        return got[-1] if got else None

    def partitions(self) -> dict[str, int]:
        p = self._partitions
        if p is None:
            return {}
        return p() if callable(p) else dict(p)

    def global_watermark(self) -> int:
        expected = self.partitions()
        keys = [f"{t}/{i}" for t, n in expected.items() for i in range(n)]
        if not keys:
            keys = list(self.watermarks)  # no partition count given: the partitions seen so far
        if not keys or any(k not in self.watermarks for k in keys):
            return 0
        return min(self.watermarks[k] for k in keys)

    # --- one micro-batch --------------------------------------------------------------------------
    def process(self, changes: DataFrame, batch_id: int) -> BatchReport:
        from pyspark.sql import functions as F

        t0 = time.monotonic()
        self._load()
        rep = BatchReport(batch_id)
        lap = _Laps(rep)
        changes = changes.persist()
        try:
            # one job (it also fills the cache): counts, the latest commit ts, each partition's watermark, and
            # each table's span of commit ts (a window without DDL then needs no job to find its tables)
            agg = changes.groupBy("kind", "topic", "partition", "database", "table").agg(
                F.count("*").alias("n"), F.max("commit_ts").alias("ts"), F.min("commit_ts").alias("lo")).collect()
            lap("decode")
            spans: dict[tuple[str, str], tuple[int, int, int]] | None = {}
            for r in agg:
                if r["kind"] in ("insert", "update", "delete"):
                    if r["ts"] is None or r["lo"] is None:
                        spans = None  # a change without commit ts (a tombstone to date): the exact way
                        break
                    k = (r["database"], r["table"])
                    have = spans.get(k)
                    spans[k] = (r["lo"], r["ts"], r["n"]) if have is None else (
                        min(have[0], r["lo"]), max(have[1], r["ts"]), have[2] + r["n"])
            counts: Counter[str] = Counter()
            for r in agg:
                counts[r["kind"]] += r["n"]
            rep.max_ts = max((r["ts"] or 0 for r in agg if r["kind"] in ("insert", "update", "delete")), default=0)
            marks = [(f"{r['topic']}/{r['partition']}", r["ts"]) for r in agg if r["kind"] == "watermark"]
            rep.errors = counts.get("error", 0)
            rep.rows_in = sum(counts.get(k, 0) for k in ("insert", "update", "delete"))
            rows = changes.where("kind <> 'error'").withColumn("_batch", F.lit(batch_id).cast("long"))
            if self.o.untimed_deletes:
                rows = self._date_deletes(rows)
            # the changelog and dead letters are appended while the tables are merged (a Delta commit is mostly
            # driver time; nothing below reads this batch from them): both are in before the progress is saved
            appended: list[BaseException] = []
            writer = threading.Thread(target=self._append_batch, args=(changes, rows, batch_id, rep, appended),
                                      name=f"changelog-{batch_id}", daemon=True)
            writer.start()
            self._learn(self._ctrl_rows(rows))
            lap("control")
            for k, ts in marks:
                self.watermarks[k] = max(self.watermarks.get(k, 0), ts)
            if self.o.untimed_deletes:
                for r in agg:
                    if r["kind"] in ("insert", "update", "delete", "watermark") and r["ts"]:
                        k = f"{r['topic']}/{r['partition']}"
                        self.floors[k] = max(self.floors.get(k, 0), r["ts"] + (r["kind"] == "watermark"))
            row_kinds = f"kind IN {ROW_KINDS_SQL}"
            if self.o.watermarks:
                if rep.rows_in:
                    self._pending_rows[batch_id] = rep.max_ts
                if rep.rows_in and spans is not None and not self.o.untimed_deletes:
                    self._spans[batch_id] = spans
                hi = self.global_watermark()
                rep.watermark = hi
                if hi > self.applied_ts:
                    span = f"{row_kinds} AND commit_ts > {self.applied_ts} AND commit_ts <= {hi}"
                    # this batch's rows from the cache; earlier batches' only if they still hold rows past the
                    # applied watermark (each batch's files carry its _batch: Delta skips the others)
                    window = rows.where(span)
                    older = [b for b in self._pending_rows if b != batch_id]
                    for b in older:
                        if b in self._held:
                            window = window.unionByName(self._held[b][1].where(span))
                    unheld = [b for b in older if b not in self._held]
                    if unheld:  # after a restart: from the changelog
                        window = window.unionByName(self.spark.read.format("delta").load(self.bronze).where(
                            f"_batch >= {min(unheld)} AND _batch < {batch_id} AND {span}"))
                    self._apply_window(window, self.applied_ts, hi, rep, key_mode_batch=None, lap=lap,
                                       from_cache=not unheld, spans=self._window_spans([batch_id, *older]))
                    self.applied_ts = hi
                    self._pending_rows = {b: ts for b, ts in self._pending_rows.items() if ts > hi}
                    self._spans = {b: v for b, v in self._spans.items() if b in self._pending_rows}
                if batch_id in self._pending_rows:  # rows past the watermark: kept cached for a later window
                    self._held[batch_id] = (changes, rows)
                self._release_held(self._pending_rows)
            else:
                self._apply_keyed(changes, rows, batch_id, rep, lap)
            writer.join()
            if appended:
                raise appended[0]
            lap("changelog wait")
        finally:
            if batch_id not in self._held:
                changes.unpersist()
        rep.applied_ts = self.applied_ts
        rep.upgrades, self._upgrades = self._upgrades, []
        self._save_progress(batch_id, rep)
        lap("progress")
        rep.seconds = time.monotonic() - t0
        if self.on_batch is not None:
            self.on_batch(rep)
        return rep

    def _window_spans(self, batches: list[int]) -> list[dict[tuple[str, str], tuple[int, int, int]]] | None:
        """The table spans of every batch a window reads (None: one is not known, e.g. read back after a
        restart)."""
        got = [self._spans.get(b, None if b in self._pending_rows else {}) for b in batches]
        return None if any(g is None for g in got) else got  # type: ignore[return-value]

    def _apply_keyed(self, changes: DataFrame, rows: DataFrame, batch_id: int, rep: BatchReport,
                     lap: Callable[[str], None]) -> None:
        """Without watermarks: the batch's rows (those with no commit ts too: plain avro carries none) and the
        rows earlier batches hold, each key in its order, up to the first DDL still waiting for a partition."""
        row_kinds = f"kind IN {ROW_KINDS_SQL}"
        hi = self._barrier()
        window = rows.where(f"{row_kinds} AND coalesce(commit_ts, 0) <= {hi}")
        fresh = self._fresh()
        unheld = []
        for b, (lo, _) in self._key_held.items():
            if b == batch_id:
                continue  # a replayed batch: all of it is here
            if b in self._held:
                window = window.unionByName(self._held[b][1].where(
                    f"{row_kinds} AND commit_ts > {lo} AND commit_ts <= {hi}"))
            else:
                unheld.append(f"(_batch = {b} AND commit_ts > {lo})")
        if unheld:  # after a restart: from the changelog
            window = window.unionByName(self.spark.read.format("delta").load(self.bronze).where(
                f"{row_kinds} AND commit_ts <= {hi} AND ({' OR '.join(unheld)})"))
        if fresh is not None:
            window = window.where(fresh)
        self._apply_window(window, -1, hi, rep, key_mode_batch=batch_id, lap=lap, from_cache=not unheld)
        held = {b: (max(lo, hi), top) for b, (lo, top) in self._key_held.items() if b != batch_id and top > hi}
        if rep.max_ts > hi:
            held[batch_id] = (hi, rep.max_ts)
            self._held[batch_id] = (changes, rows)
        self._key_held = held
        self._release_held(held)

    def _release_held(self, keep: dict[int, Any]) -> None:
        """Uncache the micro-batches that no longer hold rows to apply (`process` uncaches the current one when it
        is not kept)."""
        for b in [b for b in self._held if b not in keep]:
            self._held.pop(b)[0].unpersist()

    def _fresh(self) -> Column | None:
        """Rows not older than what their partition already applied for their table (None: no such limit)."""
        if not self._key_floors:
            return None
        from pyspark.sql import functions as F

        m = F.create_map(*[x for k, v in self._key_floors.items() for x in (F.lit(k), F.lit(v).cast("long"))])
        floor = m[F.concat(F.col("topic"), F.lit("/"), F.col("partition").cast("string"), F.lit("/"),
                           F.col("database"), F.lit("."), F.col("table"))]
        ts = F.coalesce(F.col("commit_ts"), F.lit(0))
        # real Debezium's rows carry a binlog position and only a millisecond clock, which is not an order
        return (ts == 0) | F.col("position").isNotNull() | floor.isNull() | (ts >= floor)

    def _barrier(self) -> int:
        """Without watermarks, the commit ts rows may be applied up to: just below the first pending DDL that
        some partition of its topic has not delivered yet (its rows before the DDL may still come)."""
        top = (1 << 63) - 1
        if not self.o.ddl_barrier:
            return top
        counts = self.partitions()
        for d in sorted(self.pending.values(), key=lambda d: d.commit_ts):
            for topic in self._copies.get((d.commit_ts, d.query), ()):
                if any(self._ddl_seen.get(f"{topic}/{i}", 0) < d.commit_ts for i in range(counts.get(topic) or 0)):
                    return d.commit_ts - 1
        return top

    def _append_batch(self, changes: DataFrame, rows: DataFrame, batch_id: int, rep: BatchReport,
                      failed: list[BaseException]) -> None:
        from pyspark.sql import functions as F

        try:
            t0 = time.monotonic()
            if rep.errors:
                (changes.where("kind = 'error'")
                 .select("topic", "partition", "offset", "key", "value", F.col("error").alias("reason"),
                         F.lit(batch_id).cast("long").alias("_batch"))
                 .write.format("delta").mode("append").option("txnAppId", self.app_id)
                 .option("txnVersion", batch_id).save(self.dead))
            if not self.exists(self.bronze):
                self._create_log(self.bronze, rows.schema, CHANGELOG_STATS)
            rows.write.format("delta").mode("append").option("txnAppId", self.app_id).option(
                "txnVersion", batch_id).save(self.bronze)
            rep.phases["changelog (alongside)"] = time.monotonic() - t0
        except BaseException as e:  # re-raised by the batch's thread
            failed.append(e)

    def _create_log(self, path: str, schema: Any, stats: str) -> None:
        """An append-only table of the consumer's, with file statistics only on the columns its readers filter
        by: statistics on every column (images, raw bytes) made each append measurably slower (see
        bench/RESULTS.md)."""
        from delta.tables import DeltaTable

        (DeltaTable.createIfNotExists(self.spark).location(path).addColumns(schema)
         .property("delta.dataSkippingStatsColumns", stats).execute())

    def _save_progress(self, batch_id: int, rep: BatchReport) -> None:
        """One small JSON file per micro-batch, written aside and renamed: the last one says where a restarted
        consumer stands (a Delta commit here cost seconds a batch, even for one row; see bench/RESULTS.md)."""
        rec = {"batch_id": batch_id, "applied_ts": self.applied_ts, "watermarks": self.watermarks,
               "rows": rep.rows_in, "errors": rep.errors, "at_ms": int(time.time() * 1000), "floors": self.floors,
               "ddl_ts": self._ddl_ts, "held": {str(b): list(v) for b, v in self._key_held.items()},
               "key_floors": self._key_floors,
               "upgrades": [{"table": u.table, "feature": u.feature, "ddl": u.ddl, "commit_ts": u.commit_ts}
                            for u in rep.upgrades],
               "seconds": {k: round(v, 3) for k, v in rep.phases.items()}}
        fs, folder = self._fs(self.progress)
        jvm = self.spark._jvm  # type: ignore[attr-defined]
        tmp = jvm.org.apache.hadoop.fs.Path(folder, f".batch-{batch_id:020d}.json.tmp")
        out = fs.create(tmp, True)
        try:
            out.write(bytearray(orjson.dumps(rec)))
        finally:
            out.close()
        final = jvm.org.apache.hadoop.fs.Path(folder, f"batch-{batch_id:020d}.json")
        if fs.exists(final):
            fs.delete(final, False)  # the same batch again (a replay): its newer outcome
        if not fs.rename(tmp, final):
            raise ApplyError(f"cannot write the consumer's progress at {final}")

    def _date_deletes(self, rows: DataFrame) -> DataFrame:
        """A delete that carries no commit ts (an Avro tombstone) takes the least its partition allows: the
        latest commit ts before it in the partition, or one past the latest watermark. It is then ordered
        after every earlier change of its key (one key, one partition) and before every later one, and no
        watermark has passed it. A pure function of the partition's messages, so a replay dates it alike."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        mark = (F.when(F.col("kind").isin("insert", "update", "delete") & (F.col("commit_ts") > 0), F.col("commit_ts"))
                .when(F.col("kind") == "watermark", F.col("commit_ts") + 1))
        before = Window.partitionBy("topic", "partition").orderBy("offset", "idx").rowsBetween(
            Window.unboundedPreceding, -1)
        carried = F.lit(0).cast("long")
        if self.floors:
            m = F.create_map(*[x for k, v in self.floors.items() for x in (F.lit(k), F.lit(v).cast("long"))])
            carried = F.coalesce(m[F.concat_ws("/", "topic", F.col("partition").cast("string"))], carried)
        floor = F.greatest(F.coalesce(F.max(mark).over(before), F.lit(0).cast("long")), carried)
        untimed = (F.col("kind") == "delete") & (F.coalesce(F.col("commit_ts"), F.lit(0)) == 0)
        return rows.withColumn("commit_ts", F.when(untimed, floor).otherwise(F.col("commit_ts")))

    # --- windows, segments, tables ----------------------------------------------------------------
    def _apply_window(self, window: DataFrame, lo: int, hi: int, rep: BatchReport, *,
                      key_mode_batch: int | None, lap: Callable[[str], None] | None = None,
                      from_cache: bool = False,
                      spans: list[dict[tuple[str, str], tuple[int, int, int]]] | None = None) -> None:
        """Rows in (lo, hi] and the DDL among them: each table's rows up to a DDL that touches it, the DDL,
        then its later rows. A DDL splits only the tables it names, so one table's DDL costs others nothing.

        `spans` (per batch read, each table's least and latest commit ts): for a window without DDL the tables
        with rows are those whose span meets (lo, hi], found without a Spark job (a table whose rows all fall
        outside the window is merged with an empty source, which changes nothing); `rows_applied` then counts
        those tables' changes in the batches read, not only the window's.
        """
        from pyspark.sql import functions as F

        ddls = sorted((d for d in self.pending.values() if (key_mode_batch is not None or lo < d.commit_ts)
                       and d.commit_ts <= hi), key=lambda d: d.commit_ts)
        if self.o.apply_as_deletes:
            window = window.withColumn("kind", F.when(F.expr(self.o.apply_as_deletes), F.lit("delete"))
                                       .otherwise(F.col("kind")))
        if spans is not None and not ddls and key_mode_batch is None and from_cache:
            counts: dict[tuple[str, str], int] = {}
            for per_batch in spans:
                for k, (least, latest, n) in per_batch.items():
                    if least <= hi and latest > lo:
                        counts[k] = counts.get(k, 0) + n
            if lap is not None:
                lap("window")
            work = [(db, tbl, window.where((F.col("database") == db) & (F.col("table") == tbl)), hi)
                    for db, tbl in sorted(counts)]
            rep.tables.update(f"{db}.{tbl}" for db, tbl in self._apply_tables(work))
            rep.rows_applied += sum(counts.values())
            if lap is not None:
                lap("merge")
            return
        if not from_cache:  # read from the changelog: once, not once per table and segment
            window = window.persist()
        try:
            # one job: each table's rows per stretch between the window's DDL (their count and least commit ts),
            # so finding the DDL segments with rows takes none; a few rows per table, not one per commit ts
            bounds = sorted({d.commit_ts for d in ddls})
            if len(bounds) <= 64:
                seg = sum((F.when(F.col("commit_ts") > b, 1).otherwise(0) for b in bounds), F.lit(0))
            else:  # a window dense with DDL: one row per commit ts
                seg = F.col("commit_ts")
            per_ts = window.groupBy("database", "table", seg.alias("_seg"), "topic", "partition").agg(
                F.count("*").alias("n"), F.min("commit_ts").alias("commit_ts"), F.max("commit_ts").alias("top")
            ).collect()
            counts: dict[tuple[str, str], int] = {}
            stamps: dict[tuple[str, str], list[int]] = {}
            for r in per_ts:
                k = (r["database"], r["table"])
                counts[k] = counts.get(k, 0) + r["n"]
                stamps.setdefault(k, []).append(r["commit_ts"] if r["commit_ts"] is not None else lo + 1)
                if key_mode_batch is not None and r["top"]:  # what each partition applied, per table
                    f = f"{r['topic']}/{r['partition']}/{r['database']}.{r['table']}"
                    self._key_floors[f] = max(self._key_floors.get(f, 0), r["top"])
            for v in stamps.values():
                v.sort()
            if lap is not None:
                lap("window")
            done: dict[tuple[str, str], int] = {}  # per table: rows applied up to this commit ts

            def any_rows(table: tuple[str, str], start: int, upto: int, inclusive: bool) -> bool:
                ts = stamps[table]
                i = bisect.bisect_right(ts, start)
                return i < len(ts) and (ts[i] <= upto if inclusive else ts[i] < upto)

            def version(ts: int, ddl: bool, step: int) -> int:
                if key_mode_batch is None:
                    return ts
                return key_mode_batch * 1_000_000 + 2 * step + (1 if ddl else 0)

            def flush(tables: list[tuple[str, str]], upto: int, step: int, *, inclusive: bool) -> None:
                work = []
                for table in tables:
                    if table not in counts:
                        continue
                    start = done.get(table, lo)
                    if upto <= start and key_mode_batch is None:
                        continue
                    db, tbl = table
                    cond = (F.col("database") == db) & (F.col("table") == tbl) & (F.col("commit_ts") > start)
                    cond &= (F.col("commit_ts") <= upto) if inclusive else (F.col("commit_ts") < upto)
                    if any_rows(table, start, upto, inclusive):
                        work.append((db, tbl, window.where(cond), version(upto if inclusive else upto - 1, False,
                                                                          step)))
                    done[table] = upto if inclusive else upto - 1
                rep.tables.update(f"{db}.{tbl}" for db, tbl in self._apply_tables(work))

            for step, d in enumerate(ddls):
                self._complete(d)
                flush(self._touches(d, counts), d.commit_ts, step, inclusive=False)
                self._apply_ddl(d, version(d.commit_ts, True, step))
                self.pending.pop((d.commit_ts, d.query), None)
                self._copies.pop((d.commit_ts, d.query), None)
                self._learn_ddl(d)
                self._ddl_ts = max(self._ddl_ts, d.commit_ts)
                rep.ddl_applied += 1
            flush(sorted(counts), hi, len(ddls), inclusive=True)
            rep.rows_applied += sum(counts.values())
            if lap is not None:
                lap("merge")
        finally:
            if not from_cache:
                window.unpersist()

    @staticmethod
    def _touches(d: Ddl, tables: dict[tuple[str, str], int]) -> list[tuple[str, str]]:
        """The tables (among those with rows) a DDL changes: named before or after it, or all of a schema."""
        named = {(t.schema, t.table) for t in (d.before, d.after) if t is not None and t.table}
        if d.database and d.table:
            named.add((d.database, d.table))
        if d.ddl_type == "ActionDropSchema" and d.database:
            named |= {k for k in tables if k[0] == d.database}
        return sorted(k for k in named if k in tables)

    def _definition(self, db: str, tbl: str, rows: DataFrame) -> TableInfo:
        t = self.defs.get((db, tbl))
        if t is not None:
            return t
        # no DDL or BOOTSTRAP seen: the definition the row messages carried (e.g. canal-json's mysqlType)
        from pyspark.sql import functions as F

        found = rows.where(F.col("table_def").isNotNull()).select("table_def").limit(1).collect()
        if not found:
            raise ApplyError(f"no definition of table {db}.{tbl} in the stream (no DDL, BOOTSTRAP or typed row)")
        t = _table_of(found[0]["table_def"])
        self._set_def((db, tbl), t)
        return t

    def _columns(self, t: TableInfo) -> list[str]:
        keys = set(self._keys(t))
        return [c.name for c in t.columns if self._selected(c.name, keys)]

    def _selected(self, name: str, keys: set[str]) -> bool:
        """column_list / except_column_list (key columns always kept)."""
        if name in keys:
            return True
        if self.o.column_list is not None and name not in self.o.column_list:
            return False
        return self.o.except_column_list is None or name not in self.o.except_column_list

    def _keys(self, t: TableInfo) -> list[str]:
        if self.o.keys:
            return list(self.o.keys)
        return list(t.handle_key) or [c.name for c in t.columns]

    def _schema(self, t: TableInfo) -> Any:
        from pyspark.sql import types as T

        full = table_schema(t, json_as_variant=self.o.json_as_variant)
        keep = set(self._columns(t))
        fields = [f for f in full.fields if f.name in keep]
        if self.o.scd_type == 2:
            fields += [T.StructField(START_AT, T.LongType(), False), T.StructField(END_AT, T.LongType(), True)]
        return T.StructType(fields)

    def create(self, t: TableInfo, path: str) -> None:
        if self.exists(path):
            return
        from delta.tables import DeltaTable

        schema = self._schema(t)
        b = DeltaTable.createIfNotExists(self.spark).location(path).addColumns(schema)
        for k, v in features.creation_properties(schema.fieldNames()).items():  # plain unless a name needs more
            b = b.property(k, v)
        b.execute()

    def _apply_rows(self, db: str, tbl: str, rows: DataFrame, version: int) -> bool:
        path = self.path(db, tbl)
        if self.txn_version(path) >= version:
            return False  # this table already holds these rows (a replay after a crash)
        t = self._definition(db, tbl, rows)
        self.create(t, path)
        # the lake's columns, not the definition's: a segment's rows may predate a definition learnt from later
        # messages of the same micro-batch (a column renamed after them still has its old name in the lake)
        keys = set(self._keys(t))
        lake_cols = self.spark.read.format("delta").load(path).columns
        shape = self._drift.pop((db, tbl), None)
        if shape is not None:
            lake_cols = self._follow(t, shape, path, lake_cols)
            t = self.defs[(db, tbl)]
        cols = [c for c in lake_cols if c not in (START_AT, END_AT) and self._selected(c, keys)]
        if self.o.scd_type == 1:
            self._merge_scd1(t, path, rows, cols, version)
        else:
            self._merge_scd2(t, path, rows, cols, version)
        return True

    def _follow(self, t: TableInfo, shape: TableInfo, path: str, lake_cols: list[str]) -> list[str]:
        """Add to a table the columns its rows now carry (schema drift in a stream without DDL)."""
        have = set(lake_cols)
        new = [c for c in shape.columns if c.name not in have and c.name not in t.by_name]
        merged = TableInfo(t.schema, t.table, columns=[*t.columns, *new], indexes=t.indexes, table_id=t.table_id,
                           version=t.version, charset=t.charset)
        self._set_def((t.schema, t.table), merged)
        added = [f for f in self._schema(merged).fields if f.name in {c.name for c in new}]
        if added:
            self.spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ("
                           + ", ".join(f"{q(f.name)} {f.dataType.simpleString()}" for f in added) + ")")
        return [*lake_cols, *(f.name for f in added)]

    def _ops(self, t: TableInfo, rows: DataFrame) -> tuple[DataFrame, list[str]]:
        """Each change as one or two keyed operations: D (delete the key) and U (the key's new image).

        An UPDATE that changes the key deletes the old key and writes the new one; within one commit ts,
        deletes come before writes (TiCDC's order when it splits such updates)."""
        from pyspark.sql import functions as F

        keys = self._keys(t)
        changed = self._key_changed(keys)
        # a stream whose deletes may be dated by their place (avro) has every change of a key in one partition
        # in order: the offset decides within a commit ts
        r0 = 1 if self.o.untimed_deletes else 0
        d = f"named_struct('op', 'D', 'img', before, 'r', {r0})"
        u = "named_struct('op', 'U', 'img', after, 'r', 1)"
        ops_expr = (f"CASE WHEN kind = 'delete' THEN array(named_struct('op', 'D', 'img', coalesce(before, after), "
                    f"'r', {r0})) WHEN kind = 'insert' THEN array({u}) WHEN before IS NOT NULL AND ({changed}) "
                    f"THEN array({d}, {u}) ELSE array({u}) END")
        place, order = self._order()
        ops = rows.select(*place, F.explode(F.expr(ops_expr)).alias("o"))
        key_names = [f"__k{i}" for i in range(len(keys))]
        ops = ops.select(*[c for c in ops.columns if c != "o"], F.col("o.op").alias("__op"),
                         F.col("o.img").alias("__img"), F.col("o.r").alias("__r"),
                         *[F.col("o.img")[k].alias(n) for k, n in zip(keys, key_names, strict=True)])
        return ops.withColumn("__ord", F.struct(*order)), key_names

    @staticmethod
    def _key_changed(keys: list[str]) -> str:
        """SQL: an UPDATE's before image has a key column whose value differs from its after image's."""
        return " OR ".join(f"(map_contains_key(before, {_lit(k)}) AND before[{_lit(k)}] IS DISTINCT FROM "
                           f"after[{_lit(k)}])" for k in keys)

    def _order(self) -> tuple[list[Column], list[str]]:
        """A change's place in its stream: the columns to carry (sequence, binlog position for streams that have
        one, topic/partition/offset/idx) and the order they sort by (`__r`, set by the caller, puts a key's
        delete before its write within one sequence value)."""
        from pyspark.sql import functions as F

        pos = [F.get_json_object("position", "$.file").alias(_POSITION[0]),  # real Debezium's binlog position,
               F.get_json_object("position", "$.pos").cast("long").alias(_POSITION[1]),  # numbers as numbers
               F.get_json_object("position", "$.row").cast("long").alias(_POSITION[2])] if self.o.positions else []
        place = [*[F.col(c) for c in self.o.sequence_by], *pos, *[F.col(c) for c in _PLACE]]
        return place, [*self.o.sequence_by, *(_POSITION if self.o.positions else ()), "__r", *_PLACE]

    def _typed_key(self, t: TableInfo, keys: list[str], key_names: list[str], image: str | None = None) -> list[Column]:
        """The key columns typed as the table's: from the columns `key_names`, or read from an image (a map column
        or SQL expression) into columns of those names."""
        from pyspark.sql import functions as F

        by = t.by_name
        src = F.expr(image) if image is not None else None
        text = [src[k] if src is not None else F.col(n) for k, n in zip(keys, key_names, strict=True)]
        return [(typed(c, by[k].type, json_as_variant=self.o.json_as_variant, dialect=self.o.text_dialect)
                 if k in by else c).alias(n) for k, n, c in zip(keys, key_names, text, strict=True)]

    def _value(self, t: TableInfo, name: str, img: str = "s.__img") -> Column:
        from pyspark.sql import functions as F

        col = t.by_name.get(name) or self._known.get((t.schema, t.table), {}).get(name)
        text = F.col(img)[name]
        if col is None:
            return text
        return typed(text, col.type, json_as_variant=self.o.json_as_variant, dialect=self.o.text_dialect)

    def _merge_scd1(self, t: TableInfo, path: str, rows: DataFrame, cols: list[str], version: int) -> None:
        """The last operation of each key, as flat typed columns, merged in one Delta commit.

        Built as two plain selects (key images written, keys deleted) rather than `_ops`' array of structs
        exploded per change: the same operations and order, with the key typed before rows are grouped by it.
        Measured apart it was not faster than the exploded form (the cost is reading the cached maps, typing
        values and sorting per key)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        keys = self._keys(t)
        key_names = [f"__k{i}" for i in range(len(keys))]
        vals = [f"__v{i}" for i in range(len(cols))]
        has = [f"__h{i}" for i in range(len(cols))]
        place, order = self._order()
        r0 = 1 if self.o.untimed_deletes else 0
        writes = rows.where("kind <> 'delete'").select(
            *place, F.lit(1).alias("__r"), F.lit("U").alias("__op"), *self._typed_key(t, keys, key_names, "after"),
            *[self._value(t, c, "after").alias(v) for c, v in zip(cols, vals, strict=True)],
            # a column the image lacks (only-output-updated-columns) keeps the table's value
            *[F.map_contains_key("after", c).alias(h) for c, h in zip(cols, has, strict=True)])
        # a delete, and an UPDATE that changes the key (its old key goes; within a commit ts before the writes)
        gone = rows.where(f"kind = 'delete' OR (kind = 'update' AND before IS NOT NULL AND "
                          f"({self._key_changed(keys)}))").select(
            *place, F.lit(r0).alias("__r"), F.lit("D").alias("__op"),
            *self._typed_key(t, keys, key_names,
                             "CASE WHEN kind = 'delete' THEN coalesce(before, after) ELSE before END"),
            *[F.lit(None).alias(v) for v in vals], *[F.lit(False).alias(h) for h in has])
        flat = writes.unionByName(gone, allowMissingColumns=False)
        w = Window.partitionBy(*key_names).orderBy(*[F.col(n).desc() for n in order])
        last = flat.withColumn("__n", F.row_number().over(w)).where("__n = 1").select("__op", *key_names, *vals, *has)
        cond = " AND ".join(f"t.{q(k)} <=> s.{q(n)}" for k, n in zip(keys, key_names, strict=True))
        upd = {q(c): F.when(F.col(f"s.{h}"), F.col(f"s.{v}")).otherwise(F.col(f"t.{q(c)}"))
               for c, v, h in zip(cols, vals, has, strict=True)}
        ins = {q(c): F.col(f"s.{v}") for c, v in zip(cols, vals, strict=True)}
        self._merge(path, last, cond, version, lambda m: m.whenMatchedDelete(condition="s.__op = 'D'")
                    .whenMatchedUpdate(condition="s.__op = 'U'", set=upd)
                    .whenNotMatchedInsert(condition="s.__op = 'U'", values=ins))

    def _merge(self, path: str, source: DataFrame, cond: str, version: int, clauses: Callable[[Any], Any]) -> None:
        """A MERGE whose source is computed once, into memory: Delta would otherwise materialize it on disk
        (`merge.materializeSource=auto`), needed only for a source that could change between its two passes.
        Ours cannot (a pure function of the cached micro-batch, each key's last change picked by a total order)."""
        from delta.tables import DeltaTable

        conf = "spark.databricks.delta.merge.materializeSource"
        source = source.persist()
        was = self.spark.conf.get(conf, None)
        self.spark.conf.set(conf, "none")
        try:
            merge = clauses(DeltaTable.forPath(self.spark, path).alias("t").merge(source.alias("s"), cond))
            self._with_txn(version, merge.execute, path)
        finally:
            if was is None:
                self.spark.conf.unset(conf)
            else:
                self.spark.conf.set(conf, was)
            source.unpersist()

    def _merge_scd2(self, t: TableInfo, path: str, rows: DataFrame, cols: list[str], version: int) -> None:
        """History rows: each image of a key is a version [__START_AT, __END_AT); a delete ends the open one.

        With track_history_column_list, an image that changes none of those columns replaces the version
        it follows (in place, the version keeps its start) instead of opening a new one."""
        from delta.tables import DeltaTable
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        keys = self._keys(t)
        ops, key_names = self._ops(t, rows)
        seq = F.col(self.o.sequence_by[0])
        target = DeltaTable.forPath(self.spark, path)
        if not self.o.watermarks:
            # a change at the commit ts its partition last applied may be one delivered again (the rest of its
            # transaction may still come, so it was not filtered out): an image of a key whose version already
            # starts at that sequence value is that version, not a new one (one change per key per commit ts)
            starts = target.toDF().select(*[F.col(q(k)).alias(f"__s{i}") for i, k in enumerate(keys)],
                                          F.col(q(START_AT)).alias("__s_at"))
            ops = ops.select("*", *[c.alias(f"__x{i}") for i, c in enumerate(self._typed_key(t, keys, key_names))])
            same = (F.col("__op") == "U") & (seq == F.col("__s_at"))
            for i in range(len(keys)):
                same &= F.col(f"__x{i}").eqNullSafe(F.col(f"__s{i}"))
            ops = ops.join(starts, same, "left_anti").drop(*[f"__x{i}" for i in range(len(keys))])
        w = Window.partitionBy(*key_names).orderBy("__ord")
        ops = ops.withColumn("__seq", seq).withColumn("__next", F.lead(seq).over(w))
        tk = self._typed_key(t, keys, key_names)
        tracked = [c for c in (self.o.track_history_column_list or []) if c in cols]
        inplace = F.lit(False)
        if self.o.track_history_column_list is not None:
            sig = F.to_json(F.struct(*[self._value(t, c, "__img").cast("string").alias(c) for c in tracked]))
            prev = F.lag(F.struct(F.col("__op").alias("op"), F.col("__sig").alias("s")), 1).over(w)
            ops = ops.withColumn("__sig", sig)
            ops = ops.withColumn("__same", F.coalesce((prev["op"] == "U") & (prev["s"] == F.col("__sig")),
                                                      F.lit(False)) & (F.col("__op") == "U"))
            ops = ops.withColumn("__grp", F.sum(F.when(F.col("__same"), 0).otherwise(1)).over(
                w.rowsBetween(Window.unboundedPreceding, 0)))
            run = Window.partitionBy(*key_names, "__grp")
            # a run of images that change no tracked column is one version: the first's start, the last's image
            ops = (ops.withColumn("__start", F.min("__seq").over(run))
                   .withColumn("__n", F.row_number().over(run.orderBy(F.col("__ord").desc())))
                   .where("__n = 1").withColumn("__seq", F.col("__start")).drop("__n", "__start"))
            # the key's open version in the table: when the first run changes no tracked column of it, the
            # run updates that version in place
            cur = (target.toDF().where(F.col(q(END_AT)).isNull())
                   .select(*[F.col(q(k)).alias(f"__c{i}") for i, k in enumerate(keys)],
                           F.to_json(F.struct(*[F.col(q(c)).cast("string").alias(c) for c in tracked])).alias("__cur")))
            tkeys = self._typed_key(t, keys, key_names)
            ops = ops.select("*", *[c.alias(f"__t{i}") for i, c in enumerate(tkeys)])
            ops = ops.join(cur, F.expr(" AND ".join(f"__t{i} <=> __c{i}" for i in range(len(keys)))), "left")
            ops = ops.withColumn("__inplace", F.coalesce((F.col("__grp") == 1) & (F.col("__op") == "U")
                                                         & (F.col("__cur") == F.col("__sig")), F.lit(False)))
            inplace = F.col("__inplace")
        first = ops.groupBy(*key_names).agg(
            F.min("__seq").alias("__first"),
            F.first(F.when(inplace, F.struct("__img", "__next")), ignorenulls=True).alias("__ip"))
        close = first.select(F.when(F.col("__ip").isNull(), F.lit("C")).otherwise(F.lit("I")).alias("__op"),
                             F.col("__ip.__img").alias("__img"), F.lit(None).cast("long").alias("__seq"),
                             F.col("__ip.__next").alias("__next"), F.col("__first"), *tk)
        nulls = [F.lit(None).cast(f.dataType).alias(f.name) for f in close.select(*key_names).schema.fields]
        vers = ops.where(F.col("__op") == "U").where(~inplace).select(
            F.lit("V").alias("__op"), "__img", "__seq", "__next", F.lit(None).cast("long").alias("__first"), *nulls)
        src = close.unionByName(vers)
        cond = " AND ".join(f"t.{q(k)} <=> s.{q(n)}" for k, n in zip(keys, key_names, strict=True))
        ins = {q(c): self._value(t, c) for c in cols}
        ins[q(START_AT)] = F.col("s.__seq")
        ins[q(END_AT)] = F.col("s.__next")
        in_place = {q(c): F.when(F.map_contains_key(F.col("s.__img"), c), self._value(t, c))
                    .otherwise(F.col(f"t.{q(c)}")) for c in cols}
        in_place[q(END_AT)] = F.col("s.__next")
        merge = (target.alias("t")
                 .merge(src.alias("s"), f"({cond}) AND t.{q(END_AT)} IS NULL AND s.__op IN ('C', 'I')")
                 .whenMatchedUpdate(condition="s.__op = 'I'", set=in_place)
                 .whenMatchedUpdate(set={q(END_AT): F.col("s.__first")})
                 .whenNotMatchedInsert(condition="s.__op = 'V'", values=ins))
        self._with_txn(version, merge.execute, path)

    # --- DDL --------------------------------------------------------------------------------------
    def _complete(self, d: Ddl) -> None:
        if not self.o.ddl_definitions and (d.after is None or not d.after.columns):
            self._interpret(d)
        if d.before is None:
            # protocols that do not carry the definition before a DDL (debezium): the one this consumer knows
            old = _renamed_from(d.query) if d.ddl_type in ("ActionRenameTable", "ActionRenameTables") else None
            db = old[0] or d.database if old else d.database
            name = old[1] if old else d.table
            if db and name:
                d.before = self.defs.get((db, name))

    def _interpret(self, d: Ddl) -> None:
        """A protocol whose DDL carry only their text (avro): the definitions before and after it, from the
        statement applied to the definitions this consumer holds (as a MySQL replica would)."""
        from ..sqlschema import SchemaError, SchemaTracker

        tracker = SchemaTracker()
        for t in self.defs.values():
            tracker.put(t)
        try:
            before, after = tracker.apply(d.query, d.database or "")
        except SchemaError as e:
            raise ApplyError(f"DDL at commit ts {d.commit_ts} ({d.query}) does not fit the table definition "
                             f"held for it: {e}") from e
        d.before = d.before if d.before is not None and d.before.columns else before
        if after is not None:
            d.after = after
        elif d.ddl_type in ("ActionDropTable", "ActionDropView") and before is not None:
            d.after = None

    def _apply_ddl(self, d: Ddl, version: int) -> None:
        try:
            self._ddl(d, version)
        except ApplyError as e:
            if self.o.on_ddl_error == "stop":
                raise
            self._record_skipped(d, str(e))
        except Exception as e:  # Delta refused it
            reason = f"cannot apply DDL at commit ts {d.commit_ts} ({d.query}): {type(e).__name__}: " \
                     f"{str(e).splitlines()[0] if str(e) else ''}"
            if self.o.on_ddl_error == "stop":
                raise ApplyError(reason + " (on-ddl-error=skip records it and goes on)") from e
            self._record_skipped(d, reason)

    def _record_skipped(self, d: Ddl, reason: str) -> None:
        row = [(f"ddl@{d.commit_ts}", -1, -1, None, d.query.encode(), reason, -1)]
        (self.spark.createDataFrame(row, DEAD_LETTER_SCHEMA)
         .write.format("delta").mode("append").save(self.dead))

    def _ddl(self, d: Ddl, version: int) -> None:
        a = d.ddl_type
        db = d.database or (d.after.schema if d.after else d.before.schema if d.before else "")
        if a == "ActionDropSchema":
            for path in self._tables_of(db) if db else []:
                if self.txn_version(path) < version:  # not one created again after the DROP
                    self._drop(path)
            return
        if a in ("ActionCreateSchema", "ActionModifySchemaCharsetAndCollate", "ActionNone"):
            return
        if a == "ActionRenameTable" or a == "ActionRenameTables":
            if d.before is None or d.after is None:
                raise ApplyError(f"RENAME TABLE at commit ts {d.commit_ts} without the table before and after")
            src, dst = self.path(d.before.schema, d.before.table), self.path(d.after.schema, d.after.table)
            fs, ps = self._fs(src)
            _, pd = self._fs(dst)
            if fs.exists(ps) and not fs.exists(pd):
                fs.mkdirs(pd.getParent())
                if not fs.rename(ps, pd):
                    raise ApplyError(f"cannot move {src} to {dst} for RENAME TABLE at commit ts {d.commit_ts}")
                self._versions.pop(src, None)
                self._versions.pop(dst, None)
            if self.exists(dst) and self.txn_version(dst) < version:
                self._reconcile(d, dst, version)
            return
        name = d.table or (d.after.table if d.after else d.before.table if d.before else "")
        if not name:
            return
        path = self.path(db, name)
        if self.txn_version(path) >= version:
            return  # applied before a crash
        if a in ("ActionDropTable", "ActionDropView"):
            self._drop(path)
            return
        if a == "ActionTruncateTable":
            if self.exists(path):
                if self.o.scd_type == 1:
                    self._with_txn(version, lambda: self.spark.sql(f"DELETE FROM delta.`{path}`"), path)
                else:
                    self._with_txn(version, lambda: self.spark.sql(
                        f"UPDATE delta.`{path}` SET {q(END_AT)} = {d.commit_ts} WHERE {q(END_AT)} IS NULL"), path)
            return
        if d.after is None or not d.after.columns:
            if a in _COLUMN_CHANGING and self.o.ddl_definitions and self.exists(path):
                raise ApplyError(f"DDL at commit ts {d.commit_ts} ({d.query}) changes columns of {db}.{name}, but "
                                 "the stream gave no table definition after it (the decoder did not know the table)")
            return  # nothing in the lake depends on it (an index, a comment ...)
        if not self.exists(path):
            self.create(d.after, path)
            self._mark(path, version)
            return
        self._reconcile(d, path, version)

    def _reconcile(self, d: Ddl, path: str, version: int) -> None:
        """Make the Delta table's columns those of the definition after the DDL."""
        t = d.after
        assert t is not None
        tpath = f"delta.`{path}`"
        current = {f.name: f for f in self.spark.read.format("delta").load(path).schema.fields
                   if f.name not in (START_AT, END_AT)}
        desired = [f for f in self._schema(t).fields if f.name not in (START_AT, END_AT)]
        want = {f.name for f in desired}
        renames: dict[str, str] = {}
        if d.before is not None and d.ddl_type in _COLUMN_RENAMING:
            gone = [c.name for c in d.before.columns if c.name not in t.by_name]
            new = [c.name for c in t.columns if c.name not in d.before.by_name]
            if len(gone) == len(new):
                renames = dict(zip(gone, new, strict=True))
        renames = {o: n for o, n in renames.items() if o in current and n not in current and n in want}
        drop = [n for n in current if n not in want and n not in renames]
        if (renames or drop) and self.o.table_features == features.MINIMAL:
            features.rewrite(self.spark, path, lambda df: df.withColumnsRenamed(renames).drop(*drop))
        elif renames or drop:
            self._feature(path, features.COLUMN_MAPPING, d)
            for old, new in renames.items():
                self.spark.sql(f"ALTER TABLE {tpath} RENAME COLUMN {q(old)} TO {q(new)}")
            if drop:
                self.spark.sql(f"ALTER TABLE {tpath} DROP COLUMNS ({', '.join(q(n) for n in drop)})")
        for old, new in renames.items():
            current[new] = current.pop(old)
        for n in drop:
            current.pop(n)
        prev = None
        added: list[str] = []
        for f in desired:
            if f.name not in current:
                where = f" AFTER {q(prev)}" if prev else " FIRST"
                self.spark.sql(f"ALTER TABLE {tpath} ADD COLUMNS ({q(f.name)} {f.dataType.simpleString()}{where})")
                added.append(f.name)
            else:
                have = current[f.name]
                if have.dataType != f.dataType:
                    self._change_type(path, f.name, have.dataType, f.dataType, d)
                if have.nullable is False and f.nullable:
                    self.spark.sql(f"ALTER TABLE {tpath} ALTER COLUMN {q(f.name)} DROP NOT NULL")
            prev = f.name
        # rows that predate ADD COLUMN ... DEFAULT x hold x upstream
        fills = {}
        before_names = set(d.before.by_name) if d.before is not None else set(current) - set(added)
        for n in added:
            col = t.by_name.get(n)
            if col is None or col.default is None or n in before_names:
                continue
            try:
                text = text_of(col.type)(col.normalize(col.default))
            except Exception:
                continue  # an expression default (CURRENT_TIMESTAMP ...) has no one value
            fills[n] = text
        if fills and self.o.scd_type in (1, 2):
            sets = ", ".join(f"{q(n)} = {self._sql_typed(t, n, v)}" for n, v in fills.items())
            self._with_txn(version, lambda: self.spark.sql(f"UPDATE {tpath} SET {sets}"), path)
        else:
            self._mark(path, version)

    def _sql_typed(self, t: TableInfo, name: str, text: str | None) -> str:
        """A SQL literal of a column's value (for UPDATE ... SET)."""
        if text is None:
            return "NULL"
        from pyspark.sql import functions as F

        expr = typed(F.lit(text), t.by_name[name].type, json_as_variant=self.o.json_as_variant)
        return self._literal(expr)

    def _literal(self, expr: Column) -> str:
        from pyspark.sql import functions as F

        v = self.spark.range(1).select(expr.alias("v")).select(F.col("v"), F.typeof("v").alias("t")).collect()[0]
        val, typ = v["v"], v["t"]
        if val is None:
            return "NULL"
        if isinstance(val, bytes | bytearray):
            return f"X'{bytes(val).hex()}'"
        if typ.startswith("timestamp") or typ == "date":
            return f"CAST({_lit(str(val))} AS {typ})"
        if isinstance(val, str):
            return _lit(val)
        return f"CAST({_lit(str(val))} AS {typ})"

    def _feature(self, path: str, feature: str, d: Ddl) -> None:
        """Turn a Delta feature on for a table a DDL needs it for (auto mode), noting the upgrade."""
        up = features.turn_on(self.spark, path, feature, f"{d.database}.{d.table}", d.query or d.ddl_type,
                              d.commit_ts)
        if up is not None:
            self._upgrades.append(up)

    def _change_type(self, path: str, name: str, have: Any, want: Any, d: Ddl) -> None:
        try:
            if self.o.table_features == features.MINIMAL:
                from pyspark.sql import functions as F

                features.rewrite(self.spark, path, lambda df: df.withColumn(name, F.col(name).cast(want)))
                return
            self._feature(path, features.TYPE_WIDENING, d)
            self.spark.sql(f"ALTER TABLE delta.`{path}` ALTER COLUMN {q(name)} TYPE {want.simpleString()}")
        except Exception as e:
            raise ApplyError(f"cannot apply DDL at commit ts {d.commit_ts} ({d.query}): column {name} changes from "
                             f"{have.simpleString()} to {want.simpleString()}, which Delta cannot widen in place "
                             f"({str(e).splitlines()[0]})") from e
