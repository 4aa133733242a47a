"""A plain Delta table's files at one version as the driver reads them from its log (`TableFiles`), and why
another writer may not rewrite them (`refusal`): what both log writers (`log_rs`, `log_jvm`) return, and what
`multiwrite` decides by. Values only, no I/O.

A table with column mapping in name mode (what a RENAME or DROP COLUMN turns on in `table-features = "auto"`) is
rewritable too: its files name each column by its physical name (`physical_names`), which a rewrite reads and
writes (and records statistics by), the log keeping nothing else for it. Refusing it sent a renamed table from
the rewrite to a MERGE for the rest of its life: the step in a long run's lag (bench/RESULTS.md, soak).

A table with type widening (what a MODIFY COLUMN that widens a type turns on) is rewritable too: the widening is
in the schema's metadata (`delta.typeChanges`), which a rewrite keeps untouched, and Delta's protocol lets a
writer's files hold the column's current (wide) type; the old files, of the narrow type, are read as the wide
one (`widenings_read`: only the changes Spark's Parquet reader makes itself). Refusing it sent the main
workload's app.orders to Delta's MERGE at 5,000 events/s (bench/RESULTS.md, 2026-11-27 20:07)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import orjson


@dataclass
class TableFiles:
    """A plain Delta table at one version: its schema (JSON), its data files (path relative to the table -> size)
    and why it cannot be written by `multiwrite` (None: it can)."""

    version: int
    schema_json: str
    files: dict[str, int] = field(default_factory=dict)
    refused: str | None = None
    configuration: dict[str, str] = field(default_factory=dict)  # the table's properties (its stats columns...)

    @property
    def size(self) -> int:
        return sum(self.files.values())

    def physical(self) -> dict[str, str] | None:
        """Each column's name in the table's files, by its name in the schema (None: the same names)."""
        return physical_names(self.schema_json, self.configuration.get(MAPPING_MODE, "none"))


MAPPING_MODE = "delta.columnMapping.mode"
PHYSICAL_NAME = "delta.columnMapping.physicalName"
FIELD_ID = "delta.columnMapping.id"


@functools.lru_cache(maxsize=4096)
def physical_names(schema_json: str, mode: str) -> dict[str, str] | None:
    """Top-level column name -> the name its values have in the table's Parquet files, for a table with column
    mapping in name mode (None without column mapping: the names are the same)."""
    if mode.lower() != "name":
        return None
    return {f["name"]: (f.get("metadata") or {}).get(PHYSICAL_NAME, f["name"])
            for f in orjson.loads(schema_json)["fields"]}


def field_ids(schema_json: str) -> dict[str, int]:
    """Top-level column name -> its column mapping id (the Parquet field id Delta's writers give it)."""
    out = {}
    for f in orjson.loads(schema_json)["fields"]:
        i = (f.get("metadata") or {}).get(FIELD_ID)
        if i is not None:
            out[f["name"]] = int(i)
    return out


# table features whose files any writer writes alike, with nothing kept in the log (TIMESTAMP_NTZ: a column type;
# column mapping in name mode: the physical names are in the schema, which a rewrite keeps, see `physical_names`)
REWRITABLE_FEATURES = frozenset({"timestampNtz", "columnMapping", "typeWidening", "typeWidening-preview"})
TYPE_CHANGES = "delta.typeChanges"
_INTEGRAL = ("byte", "short", "integer", "long")
# writer features a protocol upgrade to table features lists for what writer versions 2 to 5 had (appendOnly,
# column invariants, CHECK constraints, CDF, generated columns): each only supported until a property or the schema
# uses it, which is looked for below (a table with TIMESTAMP_NTZ columns given column mapping lists them all)
_LEGACY_WRITER = frozenset({"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns"})


def refusal(protocol: dict[str, Any], metadata: dict[str, Any], adds: list[dict[str, Any]]) -> str | None:
    """Why a table's files cannot simply be rewritten by another writer: a feature whose bookkeeping only
    Delta's own writers keep (deletion vectors, CDC files, type widening, constraints, partitions, column mapping
    by id...). Plain tables, the ones `lake.create_table` makes, have none; a table with TIMESTAMP_NTZ columns has
    only that feature, a table renamed or dropped a column of only column mapping by name (flat columns)."""
    reader, writer = protocol.get("minReaderVersion", 1), protocol.get("minWriterVersion", 2)
    conf = metadata.get("configuration") or {}
    mapped = str(conf.get(MAPPING_MODE, "none")).lower() == "name"
    # reader 2 / writer 5: column mapping without table features (as `table_features` turns it on); writer 5
    # also allows CHECK constraints, generated columns and CDF, each looked for below
    legacy_mapping = mapped and (reader, writer) == (2, 5)
    if not legacy_mapping and (reader not in (1, 3) or writer not in (1, 2, 7)):
        return "table features"
    if reader == 3 and not REWRITABLE_FEATURES.issuperset(protocol.get("readerFeatures") or ()):
        return "table features"
    if writer == 7 and not (REWRITABLE_FEATURES | _LEGACY_WRITER).issuperset(protocol.get("writerFeatures") or ()):
        return "table features"
    schema = metadata.get("schemaString") or ""
    if "delta.invariants" in schema:
        return "column invariants"
    if "delta.generationExpression" in schema or "delta.identity" in schema:
        return "generated columns"
    if metadata.get("partitionColumns"):
        return "partitioned"
    for k, v in conf.items():
        if k.startswith("delta.constraints.") or (k in ("delta.enableChangeDataFeed", "delta.appendOnly")
                                                  and str(v).lower() == "true"):
            return k
        if k == MAPPING_MODE and str(v).lower() not in ("none", "name"):
            return k  # id mode: readers find columns by field id, which a rewrite would have to keep exactly
    if mapped and _nested(schema):
        return "column mapping of nested columns"
    if TYPE_CHANGES in schema and not widenings_read(schema):
        return "type widening Spark's Parquet reader does not make"
    if any(a.get("deletionVector") for a in adds):
        return "deletion vectors"
    return None


def widenings_read(schema_json: str) -> bool:
    """Whether every type change the schema records (`delta.typeChanges`, top-level columns) is one Spark's own
    Parquet reader makes when a file of the old type is read as the new one: an integer to a wider integer, float
    to double, a decimal to one of more precision and the same scale (what TiDB's widening MODIFY COLUMN gives);
    others (to a decimal or double from an integer, a scale raised, date to timestamp) are left to Delta's MERGE."""
    try:
        fields = orjson.loads(schema_json)["fields"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return False
    for f in fields:
        meta = f.get("metadata") or {}
        changes = meta.get(TYPE_CHANGES)
        if changes is None:
            continue
        if isinstance(f.get("type"), dict) or not isinstance(changes, list):
            return False  # a nested column's inner field (fieldPath): not looked into
        for c in changes:
            if not isinstance(c, dict) or c.get("fieldPath") or not widening_read(str(c.get("fromType")),
                                                                                   str(c.get("toType"))):
                return False
    return True


def widening_read(old: str, new: str) -> bool:
    """Whether a file written as `old` reads as `new` without a cast the driver's rewrite must make: the widenings
    Delta's type widening allows that a Parquet reader follows (integers, float to double, decimal precision up)."""
    if old in _INTEGRAL and new in _INTEGRAL:
        return _INTEGRAL.index(old) < _INTEGRAL.index(new)
    if (old, new) == ("float", "double"):
        return True
    a, b = _decimal(old), _decimal(new)
    return a is not None and b is not None and a[1] == b[1] and a[0] <= b[0]


def _decimal(t: str) -> tuple[int, int] | None:
    if not (t.startswith("decimal(") and t.endswith(")")):
        return None
    try:
        p, s = (int(x) for x in t[8:-1].split(","))
    except ValueError:
        return None
    return p, s


def _nested(schema_json: str) -> bool:
    """Whether a schema holds a struct, array or map column (whose inner fields column mapping names too)."""
    try:
        fields = orjson.loads(schema_json)["fields"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return True
    return any(isinstance(f.get("type"), dict) for f in fields)


@functools.lru_cache(maxsize=1024)
def column_names(schema_json: str) -> tuple[str, ...]:
    """A Delta schema's column names, parsed once per schema: a window over many tables asks for each."""
    return tuple(f["name"] for f in orjson.loads(schema_json)["fields"])
