"""A plain Delta table's files at one version as the driver reads them from its log (`TableFiles`), and why
another writer may not rewrite them (`refusal`): what both log writers (`log_rs`, `log_jvm`) return, and what
`multiwrite` decides by. Values only, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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


# table features whose files any writer writes alike, with nothing kept in the log (TIMESTAMP_NTZ: a column type)
REWRITABLE_FEATURES = frozenset({"timestampNtz"})
# writer features a protocol upgrade to table features lists for what writer version 2 had (appendOnly and column
# invariants: both looked for below, in the properties and the schema)
_LEGACY_WRITER = frozenset({"appendOnly", "invariants"})


def refusal(protocol: dict[str, Any], metadata: dict[str, Any], adds: list[dict[str, Any]]) -> str | None:
    """Why a table's files cannot simply be rewritten by another writer: a feature whose bookkeeping only
    Delta's own writers keep (column mapping's physical names, deletion vectors, CDC files, type widening,
    constraints, partitions...). Plain tables, the ones `lake.create_table` makes, have none; a table with
    TIMESTAMP_NTZ columns has only that feature."""
    reader, writer = protocol.get("minReaderVersion", 1), protocol.get("minWriterVersion", 2)
    if reader not in (1, 3) or writer not in (1, 2, 7):
        return "table features"
    if reader == 3 and not REWRITABLE_FEATURES.issuperset(protocol.get("readerFeatures") or ()):
        return "table features"
    if writer == 7 and not (REWRITABLE_FEATURES | _LEGACY_WRITER).issuperset(protocol.get("writerFeatures") or ()):
        return "table features"
    if "delta.invariants" in (metadata.get("schemaString") or ""):
        return "column invariants"
    if metadata.get("partitionColumns"):
        return "partitioned"
    conf = metadata.get("configuration") or {}
    for k, v in conf.items():
        if k.startswith("delta.constraints.") or (k in ("delta.enableChangeDataFeed", "delta.appendOnly")
                                                  and str(v).lower() == "true"):
            return k
        if k == "delta.columnMapping.mode" and v != "none":
            return k
    if any(a.get("deletionVector") for a in adds):
        return "deletion vectors"
    return None
