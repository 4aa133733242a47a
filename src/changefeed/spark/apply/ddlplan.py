"""A DDL as values: its record (`Ddl`), its definitions filled in (`complete`, `interpret`), and what it changes in
a table's columns planned (`plan_columns`). No Spark and no lake: the catalog (`catalog`) learns from these, and
`ddl` carries a plan out on Delta."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ...ddl import TABLE_RENAMING, changes_columns, drops_table, renames_columns
from ...errors import ApplyError
from ...model import TableInfo
from ..types import text_of


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
    elif (d.after is None or not d.after.columns) and changes_columns(d.ddl_type) \
            and (d.database or "", d.table or "") in defs:
        # a copy decoded without its table's definition (a canal-json decoder that never saw the table's
        # CREATE): the statement applied to the definition this consumer holds, as for avro
        try:
            interpret(d, defs)
        except ApplyError:
            pass  # ddl.py names the DDL the stream gave no definition for
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
