"""A Delta feature a DDL needs (column mapping for a RENAME/DROP COLUMN, type widening for a widening MODIFY
COLUMN) turned on by the driver inside the DDL's own commit (`ddldriver`), as values: the protocol, the table's
properties and each field's metadata exactly as Delta writes them for `ALTER TABLE ... SET TBLPROPERTIES` (what
`table_features.turn_on` asks) followed by the ALTER itself (tests/spark/apply/test_ddlfeatures.py compares both
logs). Through Delta the first such DDL of a table cost 6 and 13 Spark jobs (5.9 and 7.6 CPU-s inside a 25,000-change
batch: the table's state rebuilt, its properties read, three commits); here it is one log file. A case not written
here (nested columns, ids already assigned, a widening Spark's Parquet reader does not make, a protocol of reader
version 1-2 with writer features) gives None: Delta's own DDL then does it."""

from __future__ import annotations

from typing import Any

from .tablefiles import FIELD_ID, MAPPING_MODE, PHYSICAL_NAME, TYPE_CHANGES, widening_read

COLUMN_MAPPING, TYPE_WIDENING = "columnMapping", "typeWidening"  # (table_features' names)
MAX_COLUMN_ID = "delta.columnMapping.maxColumnId"
ENABLE_WIDENING = "delta.enableTypeWidening"
# the features a legacy protocol's versions stand for, which Delta lists when it moves a table to table features
_READER_OF = {2: ("columnMapping",)}
_WRITER_OF = {2: ("appendOnly", "invariants"), 3: ("checkConstraints",), 4: ("changeDataFeed", "generatedColumns"),
              5: ("columnMapping",), 6: ("identityColumns",)}


def _implied(version: int, of: dict[int, tuple[str, ...]]) -> set[str]:
    return {f for v, names in of.items() if v <= version for f in names}


def protocol_with(protocol: dict[str, Any], feature: str) -> dict[str, Any] | None:
    """The protocol action after `feature` is turned on, as Delta's SET TBLPROPERTIES writes it: column mapping
    asked as `table_features` asks it (reader 2 / writer 5) stays on legacy versions where the table has no table
    features, and is listed with what writer 5 stands for where it has; type widening moves the table to table
    features (reader 3 / writer 7), listing what its legacy versions stood for. None: a protocol not handled here."""
    reader, writer = int(protocol.get("minReaderVersion", 1)), int(protocol.get("minWriterVersion", 2))
    rf = set(protocol.get("readerFeatures") or ())
    wf = set(protocol.get("writerFeatures") or ())
    if (reader >= 3) != (writer >= 7) or reader > 3 or writer > 7:
        return None  # writer features without reader ones (or a version unknown here): left to Delta
    if feature == COLUMN_MAPPING and reader < 3:
        return {"minReaderVersion": max(reader, 2), "minWriterVersion": max(writer, 5)}
    if feature == COLUMN_MAPPING:
        rf.add(COLUMN_MAPPING)
        wf |= _implied(5, _WRITER_OF)
    elif feature == TYPE_WIDENING:
        if reader < 3:
            rf, wf = _implied(reader, _READER_OF), _implied(writer, _WRITER_OF)
        rf.add(TYPE_WIDENING)
        wf.add(TYPE_WIDENING)
    else:
        return None
    return {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": sorted(rf), "writerFeatures": sorted(wf)}


def on(protocol: dict[str, Any], feature: str) -> bool:
    """Whether the protocol has `feature` (listed, or by its legacy versions)."""
    reader, writer = int(protocol.get("minReaderVersion", 1)), int(protocol.get("minWriterVersion", 2))
    if reader >= 3 and writer >= 7:
        return feature in (protocol.get("readerFeatures") or ()) and feature in (protocol.get("writerFeatures") or ())
    return feature in _implied(reader, _READER_OF) and feature in _implied(writer, _WRITER_OF)


def mapped_fields(fields: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, str]] | None:
    """The fields and the properties after column mapping (name mode) is turned on, as Delta assigns them to a table
    that had none: each field an id (1, 2, ... in order) and its own name as its physical name (the names its files
    hold), `delta.columnMapping.maxColumnId` the last id. None: a nested field (Delta numbers inner fields too) or
    a field that has an id already."""
    out = []
    for i, f in enumerate(fields, 1):
        meta = f.get("metadata") or {}
        if isinstance(f.get("type"), dict) or FIELD_ID in meta or PHYSICAL_NAME in meta:
            return None
        out.append({**f, "metadata": {**meta, FIELD_ID: i, PHYSICAL_NAME: f["name"]}})
    return out, {MAPPING_MODE: "name", MAX_COLUMN_ID: str(len(fields))}


def widened(field: dict[str, Any], to_type: str) -> dict[str, Any] | None:
    """The field after ALTER COLUMN ... TYPE `to_type` under type widening: the new type, the change appended to its
    `delta.typeChanges`. None: not a widening Delta makes that Spark's Parquet reader also reads (`widenings_read`:
    an integer to a wider one, float to double, a decimal to more precision at the same scale)."""
    from_type = field.get("type")
    if not isinstance(from_type, str) or not widening_read(from_type, to_type):
        return None
    meta = dict(field.get("metadata") or {})
    meta[TYPE_CHANGES] = [*(meta.get(TYPE_CHANGES) or []), {"toType": to_type, "fromType": from_type}]
    return {**field, "type": to_type, "metadata": meta}


WIDENING_PROPERTIES = {ENABLE_WIDENING: "true"}
