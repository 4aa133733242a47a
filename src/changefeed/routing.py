"""Topic names from TiCDC topic expressions (REFERENCE-NOTES §8)."""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, replace
from typing import Any, Protocol

from .config import ConfigError
from .model import Column, Event, Kind, TableInfo
from .mysqltypes import go_format_float32, go_format_float64
from .tablefilter import ColumnFilter, TableFilter

_TOPIC_CHARS = re.compile(r"[^A-Za-z0-9._-]")
_EXPR = re.compile(r"^[A-Za-z0-9._-]*(\{schema\})?[A-Za-z0-9._-]*(\{table\})?[A-Za-z0-9._-]*$")
MAX_TOPIC_LEN = 249


class TopicSource(Protocol):
    """What names a table's topic: a TopicExpression, or a Router (its dispatchers, then its default)."""

    def topic(self, schema: str, table: str) -> str: ...

    def require_table_per_topic(self, protocol: str) -> None: ...


class TopicExpression:
    """`[prefix]{schema}[middle][{table}][suffix]`; substituted names have every character outside
    [A-Za-z0-9._-] replaced by `_`."""

    def __init__(self, expr: str) -> None:
        if not _EXPR.match(expr) or not expr:
            raise ConfigError(f"topic expression {expr!r} is not of the form "
                              "[prefix]{schema}[middle][{table}][suffix] (characters A-Z a-z 0-9 . _ -)")
        self.expr = expr
        self.has_schema = "{schema}" in expr
        self.has_table = "{table}" in expr

    def require_table_per_topic(self, protocol: str) -> None:
        """The Avro protocols register one schema per topic: the expression must name schema and table."""
        if not (self.has_schema and self.has_table):
            raise ConfigError(f"protocol {protocol} needs one table per topic, so the topic expression must "
                              f"contain {{schema}} and {{table}}; {self.expr!r} does not "
                              "(e.g. use 'tidb_{schema}_{table}')")

    def glob(self) -> str:
        """Every topic the expression can give, as a glob pattern (what a consumer of them subscribes to)."""
        return self.expr.replace("{schema}", "*").replace("{table}", "*")

    def topic(self, schema: str, table: str) -> str:
        t = self.expr.replace("{schema}", _TOPIC_CHARS.sub("_", schema)).replace(
            "{table}", _TOPIC_CHARS.sub("_", table))
        if len(t) > MAX_TOPIC_LEN:
            raise ConfigError(f"topic {t[:40]}... is longer than {MAX_TOPIC_LEN} characters")
        return t


# ------------------------------------------------------------------------------------------------
# partitions (TiCDC's downstreamadapter/sink/eventrouter/partition, pkg/hash/position_inertia.go)
# ------------------------------------------------------------------------------------------------


class PositionInertia:
    """TiCDC's hash: each Write is CRC32-IEEE over its concatenated arguments, XORed into the running value."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def write(self, *parts: bytes) -> None:
        self.value ^= zlib.crc32(b"".join(parts))


def value_text(col: Column, v: Any) -> bytes:
    """A datum as TiCDC's ColumnValueString renders it for hashing (bytes stay raw)."""
    if isinstance(v, bytes):
        return v
    if isinstance(v, bool):
        return b"1" if v else b"0"
    if isinstance(v, float):
        fmt = go_format_float32 if col.type.name == "float" else go_format_float64
        return fmt(v).encode()
    return str(v).encode("utf-8")


PARTITIONERS = ("default", "table", "ts", "index-value", "rowid", "columns")


class Partitioner:
    """One dispatcher rule's `partition = ...`: which partition a row goes to."""

    def __init__(self, kind: str = "default", index: str = "", columns: list[str] | None = None) -> None:
        kind = (kind or "default").lower()
        if kind not in PARTITIONERS:
            raise ConfigError(f"partition dispatcher {kind!r}: expected one of {', '.join(PARTITIONERS)}")
        if kind == "rowid":
            kind = "index-value"
        if kind == "columns" and not columns:
            raise ConfigError("partition = \"columns\" needs columns = [...]")
        self.kind = kind
        self.index = index
        self.columns = list(columns or [])

    def _key_columns(self, t: TableInfo) -> list[Column]:
        if self.kind == "columns":
            missing = [n for n in self.columns if n not in t.by_name and n.lower() not in
                       {c.name.lower() for c in t.columns}]
            if missing:
                raise ConfigError(f"columns dispatcher: {t.qualified} has no column {', '.join(missing)}")
            lower = {c.name.lower(): c for c in t.columns}
            return [t.by_name.get(n) or lower[n.lower()] for n in self.columns]
        if self.index:
            for idx in t.indexes:
                if idx.name.lower() == self.index.lower():
                    return [t.by_name[n] for n in idx.columns if n in t.by_name]
            raise ConfigError(f"index-value dispatcher: {t.qualified} has no index {self.index!r}")
        keys = set(t.handle_key)
        return [c for c in t.columns if c.name in keys]

    def key_values(self, t: TableInfo, row: dict[str, Any] | None) -> tuple:
        """What decides the partition for a row image (to see whether an UPDATE moves the row)."""
        if self.kind in ("default", "table", "ts") or row is None:
            return ()
        return tuple(row.get(c.name) for c in self._key_columns(t))

    def partition(self, ev: Event, partition_num: int) -> int:
        t = ev.subject
        if t is None or partition_num <= 0:
            return 0
        if self.kind == "ts":
            return ev.commit_ts % partition_num
        h = PositionInertia()
        h.write(t.schema.encode(), t.table.encode())
        if self.kind in ("index-value", "columns"):
            row = ev.after if ev.after is not None else ev.before
            for c in self._key_columns(t):
                v = (row or {}).get(c.name)
                if v is None:
                    continue
                h.write(c.name.encode(), value_text(c, v))
        return h.value % partition_num


@dataclass
class DispatchRule:
    matcher: TableFilter
    topic: TopicExpression | None
    partitioner: Partitioner


class ColumnSelector:
    """TiCDC's `column-selectors`: the first selector whose matcher matches a table drops the row columns
    its column filter does not select, before encoding. Key columns cannot be dropped (TiCDC refuses it)."""

    def __init__(self, selectors: list[tuple[TableFilter, ColumnFilter]] | None = None) -> None:
        self.selectors = selectors or []
        self._views: dict[int, tuple[TableInfo, TableInfo | None]] = {}

    def view(self, t: TableInfo) -> TableInfo | None:
        """The table as the encoder sees it (None: every column is kept)."""
        hit = self._views.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        view = None
        for matcher, columns in self.selectors:
            if matcher.match(t.schema, t.table):
                view = self._select(t, columns)
                break
        if len(self._views) > 4096:
            self._views.clear()
        self._views[id(t)] = (t, view)
        return view

    @staticmethod
    def _select(t: TableInfo, columns: ColumnFilter) -> TableInfo | None:
        dropped = {c.name for c in t.columns if not columns.match(c.name)}
        if not dropped:
            return None
        keys = set(t.handle_key) | {n for i in t.indexes if i.primary or i.unique for n in i.columns}
        for name in (c.name for c in t.columns if c.name in dropped):
            if name in keys:
                raise ConfigError(f"column-selectors: primary key or unique key column {t.schema}.{t.table}.{name} "
                                  "cannot be filtered out")
        return replace(t, columns=[c for c in t.columns if c.name not in dropped],
                       indexes=[i for i in t.indexes if not dropped.intersection(i.columns)])

    def apply(self, ev: Event) -> Event:
        t = ev.table
        if not self.selectors or t is None or ev.kind not in (Kind.INSERT, Kind.UPDATE, Kind.DELETE):
            return ev
        view = self.view(t)
        if view is None:
            return ev
        keep = view.by_name
        return replace(ev, table=view, selected_from=t,
                       before=None if ev.before is None else {k: v for k, v in ev.before.items() if k in keep},
                       after=None if ev.after is None else {k: v for k, v in ev.after.items() if k in keep})


class Router:
    """Topic and partition of each event, as TiCDC's event router decides them.

    The first dispatcher rule whose matcher matches a table decides its topic (else the default topic)
    and its partitioner (else `default`). DDL, WATERMARK and BOOTSTRAP are broadcast (partition None:
    every partition) except where an option says otherwise.
    """

    def __init__(self, default_topic: str, rules: list[DispatchRule] | None = None, partition_num: int = 3,
                 canal_ddl_to_partition_zero: bool = False, column_selector: ColumnSelector | None = None) -> None:
        self.default_topic = default_topic
        self.rules = rules or []
        self.column_selector = column_selector or ColumnSelector()
        self.partition_num = partition_num
        self.canal_ddl_to_partition_zero = canal_ddl_to_partition_zero
        # a protocol whose UPDATE carries no before image (avro: the key is the new one) cannot say that the
        # handle key changed: such updates are split too (TiCDC splits handle-key updates for MQ sinks)
        self.split_key_changes = False
        self._default = Partitioner("default")

    def rule_for(self, schema: str, table: str) -> DispatchRule | None:
        for r in self.rules:
            if r.matcher.match(schema, table):
                return r
        return None

    def topic(self, schema: str, table: str) -> str:
        r = self.rule_for(schema, table)
        if r is not None and r.topic is not None:
            return r.topic.topic(schema, table)
        return self.default_topic

    def topic_globs(self) -> list[str]:
        """Every topic this router can send to: the default topic, then each rule's topic expression as a glob."""
        out = {self.default_topic: None}
        out.update((r.topic.glob(), None) for r in self.rules if r.topic is not None)
        return list(out)

    @property
    def has_topic_rules(self) -> bool:
        return any(r.topic is not None for r in self.rules)

    def require_table_per_topic(self, protocol: str) -> None:
        """TiCDC refuses an Avro changefeed whose dispatchers could map two tables to one topic."""
        if not self.has_topic_rules:
            raise ConfigError(f"protocol {protocol} needs one table per topic: add a dispatcher such as "
                              "{matcher = ['*.*'], topic = \"tidb_{schema}_{table}\"} to the changefeed TOML")
        for r in self.rules:
            if r.topic is not None:
                r.topic.require_table_per_topic(protocol)

    def split_update(self, ev: Event) -> list[Event]:
        """An UPDATE whose partition key changes becomes DELETE + INSERT (TiCDC's split)."""
        t = ev.table
        if ev.kind is not Kind.UPDATE or t is None:
            return [ev]
        r = self.rule_for(t.schema, t.table)
        p = r.partitioner if r else self._default
        if p.key_values(t, ev.before) == p.key_values(t, ev.after) and not (
                self.split_key_changes and ev.before is not None and ev.after is not None
                and any(ev.before.get(k) != ev.after.get(k) for k in t.handle_key)):
            return [ev]
        ts, st, phys = ev.commit_ts, ev.start_ts, ev.physical_table_id
        return [Event(kind=Kind.DELETE, commit_ts=ts, table=t, before=ev.before, start_ts=st, physical_table_id=phys),
                Event(kind=Kind.INSERT, commit_ts=ts, table=t, after=ev.after, start_ts=st, physical_table_id=phys)]

    def partition(self, ev: Event) -> int | None:
        """The partition of a row event; None for messages every partition gets."""
        if ev.kind is Kind.DDL:
            return 0 if self.canal_ddl_to_partition_zero else None
        if ev.kind in (Kind.WATERMARK, Kind.BOOTSTRAP):
            return None
        t = ev.subject
        r = self.rule_for(t.schema, t.table) if t else None
        return (r.partitioner if r else self._default).partition(ev, self.partition_num)
