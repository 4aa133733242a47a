"""Which of a table's columns the lake holds and how: keys, column_list / except_column_list, the Delta schema
of a definition (with the SCD2 period), and a column's typed value read from a change's image."""

from __future__ import annotations

from collections.abc import Callable
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
        self._memo: dict[tuple, tuple[tuple, Any]] = {}  # see `memo`

    def memo(self, t: TableInfo, cols: list[str], build: Callable[[], Any], *tag: Any) -> Any:
        """What `build` makes of a table definition's columns (Column objects: each a call into the JVM), made
        once per definition (a DDL brings a new TableInfo object), columns and `tag`, and per definition of each
        column it lacks (`value` reads those from the catalog's columns of the table's past)."""
        key = (t, tuple(cols), *tag)
        past = self.catalog.known.get((t.schema, t.table), {})
        deps = tuple(past.get(c) for c in cols if c not in t.by_name)
        hit = self._memo.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], deps, strict=True)):
            return hit[1]
        if len(self._memo) > 1024:
            self._memo.clear()
        made = build()
        self._memo[key] = (deps, made)
        return made

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

    def value(self, t: TableInfo, name: str, img: str = "s.__img", text: Column | None = None) -> Column:
        """A column's value in an image (a map of texts; or its `text`, read already), typed as the table's
        column (or one it had)."""
        from pyspark.sql import functions as F

        col = t.by_name.get(name) or self.catalog.known.get((t.schema, t.table), {}).get(name)
        if text is None:
            text = F.col(img)[name]
        if col is None:
            return text
        return typed(text, col.type, json_as_variant=self.o.json_as_variant, dialect=self.o.text_dialect)


def jvm_columns(spark: Any, cols: list[Column | str]) -> Any:
    """A select list as one JVM Seq, to be built once and reused (`select`): PySpark passes a Python list to the JVM
    element by element, a py4j call for each (and one more for each name), on every select."""
    from pyspark.sql.classic.column import _to_java_column, _to_seq

    return _to_seq(spark.sparkContext, cols, _to_java_column)


def select(df: Any, seq: Any) -> Any:
    """`df.select(...)` of a select list made by `jvm_columns`: one py4j call."""
    from pyspark.sql.classic.dataframe import DataFrame

    return DataFrame(df._jdf.select(seq), df.sparkSession)


class Image:
    """A change's image (a map of texts) read column by column. Spark finds a map's key by scanning its keys
    (JFR: ~7.5% of the JVM's samples in a volume run), so where the image's keys are the table's columns in
    their order (canal-json's rows as TiCDC writes them: `data` in the table's column order) a value is read by
    its position: one comparison of the key array per row, then no scan. Any other image is read by key."""

    def __init__(self, t: TableInfo, img: str) -> None:
        from pyspark.sql import functions as F

        self.map = F.col(img)
        names = [c.name for c in t.columns]
        self.pos = {n: i for i, n in enumerate(names)}
        # string literals reach Spark's generated code by reference: the same code for every table
        self.in_order = F.map_keys(self.map) == F.array(*[F.lit(n) for n in names]) if names else None

    def text(self, name: str) -> Column:
        from pyspark.sql import functions as F

        i = self.pos.get(name)
        by_key = self.map[name]
        if i is None or self.in_order is None:
            return by_key
        return F.when(self.in_order, F.map_values(self.map)[i]).otherwise(by_key)

    def has(self, name: str) -> Column:
        """Whether the image holds the column (an image of only the updated columns may not)."""
        from pyspark.sql import functions as F

        held = F.map_contains_key(self.map, name)
        if name not in self.pos or self.in_order is None:
            return held
        return self.in_order | held
