"""A DDL committed by the driver, as the table's next log file: no Spark job, no Spark-side Delta commit.

Inside a big micro-batch each DDL of a table cost Delta's own work: the table's state rebuilt by Spark (a table the
driver commits has no checksum files), its schema read, an ALTER commit, a second commit marking the DDL applied,
and for an ADD COLUMN ... NOT NULL DEFAULT an UPDATE rewriting the whole table with the default (bench/RESULTS.md).
Where the change is one the log expresses alone, the driver writes it (`DeltaLogs.alter`, a local lake's plain
table): a column added (not under column mapping), renamed or dropped (under column mapping, where the files name
columns by their physical names), a type widened (under type widening: the old files are read as the new type), a
NOT NULL dropped, nothing (an index, a comment: the commit of this consumer's txn alone), a TRUNCATE of an SCD1
table (every file removed). The feature a rename/drop or a widening needs is turned on in the same commit where it
is off (`ddlfeatures`, table-features auto: 6 and 13 Spark jobs through Delta, none here). A default filled into
the rows that predate it is written by the driver too when it holds the table's rows (`driverfiles.Kept`: what its
last rewrite wrote) or the table has none: the rows with the column filled, one file, in the same commit as the
schema. The rows the driver holds follow the DDL (a widened column cast), so the table's next rewrite reads
nothing back. Anything else (a type change that is no such widening, a column added under column mapping, a table
on S3 or the driver does not commit, a default of a type kept out below) is Delta's DDL, as before.
`CHANGEFEED_DRIVER_DDL=0` turns this off.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from .. import table_features as features
from . import ddlfeatures, driverfiles
from .ddlplan import AddColumn, ChangeType, ColumnPlan, DropNotNull, plan_columns
from .deltalog import new_file_name
from .options import END_AT, START_AT
from .tablefiles import column_names

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import types as T

    from .ddlplan import Ddl
    from .lake import Lake

DRIVER_DDL = "CHANGEFEED_DRIVER_DDL"  # "0": every DDL by Delta's own commands
# Spark types whose value (a Python object from Spark's collect) becomes the same Arrow value for any session
_FILLABLE = frozenset({"string", "binary", "boolean", "byte", "short", "integer", "long", "date", "decimal"})


@dataclass(frozen=True)
class Altered:
    """A table's metaData after a DDL: its schema (Delta's JSON), the properties set on it and the features turned
    on (`ddlfeatures`) for the DDL."""

    schema_json: str
    properties: dict[str, str] = field(default_factory=dict)
    features: tuple[str, ...] = ()


def altered(schema_json: str, plan: ColumnPlan, desired: dict[str, Any], mapped: bool, *, auto: bool = False,
            widening: bool = False) -> Altered | None:
    """The table's schema (Delta's JSON) after `plan`, each other field as it was (its metadata kept); `desired`:
    each column's JSON type by name; `mapped`: column mapping is on; `widening`: type widening is on. `auto` (the
    `table-features` mode): a feature the DDL needs is turned on in the same commit, as Delta's SET TBLPROPERTIES
    then its ALTER write it (column mapping for a rename or drop, type widening for a widening type change). None
    where the log alone cannot express it: a column added under column mapping (its id and physical name to
    assign), a rename or drop without column mapping (the files name columns by their names) or a type change
    without type widening, unless `auto`; a type change that is no widening `ddlfeatures.widened` makes."""
    fields: list[dict[str, Any]] = orjson.loads(schema_json)["fields"]
    properties: dict[str, str] = {}
    turned: list[str] = []
    if (plan.renames or plan.drops) and not mapped:
        m = ddlfeatures.mapped_fields(fields) if auto else None
        if m is None:
            return None
        fields, props = m
        properties.update(props)
        turned.append(ddlfeatures.COLUMN_MAPPING)
        mapped = True
    fields = [{**f, "name": plan.renames.get(f["name"], f["name"])} for f in fields if f["name"] not in plan.drops]
    for step in plan.steps:
        if isinstance(step, AddColumn):
            if mapped or step.name not in desired:
                return None
            new = {"name": step.name, "type": desired[step.name], "nullable": True, "metadata": {}}
            at = 0 if step.after is None else 1 + next((i for i, f in enumerate(fields) if f["name"] == step.after), -2)
            if at < 0:
                return None
            fields.insert(at, new)
        elif isinstance(step, DropNotNull):
            for i, f in enumerate(fields):
                if f["name"] == step.name:
                    fields[i] = {**f, "nullable": True}
        else:
            at = next((i for i, f in enumerate(fields) if f["name"] == step.name), None)
            wide = None if at is None or not (auto or widening) or not isinstance(desired.get(step.name), str) \
                else ddlfeatures.widened(fields[at], desired[step.name])
            if at is None or wide is None:
                return None
            fields[at] = wide
            if not widening:
                properties.update(ddlfeatures.WIDENING_PROPERTIES)
                turned.append(ddlfeatures.TYPE_WIDENING)
                widening = True
    return Altered(orjson.dumps({"type": "struct", "fields": fields}).decode(), properties, tuple(turned))


def operation(plan: ColumnPlan) -> str:
    """The commit's operation, as Delta names its own for the same change."""
    if plan.renames:
        return "RENAME COLUMN"
    if plan.drops:
        return "DROP COLUMNS"
    if any(isinstance(s, AddColumn) for s in plan.steps):
        return "ADD COLUMNS"
    return "CHANGE COLUMN" if plan.steps else "SET TRANSACTION"


def rows_after(rows: pa.Table, schema_json: str, renames: dict[str, str], values: dict[str, pa.Array],
               types: dict[str, pa.DataType]) -> pa.Table | None:
    """The rows the driver holds, in the table's new schema: a renamed column under its new name, a dropped one
    gone, a filled one of `values` (one value per row), another new one NULL of its Arrow type (`types`), a widened
    one cast to its type in `types`. None where a column's Arrow type is not known or its values do not cast."""
    import pyarrow as pa

    by = {renames.get(f.name, f.name): (rows.column(f.name), f) for f in rows.schema}
    columns, fields = [], []
    for f in orjson.loads(schema_json)["fields"]:
        name, nullable = f["name"], f.get("nullable", True)
        if name in values:
            col: Any = values[name]
        elif name in by:
            col, was = by[name]
            nullable = nullable or was.nullable  # (a NOT NULL dropped)
            if name in types and col.type != types[name]:
                try:
                    col = col.cast(types[name])
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    return None
        elif name in types:
            col = pa.nulls(rows.num_rows, types[name])
            nullable = True
        else:
            return None
        columns.append(col)
        fields.append(pa.field(name, col.type, True if name in values else nullable))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


class DriverDdl:
    """DDL made as the driver's own commits where they can be (see the module); `False` from each: not done, nothing
    committed, and Delta's own DDL then applies it."""

    def __init__(self, lake: Lake, kept: driverfiles.Kept, scd_type: int, table_features: str = features.AUTO) -> None:
        self.lake = lake
        self.kept = kept
        self.scd_type = scd_type
        self.features = table_features  # minimal: no feature turned on (Delta's path rewrites the table instead)
        self.on = os.environ.get(DRIVER_DDL, "1") != "0"

    def _table(self, path: str) -> Any:
        logs = self.lake.logs
        if not self.on or not logs.appends(path):
            return None
        tf = logs.files(path)
        return tf if tf.refused is None else None

    def reconcile(self, d: Ddl, path: str, version: int, desired: list[T.StructField],
                  value: Callable[[str, str], Any], upgraded: Callable[[str], None]) -> bool:
        """The table's columns made those of `desired` (`DdlApplier.reconcile`'s), `value(column, text)`: a default's
        value as Spark types it; `upgraded(feature)`: told of each Delta feature turned on for it (`ddlfeatures`)."""
        from pyspark.sql import types as T

        tf = self._table(path)
        if tf is None:
            return False
        schema = T.StructType.fromJson(orjson.loads(tf.schema_json))
        current = {f.name: f for f in schema.fields if f.name not in (START_AT, END_AT)}
        plan = plan_columns(d, current, desired)
        fills = plan.fills if self.scd_type in (1, 2) else {}
        changed = bool(plan.renames or plan.drops or plan.steps)
        want = {f.name: f.dataType for f in desired}
        alt = altered(tf.schema_json, plan, {n: t.jsonValue() for n, t in want.items()}, tf.physical() is not None,
                      auto=self.features == features.AUTO,
                      widening=str(tf.configuration.get(ddlfeatures.ENABLE_WIDENING, "")).lower() == "true") \
            if changed else None
        if changed and alt is None:
            return False
        schema_json = alt.schema_json if alt is not None else None
        held = self.kept.get(path, tf.version, tf.files)
        if held is not None and held.column_names != [f.name for f in schema.fields]:
            held = None
        rows = None
        if held is not None or (fills and tf.files):
            rows = None if held is None else self._rows(held, schema, schema_json or tf.schema_json, plan, want,
                                                        value)
            if rows is None and fills and tf.files:
                return False  # the rows to fill are not held here: Delta's UPDATE fills them
        logs = self.lake.logs
        added: list[tuple[str, int, int]] = []
        stats = None
        rewrite = bool(fills and tf.files)
        if rewrite:
            assert rows is not None
            folder = logs.local(path)
            assert folder is not None
            added, stats = driverfiles.write_with_stats(rows, folder, new_file_name, schema_json or tf.schema_json,
                                                        tf.configuration)
        now = logs.alter(path, tf, added, version, self.lake.app_id, operation(plan), schema_json, replace=rewrite,
                         stats=stats, properties=alt.properties if alt else None,
                         features=alt.features if alt else ())
        if now is None:
            for name, _, _ in added:  # written here for a commit that was not made
                os.remove(os.path.join(logs.local(path) or "", name))
            return False
        self.lake.committed(path, version)
        for feature in alt.features if alt else ():
            upgraded(feature)
        if rows is not None and tuple(rows.column_names) == column_names(now.schema_json):
            self.kept.put(path, now.version, now.files, rows)
        else:
            self.kept.forget(path)
        return True

    def _rows(self, held: pa.Table, schema: T.StructType, schema_json: str, plan: ColumnPlan,
              want: dict[str, T.DataType], value: Callable[[str, str], Any]) -> pa.Table | None:
        """The held rows after the DDL (`rows_after`), its defaults filled; None where a default's type is not one
        kept here (`_FILLABLE`) or a new column's Arrow type is not known."""
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_type

        types: dict[str, pa.DataType] = {}
        for name, t in want.items():
            if name in schema.fieldNames():
                continue
            # the Arrow type the held rows give a column of the same Spark type (Spark's `toArrow`), else Spark's own
            same = [f.name for f in schema.fields if f.dataType == t and f.name in held.column_names]
            try:
                types[name] = held.schema.field(same[0]).type if same else to_arrow_type(t)
            except Exception:  # noqa: BLE001 - a type Arrow lacks: not held after it
                return None
        for step in plan.steps:
            if isinstance(step, ChangeType):  # a widening: the held values cast to the wider type
                try:
                    types[step.name] = to_arrow_type(step.want)
                except Exception:  # noqa: BLE001 - as above
                    return None
        values: dict[str, pa.Array] = {}
        fills = plan.fills if self.scd_type in (1, 2) else {}
        for name, text in fills.items():
            t = want.get(name)
            if t is None or t.typeName() not in _FILLABLE or name not in types:
                return None
            try:
                values[name] = pa.array([value(name, text)] * held.num_rows, types[name])
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
                return None
        return rows_after(held, schema_json, plan.renames, values, types)

    def truncate(self, path: str, version: int) -> bool:
        """An SCD1 table's TRUNCATE: every file removed, this consumer's txn `version`."""
        tf = self._table(path)
        if tf is None or self.scd_type != 1:
            return False
        now = self.lake.logs.alter(path, tf, [], version, self.lake.app_id, "DELETE", None, replace=True)
        if now is None:
            return False
        self.lake.committed(path, version)
        held = self.kept.get(path, tf.version, tf.files)
        if held is not None:
            self.kept.put(path, now.version, now.files, held.slice(0, 0))
        else:
            self.kept.forget(path)
        return True
