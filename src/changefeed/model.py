"""The event model every protocol encodes from and decodes to.

Row values are held as the datums TiCDC's encoders receive (REFERENCE-NOTES §0): ints, floats,
decimal/time/json text, bytes for binary columns, enum index, set bitmask, bit as an int.
Rows are dicts keyed by column name in table order; a decoded row may hold only some columns
(a handle-key-only message, say).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from .mysqltypes import ColumnType, make_json_out, make_normalizer
from .rounding import make_storer

Row = dict[str, Any]


def _warn_once(name: str, ctype: ColumnType) -> Callable[[str], None]:
    """One warning per column: a stream of bad values must not flood the log."""
    warned = False

    def warn(why: str) -> None:
        nonlocal warned
        if not warned:
            warned = True
            import logging  # (loaded when first needed: the codec commands start without it)

            logging.getLogger("changefeed.values").warning(
                "column %s %s: %s (as TiDB stores it in non-strict mode)", name, ctype.full_str(), why)

    return warn


_DERIVED = frozenset(("normalize", "store", "store_defined", "to_json"))


@dataclass(slots=True)
class Column:
    name: str
    mysql_type: str  # the full column type as written in CREATE TABLE (or as a protocol gave it)
    charset: str | None = None
    collate: str | None = None
    nullable: bool | None = None  # None: not known (a protocol that does not carry it)
    default: Any = None
    primary_key: bool = False
    unique_key: bool = False
    auto_increment: bool = False
    comment: str | None = None
    type: ColumnType = field(init=False, repr=False, compare=False)
    # an event value to its datum, checked but as given (decoders: what the message says)
    normalize: Callable[[Any], Any] = field(init=False, repr=False, compare=False)
    # the datum as TiDB stores it, for events built here (rounding.py): `store` rounds to the scale/fsp the
    # type text gives (event lines, whose tables may come from a protocol that dropped them), `store_defined`
    # also reads a bare `datetime` as fsp 0 (a real CREATE TABLE: the workload, the binlog source)
    store: Callable[[Any], Any] = field(init=False, repr=False, compare=False)
    store_defined: Callable[[Any], Any] = field(init=False, repr=False, compare=False)
    to_json: Callable[[Any], Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.type = ColumnType.parse(self.mysql_type, self.charset, self.collate)

    def __getattr__(self, name: str) -> Any:
        """The derived functions made at their first use, then held in their slots (read at full speed after): a
        consumer's driver holds thousands of tables' columns and calls none of them, and their closures were most
        of the objects its every full garbage collection walked (17 of a column's 18; bench/RESULTS.md)."""
        if name not in _DERIVED:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        normalize = make_normalizer(self.type)
        warn = _warn_once(self.name, self.type)
        self.normalize = normalize
        self.store = make_storer(self.type, normalize, full_definition=False, warn=warn)
        self.store_defined = make_storer(self.type, normalize, full_definition=True, warn=warn)
        self.to_json = make_json_out(self.type)
        return getattr(self, name)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled as its definition, the derived functions made again (the run job's source process sends its
        tables back: closures do not pickle)."""
        return Column, tuple(getattr(self, f.name) for f in fields(self) if f.init)


@dataclass(slots=True)
class Index:
    name: str
    columns: list[str]
    primary: bool = False
    unique: bool = False


@dataclass(slots=True, eq=False)
class TableInfo:
    schema: str
    table: str
    columns: list[Column] = field(default_factory=list)
    indexes: list[Index] = field(default_factory=list)
    table_id: int | None = None
    version: int | None = None
    charset: str | None = None  # the table's default charset
    # derived, filled by __post_init__
    by_name: dict[str, Column] = field(init=False, repr=False)
    pk_names: list[str] = field(init=False, repr=False)
    handle_key: list[str] = field(init=False, repr=False)
    primary_columns: list[str] = field(init=False, repr=False)  # the primary key in its index's order
    explicit_pk: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Recompute derived facts after columns or indexes change."""
        self.by_name = {c.name: c for c in self.columns}
        for idx in self.indexes:
            if idx.primary:
                for name in idx.columns:
                    if name in self.by_name:
                        self.by_name[name].primary_key = True
                break
        # in table order, as TiCDC lists them (RowChangedEvent.PrimaryKeyColumnNames)
        pk = [c.name for c in self.columns if c.primary_key]
        self.explicit_pk = bool(pk)
        if pk:
            self.pk_names = self.handle_key = pk
            primary = next((idx for idx in self.indexes if idx.primary), None)
            self.primary_columns = list(primary.columns) if primary is not None and set(primary.columns) == set(pk) \
                else pk
            return
        # without a primary key no column has the PRI flag (TiDB's AddIndexColumnFlag sets it for a primary index
        # alone): `pk_names` is empty. TiDB's GetPrimaryKey takes the first unique index whose columns are all NOT
        # NULL for the primary key (`primary_columns`, in the index's order: TiCDC's GetPrimaryKeyColumnNames);
        # TiCDC's handle key (tiflow cdc/model findHandleIndex) is the one such index with the fewest columns, the
        # earliest of a tie
        unique = [idx for idx in self.indexes if idx.unique and idx.columns and all(
            n in self.by_name and self.by_name[n].nullable is False for n in idx.columns)]
        if unique:
            implicit = list(unique[0].columns)
            self.handle_key = list(min(unique, key=lambda i: len(i.columns)).columns)
        else:
            implicit = [c.name for c in self.columns if c.unique_key and c.nullable is False][:1]
            self.handle_key = implicit
        self.pk_names = []
        self.primary_columns = implicit

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.table}"

    def signature(self) -> tuple:
        """Identity of the definition, for caches keyed by table shape."""
        return (
            self.schema,
            self.table,
            self.table_id,
            self.version,
            tuple((c.name, c.mysql_type, c.charset, c.collate, c.nullable, c.primary_key, c.unique_key)
                  for c in self.columns),
            tuple((i.name, tuple(i.columns), i.primary, i.unique) for i in self.indexes),
        )

    def same_definition(self, other: TableInfo | None) -> bool:
        return other is not None and self.signature() == other.signature()


@dataclass(frozen=True, slots=True)
class RowChecksum:
    """A row event's checksums, as TiCDC's integrity.Checksum carries them (`[integrity]` correctness).

    `current` is the CRC32 of the after image, `previous` of the before image (0: none, as TiCDC writes it);
    `version` is the upstream TiDB row's checksum version, `corrupted` TiCDC's verdict on reading the row.
    """

    current: int = 0
    previous: int = 0
    version: int = 0
    corrupted: bool = False


class Kind(StrEnum):
    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"
    DDL = "ddl"
    WATERMARK = "watermark"
    BOOTSTRAP = "bootstrap"


ROW_KINDS = (Kind.INSERT, Kind.UPDATE, Kind.DELETE)


@dataclass(slots=True, eq=False)
class Event:
    """One change event. Which fields are set depends on `kind`:

    insert: table, after; update: table, before, after; delete: table, before;
    ddl: query, ddl_type, table (after) and/or pre_table (before); watermark: commit_ts;
    bootstrap: table.
    """

    kind: Kind
    commit_ts: int = 0
    table: TableInfo | None = None
    pre_table: TableInfo | None = None
    before: Row | None = None
    after: Row | None = None
    query: str | None = None
    ddl_type: str | None = None
    # where the change sits in its source when there is no commit ts to order by (real Debezium's binlog
    # file/pos/row/gtid); None for TiDB/TiCDC sources
    position: dict[str, Any] | None = None
    # the row checksums a message carried (verified by its decoder), or None
    checksum: RowChecksum | None = None
    # the start TSO of the transaction that made a row change, where the source knows it (TiDB; an event line's
    # `startTs`, TiCDC's debezium `source.start_ts`), else None
    start_ts: int | None = None
    # a row of a partitioned table: its partition's table ID (TiDB's PhysicalTableID: the simple protocol's
    # `tableID`, the table ID in its TiKV key), where the source knows it; None: the table's own `table_id`
    physical_table_id: int | None = None
    # the whole table of a row the column selector cut (`table` is then its view): a BOOTSTRAP carries the whole
    # schema, as TiCDC's selector only empties the values (routing.ColumnSelector)
    selected_from: TableInfo | None = None

    @property
    def is_row(self) -> bool:
        return self.kind in ROW_KINDS

    @property
    def subject(self) -> TableInfo | None:
        """The table a message about this event names (for a DDL: after, else before)."""
        return self.table if self.table is not None else self.pre_table

    @property
    def route_table(self) -> TableInfo | None:
        """The table whose topic a message goes to. A DDL goes to the topic of the table before it (TiCDC's
        GetTopicForDDL), so a RENAME TABLE reaches every partition that holds the old name's rows, after them."""
        if self.kind is Kind.DDL and self.pre_table is not None and self.pre_table.table:
            return self.pre_table
        return self.subject
