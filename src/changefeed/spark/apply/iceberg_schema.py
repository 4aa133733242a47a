"""A Delta table's schema as an Iceberg schema, and whether the Iceberg side can follow it in place: values only,
no I/O (the mirror that writes Iceberg metadata is `iceberg`).

Every Iceberg field is optional: Delta's NOT NULL is a writer's check, and a reader gains nothing from it, while
an old data file without a column added later must still read (as null). Types map one to one where Iceberg has
the type; Iceberg has no 8- or 16-bit integer, so TINYINT and SMALLINT are Iceberg ints (their Parquet values are
INT32 either way). A type Iceberg cannot hold (variant, nested types) is refused in one line.
"""

from __future__ import annotations

import re
from typing import Any

from ...errors import ApplyError

_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")


def iceberg_type(delta_type: Any, where: str) -> Any:
    """The Iceberg type of a Delta (Spark JSON) type; `where` names the column in an error."""
    from pyiceberg import types as it

    simple = {"long": it.LongType(), "integer": it.IntegerType(), "short": it.IntegerType(),
              "byte": it.IntegerType(), "string": it.StringType(), "binary": it.BinaryType(),
              "boolean": it.BooleanType(), "double": it.DoubleType(), "float": it.FloatType(),
              "date": it.DateType(), "timestamp": it.TimestamptzType(), "timestamp_ntz": it.TimestampType()}
    if isinstance(delta_type, str):
        if delta_type in simple:
            return simple[delta_type]
        m = _DECIMAL.fullmatch(delta_type)
        if m:
            return it.DecimalType(int(m.group(1)), int(m.group(2)))
    shown = delta_type if isinstance(delta_type, str) else delta_type.get("type", "nested")
    raise ApplyError(f"{where}: Delta type {shown} has no Iceberg type here (--table-format delta+iceberg)")


def columns(schema_json: dict[str, Any], table: str) -> list[tuple[str, Any]]:
    """(name, Iceberg type) of each column of a Delta schema (its JSON), in order."""
    out = []
    for f in schema_json.get("fields", []):
        meta = f.get("metadata") or {}
        if "delta.columnMapping.physicalName" in meta and meta["delta.columnMapping.physicalName"] != f["name"]:
            raise ApplyError(f"{table}: column {f['name']} is stored under another name (Delta column mapping): "
                             "its Iceberg mirror is not kept (--table-format delta+iceberg needs "
                             "--table-features minimal from the table's start)")
        out.append((f["name"], iceberg_type(f["type"], f"{table}.{f['name']}")))
    return out


def new_schema(cols: list[tuple[str, Any]]) -> Any:
    """An Iceberg schema of those columns (ids 1..n, every field optional)."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField

    return Schema(*(NestedField(i + 1, n, t, required=False) for i, (n, t) in enumerate(cols)))


def same_columns(current: Any, cols: list[tuple[str, Any]]) -> bool:
    """The Iceberg schema has exactly these columns, in this order, of these types."""
    return [(f.name, f.field_type) for f in current.fields] == cols


def evolvable(current: Any, cols: list[tuple[str, Any]]) -> bool:
    """The Iceberg schema can become `cols` in place: each column it keeps has its type or one Iceberg widens it
    to (int -> long, float -> double, a wider decimal of the same scale). Columns may be added or dropped.
    Otherwise (a type changed in a way Iceberg cannot follow) the mirror is made anew."""
    from pyiceberg import types as it

    have = {f.name: f.field_type for f in current.fields}
    for name, t in cols:
        old = have.get(name)
        if old is None or old == t:
            continue
        if isinstance(old, it.IntegerType) and isinstance(t, it.LongType):
            continue
        if isinstance(old, it.FloatType) and isinstance(t, it.DoubleType):
            continue
        if isinstance(old, it.DecimalType) and isinstance(t, it.DecimalType) and old.scale == t.scale \
                and t.precision >= old.precision:
            continue
        return False
    return True
