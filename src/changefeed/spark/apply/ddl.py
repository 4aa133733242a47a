"""DDL applied to the lake: a DDL's definitions filled in (`complete`, `interpret`), what it changes in a
table's columns planned as values (`plan_columns`, no Spark), then carried out on Delta (`DdlApplier`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...ddl import TABLE_RENAMING, changes_columns, drops_schema, drops_table, renames_columns, truncates
from ...errors import ApplyError
from ...model import TableInfo
from .. import table_features as features
from ..types import text_of, typed
from .options import DEAD_LETTER_SCHEMA, END_AT, START_AT, q, sql_string

if TYPE_CHECKING:
    from pyspark.sql import Column

    from .catalog import TableCatalog
    from .lake import Lake
    from .options import ApplyOptions
    from .projection import Projection


@dataclass
class Ddl:
    commit_ts: int
    query: str
    ddl_type: str
    database: str | None
    table: str | None
    after: TableInfo | None
    before: TableInfo | None


_RENAME = re.compile(r"^\s*(?:RENAME\s+TABLE|ALTER\s+TABLE)\s+((?:`(?:[^`]|``)+`|[\w$]+)(?:\s*\.\s*(?:`(?:[^`]|``)+`|"
                     r"[\w$]+))?)", re.I)


def renamed_from(query: str) -> tuple[str | None, str] | None:
    """(schema or None, table) a RENAME TABLE / ALTER TABLE ... RENAME statement starts from."""
    m = _RENAME.match(query or "")
    if not m:
        return None
    parts = [p.strip().strip("`").replace("``", "`") for p in re.split(r"\.(?=(?:[^`]*`[^`]*`)*[^`]*$)", m.group(1))]
    return (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])


def interpret(d: Ddl, defs: dict[tuple[str, str], TableInfo]) -> None:
    """A protocol whose DDL carry only their text (avro): the definitions before and after it, from the
    statement applied to the definitions this consumer holds (as a MySQL replica would)."""
    from ...sqlschema import SchemaError, SchemaTracker

    tracker = SchemaTracker()
    for t in defs.values():
        tracker.put(t)
    try:
        before, after = tracker.apply(d.query, d.database or "")
    except SchemaError as e:
        raise ApplyError(f"DDL at commit ts {d.commit_ts} ({d.query}) does not fit the table definition "
                         f"held for it: {e}") from e
    d.before = d.before if d.before is not None and d.before.columns else before
    if after is not None:
        d.after = after
    elif drops_table(d.ddl_type) and before is not None:
        d.after = None


def complete(d: Ddl, defs: dict[tuple[str, str], TableInfo], ddl_definitions: bool) -> None:
    """Fill in what a DDL does not carry: both definitions (`interpret`, for DDL without them) and the one
    before it (protocols that do not carry it, debezium: the one this consumer holds)."""
    if not ddl_definitions and (d.after is None or not d.after.columns):
        interpret(d, defs)
    if d.before is None:
        old = renamed_from(d.query) if d.ddl_type in TABLE_RENAMING else None
        db = old[0] or d.database if old else d.database
        name = old[1] if old else d.table
        if db and name:
            d.before = defs.get((db, name))


# --- the plan: what a DDL changes in a table's columns ----------------------------------------------
@dataclass(frozen=True)
class AddColumn:
    name: str
    type: str  # Spark SQL type
    after: str | None  # None: first


@dataclass(frozen=True)
class ChangeType:
    name: str
    have: Any  # Spark DataType
    want: Any


@dataclass(frozen=True)
class DropNotNull:
    name: str


@dataclass(frozen=True)
class ColumnPlan:
    """Renames and drops (at once), then the other steps in the table's column order, then the values rows
    that predate an ADD COLUMN ... DEFAULT take (column -> text)."""

    renames: dict[str, str] = field(default_factory=dict)
    drops: list[str] = field(default_factory=list)
    steps: list[AddColumn | ChangeType | DropNotNull] = field(default_factory=list)
    fills: dict[str, str] = field(default_factory=dict)


def plan_columns(d: Ddl, current: dict[str, Any], desired: list[Any]) -> ColumnPlan:
    """How a table whose columns are `current` (name -> Spark StructField, the lake's, without the SCD2 period)
    becomes `desired` (the StructFields of the definition after `d`, in order). A column DDL names a column
    that is gone from the definition and one that is new (paired in table order): a rename, not a drop and
    an add, so its values stay."""
    t = d.after
    assert t is not None
    current = dict(current)
    want = {f.name for f in desired}
    renames: dict[str, str] = {}
    if d.before is not None and renames_columns(d.ddl_type):
        gone = [c.name for c in d.before.columns if c.name not in t.by_name]
        new = [c.name for c in t.columns if c.name not in d.before.by_name]
        if len(gone) == len(new):
            renames = dict(zip(gone, new, strict=True))
    renames = {o: n for o, n in renames.items() if o in current and n not in current and n in want}
    drops = [n for n in current if n not in want and n not in renames]
    for old, new in renames.items():
        current[new] = current.pop(old)
    for n in drops:
        current.pop(n)
    prev = None
    steps: list[AddColumn | ChangeType | DropNotNull] = []
    added: list[str] = []
    for f in desired:
        if f.name not in current:
            steps.append(AddColumn(f.name, f.dataType.simpleString(), prev))
            added.append(f.name)
        else:
            have = current[f.name]
            if have.dataType != f.dataType:
                steps.append(ChangeType(f.name, have.dataType, f.dataType))
            if have.nullable is False and f.nullable:
                steps.append(DropNotNull(f.name))
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
    return ColumnPlan(renames, drops, steps, fills)


# --- carrying DDL out on Delta -------------------------------------------------------------------
class DdlApplier:
    """Applies DDL (and a drifting stream's new columns) to the lake's tables, each once (its version)."""

    def __init__(self, options: ApplyOptions, lake: Lake, catalog: TableCatalog, projection: Projection) -> None:
        self.o = options
        self.lake = lake
        self.catalog = catalog
        self.proj = projection
        self.upgrades: list[features.Upgrade] = []  # Delta features turned on during this micro-batch

    def create(self, t: TableInfo, path: str, version: int | None = None) -> None:
        """The table, unless the lake has it; `version`: created by a DDL, marked applied in the same commit."""
        self.lake.create_table(path, lambda: self.proj.schema(t), version)

    def apply(self, d: Ddl, version: int) -> None:
        """A DDL applied as the table's commit `version`; a failure stops the consumer, or with
        on_ddl_error=skip is recorded among the dead letters."""
        try:
            self._ddl(d, version)
        except ApplyError as e:
            if self.o.on_ddl_error == "stop":
                raise
            self.record_skipped(d, str(e))
        except Exception as e:  # Delta refused it
            reason = f"cannot apply DDL at commit ts {d.commit_ts} ({d.query}): {type(e).__name__}: " \
                     f"{str(e).splitlines()[0] if str(e) else ''}"
            if self.o.on_ddl_error == "stop":
                raise ApplyError(reason + " (on-ddl-error=skip records it and goes on)") from e
            self.record_skipped(d, reason)

    def record_skipped(self, d: Ddl, reason: str) -> None:
        row = [(f"ddl@{d.commit_ts}", -1, -1, None, d.query.encode(), reason, -1)]
        (self.lake.spark.createDataFrame(row, DEAD_LETTER_SCHEMA)
         .write.format("delta").mode("append").save(self.lake.layout.dead_letters))

    def _ddl(self, d: Ddl, version: int) -> None:
        a = d.ddl_type
        lake = self.lake
        db = d.database or (d.after.schema if d.after else d.before.schema if d.before else "")
        if drops_schema(a):
            for path in lake.tables_of(db) if db else []:
                if lake.txn_version(path) < version:  # not one created again after the DROP
                    lake.drop(path)
            return
        if a in ("ActionCreateSchema", "ActionModifySchemaCharsetAndCollate", "ActionNone"):
            return
        if a in TABLE_RENAMING:
            if d.before is None or d.after is None:
                raise ApplyError(f"RENAME TABLE at commit ts {d.commit_ts} without the table before and after")
            src, dst = lake.path(d.before.schema, d.before.table), lake.path(d.after.schema, d.after.table)
            if not lake.move(src, dst):
                raise ApplyError(f"cannot move {src} to {dst} for RENAME TABLE at commit ts {d.commit_ts}")
            if lake.exists(dst) and lake.txn_version(dst) < version:
                self.reconcile(d, dst, version)
            return
        name = d.table or (d.after.table if d.after else d.before.table if d.before else "")
        if not name:
            return
        path = lake.path(db, name)
        if lake.txn_version(path) >= version:
            return  # applied before a crash
        if drops_table(a):
            lake.drop(path)
            return
        if truncates(a):
            if lake.exists(path):
                if self.o.scd_type == 1:
                    lake.with_txn(version, lambda: lake.sql(f"DELETE FROM delta.`{path}`"), path)
                else:
                    lake.with_txn(version, lambda: lake.sql(
                        f"UPDATE delta.`{path}` SET {q(END_AT)} = {d.commit_ts} WHERE {q(END_AT)} IS NULL"), path)
            elif d.after is not None and d.after.columns:  # the rows before it were not written (segments.py)
                self.create(d.after, path, version)
            return
        if d.after is None or not d.after.columns:
            if changes_columns(a) and self.o.ddl_definitions and lake.exists(path):
                raise ApplyError(f"DDL at commit ts {d.commit_ts} ({d.query}) changes columns of {db}.{name}, but "
                                 "the stream gave no table definition after it (the decoder did not know the table)")
            return  # nothing in the lake depends on it (an index, a comment ...)
        if not lake.exists(path):
            self.create(d.after, path, version)
            return
        self.reconcile(d, path, version)

    def reconcile(self, d: Ddl, path: str, version: int) -> None:
        """Make the Delta table's columns those of the definition after the DDL."""
        t = d.after
        assert t is not None
        lake = self.lake
        tpath = f"delta.`{path}`"
        current = {f.name: f for f in lake.read(path).schema.fields if f.name not in (START_AT, END_AT)}
        desired = [f for f in self.proj.schema(t).fields if f.name not in (START_AT, END_AT)]
        plan = plan_columns(d, current, desired)
        renames, drop = plan.renames, plan.drops
        if (renames or drop) and self.o.table_features == features.MINIMAL:
            features.rewrite(lake.spark, path, lambda df: df.withColumnsRenamed(renames).drop(*drop))
        elif renames or drop:
            self._feature(path, features.COLUMN_MAPPING, d)
            for old, new in renames.items():
                lake.sql(f"ALTER TABLE {tpath} RENAME COLUMN {q(old)} TO {q(new)}")
            if drop:
                lake.sql(f"ALTER TABLE {tpath} DROP COLUMNS ({', '.join(q(n) for n in drop)})")
        for step in plan.steps:
            if isinstance(step, AddColumn):
                where = f" AFTER {q(step.after)}" if step.after else " FIRST"
                lake.sql(f"ALTER TABLE {tpath} ADD COLUMNS ({q(step.name)} {step.type}{where})")
            elif isinstance(step, ChangeType):
                self._change_type(path, step.name, step.have, step.want, d)
            else:
                lake.sql(f"ALTER TABLE {tpath} ALTER COLUMN {q(step.name)} DROP NOT NULL")
        if plan.fills and self.o.scd_type in (1, 2):
            sets = ", ".join(f"{q(n)} = {self._sql_typed(t, n, v)}" for n, v in plan.fills.items())
            lake.with_txn(version, lambda: lake.sql(f"UPDATE {tpath} SET {sets}"), path)
        else:
            lake.mark(path, version)

    def follow(self, t: TableInfo, shape: TableInfo, path: str, lake_cols: list[str]) -> list[str]:
        """Add to a table the columns its rows now carry (schema drift in a stream without DDL)."""
        merged, new = self.catalog.follow(t, shape, set(lake_cols))
        added = [f for f in self.proj.schema(merged).fields if f.name in new]
        if added:
            self.lake.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ("
                          + ", ".join(f"{q(f.name)} {f.dataType.simpleString()}" for f in added) + ")")
        return [*lake_cols, *(f.name for f in added)]

    def _sql_typed(self, t: TableInfo, name: str, text: str | None) -> str:
        """A SQL literal of a column's value (for UPDATE ... SET)."""
        if text is None:
            return "NULL"
        from pyspark.sql import functions as F

        expr = typed(F.lit(text), t.by_name[name].type, json_as_variant=self.o.json_as_variant)
        return self._literal(expr)

    def _literal(self, expr: Column) -> str:
        from pyspark.sql import functions as F

        v = self.lake.spark.range(1).select(expr.alias("v")).select(F.col("v"), F.typeof("v").alias("t")).collect()[0]
        val, typ = v["v"], v["t"]
        if val is None:
            return "NULL"
        if isinstance(val, bytes | bytearray):
            return f"X'{bytes(val).hex()}'"
        if typ.startswith("timestamp") or typ == "date":
            return f"CAST({sql_string(str(val))} AS {typ})"
        if isinstance(val, str):
            return sql_string(val)
        return f"CAST({sql_string(str(val))} AS {typ})"

    def _feature(self, path: str, feature: str, d: Ddl) -> None:
        """Turn a Delta feature on for a table a DDL needs it for (auto mode), noting the upgrade."""
        up = features.turn_on(self.lake.spark, path, feature, f"{d.database}.{d.table}", d.query or d.ddl_type,
                              d.commit_ts)
        if up is not None:
            self.upgrades.append(up)

    def _change_type(self, path: str, name: str, have: Any, want: Any, d: Ddl) -> None:
        try:
            if self.o.table_features == features.MINIMAL:
                from pyspark.sql import functions as F

                features.rewrite(self.lake.spark, path, lambda df: df.withColumn(name, F.col(name).cast(want)))
                return
            self._feature(path, features.TYPE_WIDENING, d)
            self.lake.sql(f"ALTER TABLE delta.`{path}` ALTER COLUMN {q(name)} TYPE {want.simpleString()}")
        except Exception as e:
            raise ApplyError(f"cannot apply DDL at commit ts {d.commit_ts} ({d.query}): column {name} changes from "
                             f"{have.simpleString()} to {want.simpleString()}, which Delta cannot widen in place "
                             f"({str(e).splitlines()[0]})") from e
