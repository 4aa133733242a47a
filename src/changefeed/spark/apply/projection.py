"""Which of a table's columns the lake holds and how: keys, column_list / except_column_list, the Delta schema
of a definition (with the SCD2 period), and a column's typed value read from a change's image."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..types import table_schema, typed
from .options import END_AT, START_AT

if TYPE_CHECKING:
    from pyspark.sql import Column

    from ...model import TableInfo
    from .catalog import TableCatalog
    from .options import ApplyOptions


class Projection:
    def __init__(self, options: ApplyOptions, catalog: TableCatalog) -> None:
        self.o = options
        self.catalog = catalog

    def keys(self, t: TableInfo) -> list[str]:
        if self.o.keys:
            return list(self.o.keys)
        return list(t.handle_key) or [c.name for c in t.columns]

    def selected(self, name: str, keys: set[str]) -> bool:
        """column_list / except_column_list (key columns always kept)."""
        if name in keys:
            return True
        if self.o.column_list is not None and name not in self.o.column_list:
            return False
        return self.o.except_column_list is None or name not in self.o.except_column_list

    def columns(self, t: TableInfo) -> list[str]:
        keys = set(self.keys(t))
        return [c.name for c in t.columns if self.selected(c.name, keys)]

    def schema(self, t: TableInfo) -> Any:
        """The Delta schema of a table's definition."""
        from pyspark.sql import types as T

        full = table_schema(t, json_as_variant=self.o.json_as_variant)
        keep = set(self.columns(t))
        fields = [f for f in full.fields if f.name in keep]
        if self.o.scd_type == 2:
            fields += [T.StructField(START_AT, T.LongType(), False), T.StructField(END_AT, T.LongType(), True)]
        return T.StructType(fields)

    def value(self, t: TableInfo, name: str, img: str = "s.__img") -> Column:
        """A column's value in an image (a map of texts), typed as the table's column (or one it had)."""
        from pyspark.sql import functions as F

        col = t.by_name.get(name) or self.catalog.known.get((t.schema, t.table), {}).get(name)
        text = F.col(img)[name]
        if col is None:
            return text
        return typed(text, col.type, json_as_variant=self.o.json_as_variant, dialect=self.o.text_dialect)
