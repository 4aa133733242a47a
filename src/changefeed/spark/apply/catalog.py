"""What the consumer knows of the tables: their definitions, learnt from the stream's DDL, BOOTSTRAP and row
shapes, and the DDL still to apply (`pending`). Plain Python over control rows, except `control_rows` (one
Spark job picking those rows out of a batch) and `definition` (one lookup in a table's rows)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from ...ddl import drops_table
from ...errors import ApplyError
from ...eventline import table_from_json
from ...model import Column as ModelColumn
from ...model import Index, TableInfo
from .ddlplan import Ddl, interpret
from .options import ROW_KINDS, ROW_KINDS_SQL

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from .options import ApplyOptions
    from .state import ConsumerState

TableKey = tuple[str, str]  # (database, table)


def table_of(table_def: str) -> TableInfo:
    """A table definition as a change row carries it: an event-line table, or the shape canal-json's JVM
    decoder writes (its `mysqlType` map in column order and `pkNames`)."""
    obj = orjson.loads(table_def)
    if "mysqlType" not in obj:
        return table_from_json(obj)
    pk = obj.get("pkNames") or []
    cols = [ModelColumn(n, shape_type(mt), primary_key=n in pk) for n, mt in obj["mysqlType"].items()]
    return TableInfo(obj["schema"], obj["table"], columns=cols,
                     indexes=[Index("PRIMARY", list(pk), primary=True, unique=True)] if pk else [])


def shape_type(mysql_type: str) -> str:
    """A column type as canal-json's short `mysqlType` gives it, widened where the short form would lose values:
    a bare `decimal` (TiCDC writes it for every DECIMAL(p,s)) is not MySQL's DECIMAL(10,0), so it is kept as its
    exact text (a DECIMAL(65,30) lands as a string); a bare `bit` may be BIT(64)."""
    base = mysql_type.strip().lower()
    if base in ("decimal", "decimal unsigned", "numeric"):
        return "decimal(65,30)" + (" unsigned" if base.endswith("unsigned") else "")
    if base == "bit":
        return "bit(64)"
    return mysql_type


def richness(d: Ddl) -> tuple[bool, bool]:
    """How much definition a DDL copy carries (after, before): of several copies the richest is kept."""
    return bool(d.after is not None and d.after.columns), bool(d.before is not None and d.before.columns)


def control_columns(apply_as_truncates: str | None) -> list[Any]:
    from pyspark.sql import functions as F

    truncate = F.expr(apply_as_truncates) if apply_as_truncates else F.lit(False)
    return ["kind", "commit_ts", "topic", "partition", "offset", "idx", "database", "table", "ddl", "ddl_type",
            "table_def", "pre_table_def", F.coalesce(truncate, F.lit(False)).alias("_truncate")]


# a row that carries its table's shape: the decoder writes a row's table definition only where it first meets one
_SHAPE = f"kind IN {ROW_KINDS_SQL} AND table_def IS NOT NULL"
# a row's table shape by its hash (Spark's xxhash64), NULL where it carries none: `process`' first job takes each
# table's least and greatest per batch, and `TableCatalog.nothing_new` compares them with the shapes already learnt
SHAPE_HASH = f"CASE WHEN {_SHAPE} THEN xxhash64(table_def) END"


def control_rows(rows: DataFrame, apply_as_truncates: str | None) -> list[Any]:
    """What the driver learns from changes: DDL and BOOTSTRAP (and truncates the user marks) in order,
    and each table shape the row messages carried (once per shape, not once per row)."""
    from pyspark.sql import functions as F

    cond = "kind IN ('ddl', 'bootstrap')"
    if apply_as_truncates:
        cond += f" OR coalesce({apply_as_truncates}, false)"
    # few rows (a shape only where the decoder first met it), one job
    got = rows.where(f"({cond}) OR ({_SHAPE})").select(*control_columns(apply_as_truncates),
                                                       F.expr(_SHAPE).alias("_shape"),
                                                       F.expr(SHAPE_HASH).alias("_hash")).collect()
    return order_control(got)


def order_control(got: list[Any]) -> list[Any]:
    """Control rows in the order they are learnt: each row shape once (at its first commit ts), then DDL,
    BOOTSTRAP and truncates in stream order."""
    ctrl = sorted((r for r in got if not r["_shape"]),
                  key=lambda r: (r["commit_ts"], r["topic"], r["partition"], r["offset"], r["idx"]))
    first: dict[str, int] = {}
    hashes: dict[str, int | None] = {}
    for r in got:
        if r["_shape"] and (r["table_def"] not in first or r["commit_ts"] < first[r["table_def"]]):
            first[r["table_def"]] = r["commit_ts"]
            hashes[r["table_def"]] = r["_hash"]
    shapes = sorted(first.items(), key=lambda x: x[1])
    return [*({"kind": "insert", "table_def": d, "_truncate": False, "_hash": hashes[d]} for d, _ in shapes), *ctrl]


class TableCatalog:
    """Table definitions by (database, table), and the DDL waiting to be applied (rebuilt from the changelog
    after a restart: see `state`)."""

    def __init__(self, options: ApplyOptions, state: ConsumerState) -> None:
        self.o = options
        self.state = state
        self.defs: dict[TableKey, TableInfo] = {}
        self.pending: dict[tuple[int, str], Ddl] = {}  # (commit ts, query) -> the DDL still to apply
        self.defs_ts = 0  # the commit ts of the latest DDL the definitions include
        self.known: dict[TableKey, dict[str, ModelColumn]] = {}  # every column a table's name has had
        # a stream with neither DDL definitions nor watermarks (avro without TiCDC's extension sends no DDL):
        # tables follow the columns their rows carry (new ones added; dropped ones kept, NULL from then on)
        self.drifts = not self.o.ddl_definitions and not self.o.watermarks
        self.drift: dict[TableKey, TableInfo] = {}  # a table's newer row shape, for its next write
        # without watermarks (ddl_barrier): per partition, the latest DDL it delivered a copy of; per pending
        # DDL, the topics its copies came on
        self.ddl_seen: dict[str, int] = {}
        self.copies: dict[tuple[int, str], set[str]] = {}
        # per table: the hash of the row shape it learnt last (`SHAPE_HASH`) and the definition held after it
        self.shapes_seen: dict[TableKey, tuple[int, TableInfo | None]] = {}

    def nothing_new(self, counts: Iterable[Mapping[str, Any]], apply_as_truncates: str | None) -> bool:
        """Whether a batch has nothing to learn, from its first job's counts per kind and table (`shape_lo`,
        `shape_hi`: the least and greatest `SHAPE_HASH`): no DDL or BOOTSTRAP, no truncates to look for, and
        each table's rows carry at most the one shape it learnt last, with its definition unchanged since. The
        control rows' job (`control_rows`) is then not run: a decoder that writes each table's shape again in
        every task (canal-json's) made one per micro-batch."""
        if apply_as_truncates or self.drifts:
            return False
        for r in counts:
            if r["kind"] in ("ddl", "bootstrap"):
                return False
            if r["kind"] in ROW_KINDS and r["shape_lo"] is not None:
                key = (r["database"], r["table"])
                seen = self.shapes_seen.get(key)
                if r["shape_lo"] != r["shape_hi"] or seen is None or seen[0] != r["shape_lo"] \
                        or seen[1] is not self.defs.get(key):
                    return False
        return True

    def take(self, rows: DataFrame, counts: list[Any]) -> None:
        """What a batch's control rows teach the catalog: their job (`control_rows`) only where its first job's
        counts show something new (`nothing_new`)."""
        if not self.nothing_new(counts, self.o.apply_as_truncates):
            self.learn(control_rows(rows, self.o.apply_as_truncates))

    def learn(self, rows: list[Any]) -> None:
        """Take control rows (`control_rows`, in their order): DDL to apply, or definitions to hold."""
        parsed: dict[str, TableInfo] = {}  # a DDL's copies (one per partition) carry the same definitions

        def table(text: str | None) -> TableInfo | None:
            if not text:
                return None
            t = parsed.get(text)
            if t is None:
                t = parsed[text] = table_from_json(orjson.loads(text))
            return t

        for r in rows:
            if r["kind"] == "ddl" or r["_truncate"]:
                dtype = "ActionTruncateTable" if r["_truncate"] else r["ddl_type"] or ""
                d = Ddl(r["commit_ts"], r["ddl"] or f"TRUNCATE TABLE {r['database']}.{r['table']}", dtype,
                        r["database"], r["table"], table(r["table_def"]), table(r["pre_table_def"]))
                copy = r["kind"] == "ddl" and r["topic"] is not None  # a broadcast copy, from its partition
                if copy:
                    k = f"{r['topic']}/{r['partition']}"
                    self.ddl_seen[k] = max(self.ddl_seen.get(k, 0), d.commit_ts)
                # applied already: below the applied watermark, or (without watermarks) at or below the latest
                # DDL taken (every partition has a copy of a DDL, in commit order: later copies are repeats)
                if d.commit_ts > (self.state.applied_ts if self.o.watermarks else self.state.ddl_ts):
                    if copy:
                        self.copies.setdefault((d.commit_ts, d.query), set()).add(r["topic"])
                    have = self.pending.get((d.commit_ts, d.query))
                    # the same DDL from several partitions: keep the copy that carries the most definition
                    if have is None or richness(d) > richness(have):
                        self.pending[(d.commit_ts, d.query)] = d
                elif d.commit_ts > self.defs_ts:
                    if not self.o.ddl_definitions and (d.after is None or not d.after.columns):
                        interpret(d, self.defs)
                    self.learn_ddl(d)
                # else: a redelivered DDL, older than the definitions held: it must not roll them back
            elif r["table_def"] and r["kind"] in ("insert", "update", "delete", "bootstrap"):
                t = table_of(r["table_def"])
                key = (t.schema, t.table)
                have = self.defs.get(key)
                # a newer schema version wins; at the same version BOOTSTRAP (all facts) wins over what a row
                # message implied; an older one (a redelivered message) never rolls the definition back
                if have is None or (t.version is not None and (
                        have.version is None or t.version > have.version
                        or (r["kind"] == "bootstrap" and t.version == have.version))):
                    self.set_def(key, t)
                elif t.version is None and self.drifts and not have.same_definition(t):
                    self.drift[key] = t
                if r["kind"] in ROW_KINDS and r["_hash"] is not None:  # a row shape: order_control gives its hash
                    self.shapes_seen[key] = (r["_hash"], self.defs.get(key))

    def set_def(self, key: TableKey, t: TableInfo) -> None:
        self.defs[key] = t
        known = self.known.setdefault(key, {})
        for c in t.columns:
            known[c.name] = c

    def learn_ddl(self, d: Ddl) -> None:
        """The definitions after a DDL (a table renamed or dropped loses its old name's)."""
        self.defs_ts = max(self.defs_ts, d.commit_ts)
        renamed = d.before is not None and d.after is not None and d.after.table and (
            (d.before.schema, d.before.table) != (d.after.schema, d.after.table))
        if d.before is not None and d.before.table and (renamed or drops_table(d.ddl_type)):
            self.defs.pop((d.before.schema, d.before.table), None)
        if drops_table(d.ddl_type) and d.database and d.table:
            self.defs.pop((d.database, d.table), None)
        if d.after is not None and d.after.columns:
            self.set_def((d.after.schema, d.after.table), d.after)

    def applied(self, d: Ddl) -> None:
        """A pending DDL is applied to the lake: no longer pending; the definitions follow it."""
        self.pending.pop((d.commit_ts, d.query), None)
        self.copies.pop((d.commit_ts, d.query), None)
        self.learn_ddl(d)

    def definition(self, db: str, tbl: str, rows_of: Callable[[], DataFrame]) -> TableInfo:
        """The table's definition: from its DDL, else from its rows (`rows_of()`, asked only then)."""
        t = self.defs.get((db, tbl))
        if t is not None:
            return t
        # no DDL or BOOTSTRAP seen: the definition the row messages carried (e.g. canal-json's mysqlType)
        from pyspark.sql import functions as F

        found = rows_of().where(F.col("table_def").isNotNull()).select("table_def").limit(1).collect()
        if not found:
            raise ApplyError(f"no definition of table {db}.{tbl} in the stream (no DDL, BOOTSTRAP or typed row)")
        t = table_of(found[0]["table_def"])
        self.set_def((db, tbl), t)
        return t

    def follow(self, t: TableInfo, shape: TableInfo, have: set[str]) -> tuple[TableInfo, set[str]]:
        """Schema drift in a stream without DDL: the definition with the columns a row shape adds (those
        neither in the lake, `have`, nor in the definition), now held; and the names of those columns."""
        new = [c for c in shape.columns if c.name not in have and c.name not in t.by_name]
        merged = TableInfo(t.schema, t.table, columns=[*t.columns, *new], indexes=t.indexes, table_id=t.table_id,
                           version=t.version, charset=t.charset)
        self.set_def((t.schema, t.table), merged)
        return merged, {c.name for c in new}
