"""The CHANGES_SCHEMA columns of a decode task's output batch, filled row by row and handed to Arrow at once
(decode.py, canal_raw.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

# columns most rows leave empty: set by row index, not appended row by row
_SPARSE = ("schema_version", "position", "table_def", "pre_table_def", "ddl", "ddl_type", "error", "key", "value")
_DENSE = ("topic", "partition", "offset", "idx", "kind", "database", "table", "commit_ts")


class MapColumn:
    """A map<string,string> column built from flat key and value lists, not a list of pairs per row: with the
    sparse columns of `Columns`, the raw canal-json path measured much faster on one core (see
    bench/RESULTS.md)."""

    __slots__ = ("offsets", "keys", "values", "nulls")

    def __init__(self) -> None:
        self.offsets: list[int] = [0]
        self.keys: list[str] = []
        self.values: list[str | None] = []
        self.nulls: list[bool] = []

    def add(self, row: dict[str, str | None] | None) -> None:
        if row is None:
            self.nulls.append(True)
        else:
            self.keys.extend(row)
            self.values.extend(row.values())
            self.nulls.append(False)
        self.offsets.append(len(self.keys))

    def add_pairs(self, pairs: list[tuple[str, str | None]] | None) -> None:
        if pairs is None:
            self.nulls.append(True)
        else:
            for k, v in pairs:
                self.keys.append(k)
                self.values.append(v)
            self.nulls.append(False)
        self.offsets.append(len(self.keys))

    def take(self, typ: pa.DataType) -> pa.Array:
        import pyarrow as pa

        arr = pa.MapArray.from_arrays(pa.array(self.offsets, pa.int32()), pa.array(self.keys, pa.string()),
                                      pa.array(self.values, pa.string()), type=typ,
                                      mask=pa.array(self.nulls, pa.bool_()))
        self.__init__()  # type: ignore[misc]
        return arr


class Columns:
    """The CHANGES_SCHEMA columns of one output batch, filled row by row and handed to Arrow at once."""

    def __init__(self) -> None:
        self.dense: dict[str, list[Any]] = {f: [] for f in _DENSE}
        self.sparse: dict[str, dict[int, Any]] = {f: {} for f in _SPARSE}
        self.before = MapColumn()
        self.after = MapColumn()

    def take(self, schema: pa.Schema) -> pa.RecordBatch:
        import pyarrow as pa

        n = len(self.dense["topic"])
        arrays = []
        for field in schema:
            name = field.name
            if name in self.dense:
                arrays.append(pa.array(self.dense[name], field.type))
                self.dense[name] = []
            elif name == "before" or name == "after":
                arrays.append(getattr(self, name).take(field.type))
            else:
                values = self.sparse[name]
                if values:
                    col: list[Any] = [None] * n
                    for i, v in values.items():
                        col[i] = v
                    arrays.append(pa.array(col, field.type))
                    values.clear()
                else:
                    arrays.append(pa.nulls(n, field.type))
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


def arrow_schema() -> pa.Schema:
    import pyarrow as pa

    m = pa.map_(pa.string(), pa.string())
    return pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("idx", pa.int32()),
                      ("kind", pa.string()), ("database", pa.string()), ("table", pa.string()),
                      ("commit_ts", pa.int64()), ("schema_version", pa.int64()), ("position", pa.string()),
                      ("before", m), ("after", m), ("ddl", pa.string()), ("ddl_type", pa.string()),
                      ("table_def", pa.string()), ("pre_table_def", pa.string()), ("error", pa.string()),
                      ("key", pa.binary()), ("value", pa.binary())])
