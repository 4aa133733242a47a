"""DDL applied to the lake: a DDL's plan (`ddlplan`) carried out on Delta (`DdlApplier`), each DDL once."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...ddl import TABLE_RENAMING, changes_columns, drops_schema, drops_table, truncates
from ...errors import ApplyError
from ...model import TableInfo
from .. import table_features as features
from ..types import typed
from .ddldriver import DriverDdl
from .ddlplan import AddColumn, ChangeType, Ddl, plan_columns
from .options import DEAD_LETTER_SCHEMA, END_AT, START_AT, WRITE_ATTEMPTS, conflicted, q, sql_string

if TYPE_CHECKING:
    from pyspark.sql import Column

    from .catalog import TableCatalog
    from .lake import Lake
    from .options import ApplyOptions
    from .projection import Projection


class DdlApplier:
    """Applies DDL (and a drifting stream's new columns) to the lake's tables, each once (its version)."""

    def __init__(self, options: ApplyOptions, lake: Lake, catalog: TableCatalog, projection: Projection) -> None:
        self.o = options
        self.lake = lake
        self.catalog = catalog
        self.proj = projection
        self.upgrades: list[features.Upgrade] = []  # Delta features turned on during this micro-batch
        self.driver: DriverDdl | None = None  # DDL the driver commits itself (`ddldriver`), set by `tablewrites`

    def create(self, t: TableInfo, path: str, version: int | None = None) -> None:
        """The table, unless the lake has it; `version`: created by a DDL, marked applied in the same commit."""
        self.lake.create_table(path, lambda: self.proj.schema(t), version)

    def create_all(self, steps: list[tuple[Ddl, int]], *, defer: bool = False) -> None:
        """The new plain tables of a run of CREATE TABLE (each DDL, its version) made at once (`Lake.create_tables`);
        `apply` of each then finds its table made. One that is not made so is left to its `apply` (which makes it,
        or reports it as that DDL's failure). `defer`: made by their first commit (`Lake.create_tables`)."""
        lake = self.lake
        todo: list[tuple[str, Callable[[], Any], int]] = []
        for d, version in steps:
            t = d.after
            if t is None or not t.columns or d.ddl_type != "ActionCreateTable":
                continue
            path = lake.path(d.database or t.schema, d.table or t.table)
            if lake.txn_version(path) < version and not lake.exists(path):
                todo.append((path, lambda t=t: self.proj.schema(t), version))
        try:
            lake.create_tables(todo, defer=defer)
        except Exception:  # noqa: BLE001 - each DDL's own `apply` makes its table again and says why it cannot
            return

    def made(self, d: Ddl, version: int) -> bool:
        """Whether a CREATE TABLE's table is there at its version already (`create_all` made it): its `apply` would
        do nothing."""
        t = d.after
        if t is None or d.ddl_type != "ActionCreateTable":
            return False
        return self.lake.txn_version(self.lake.path(d.database or t.schema, d.table or t.table)) >= version

    def apply(self, d: Ddl, version: int) -> None:
        """A DDL applied as the table's commit `version`; a failure stops the consumer, or with
        on_ddl_error=skip is recorded among the dead letters. Another writer's commit that came first (a user's
        OPTIMIZE or DELETE beside the stream: Delta's conflict checker refuses ours, nothing of it committed) has
        it applied again on the table's new version, as a MERGE is (`tablewrites`); a step it had committed is
        found done by its txn version."""
        for attempt in range(WRITE_ATTEMPTS):
            try:
                self._ddl(d, version)
                return
            except ApplyError as e:
                if self.o.on_ddl_error == "stop":
                    raise
                self.record_skipped(d, str(e))
                return
            except Exception as e:
                if attempt + 1 < WRITE_ATTEMPTS and conflicted(e):
                    continue
                self._refused(d, e)
                return

    def _refused(self, d: Ddl, e: Exception) -> None:
        """Delta refused the DDL: the consumer stops, or with on_ddl_error=skip it is recorded."""
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
            if db and lake.names is not None:
                lake.names.drop_database(lake.spark, db)
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
                if self.driver is not None and self.driver.truncate(path, version):
                    return
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
        desired = [f for f in self.proj.schema(t).fields if f.name not in (START_AT, END_AT)]
        if self.driver is not None and self.driver.reconcile(d, path, version, desired,
                                                             lambda n, v: self._value(t, n, v),
                                                             lambda feature: self._noted(feature, d)):
            return
        current = {f.name: f for f in lake.read(path).schema.fields if f.name not in (START_AT, END_AT)}
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

    def _value(self, t: TableInfo, name: str, text: str) -> Any:
        """A column's value as Spark types it (the Python value of `_sql_typed`'s literal), from a local relation:
        Spark folds the projection and collects it without a job."""
        from pyspark.sql import functions as F

        expr = typed(F.lit(text), t.by_name[name].type, json_as_variant=self.o.json_as_variant)
        return self.lake.spark.createDataFrame([(1,)], "x int").select(expr.alias("v")).collect()[0]["v"]

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

    def _noted(self, feature: str, d: Ddl) -> None:
        """A Delta feature the driver turned on for a DDL (`ddldriver`), noted as `_feature` notes Delta's."""
        self.upgrades.append(features.noted(f"{d.database}.{d.table}", feature, d.query or d.ddl_type, d.commit_ts))

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
