"""The event-line format (JSON Lines): the CLI's public interface for events and messages.

Event line:  {"kind", "commitTs", "table", "preTable", "before", "after", "ddl": {"query", "type"}}
Message line: {"key": null|str|{"$b64"}, "value": null|str|{"$b64"}, "topic"?, "partition"?}
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from .ddl import UnknownDDLType, action_from_query, check_action
from .errors import DecodeError, json_object
from .model import Column, Event, Index, Kind, Row, TableInfo
from .mysqltypes import TypeParseError, ValueError_

# ------------------------------------------------------------------------------------------------
# Messages
# ------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Message:
    """One Kafka-style message as a codec produces it."""

    key: bytes | None
    value: bytes | None
    topic: str | None = None
    partition: int | None = None
    # what the message carries, for routing and reporting (not written to message lines)
    kind: Kind | None = None
    commit_ts: int = 0
    schema: str | None = None
    table: str | None = None
    rows: int = 0


def payload_to_json(b: bytes | None) -> Any:
    if b is None:
        return None
    head = b[:1]
    if head in (b"{", b"["):
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            pass
    return {"$b64": base64.b64encode(b).decode("ascii")}


def payload_from_json(v: Any, name: str) -> bytes | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, dict) and isinstance(v.get("$b64"), str):
        try:
            return base64.b64decode(v["$b64"], validate=True)
        except ValueError:
            raise DecodeError("invalid base64", field=f"{name}.$b64") from None
    raise DecodeError('expected null, a string or {"$b64": ...}', field=name)


def message_to_line(m: Message) -> bytes:
    if m.key is None and m.topic is None and m.partition is None and m.value is not None and m.value[:1] == b"{":
        try:  # the common line, without a dict to build: `{"key":null,"value":"<the JSON payload as text>"}`
            return b'{"key":null,"value":' + orjson.dumps(m.value.decode("utf-8")) + b"}"
        except UnicodeDecodeError:
            pass
    obj: dict[str, Any] = {"key": payload_to_json(m.key), "value": payload_to_json(m.value)}
    if m.topic is not None:
        obj["topic"] = m.topic
    if m.partition is not None:
        obj["partition"] = m.partition
    return orjson.dumps(obj)


def message_from_line(line: bytes | str) -> Message:
    obj = json_object(line, "a message line")
    if "value" not in obj and "key" not in obj:
        raise DecodeError('a message line has "key" and "value"', field="value")
    part = obj.get("partition")
    if part is not None and (not isinstance(part, int) or isinstance(part, bool)):
        raise DecodeError("partition must be an integer", field="partition")
    topic = obj.get("topic")
    if topic is not None and not isinstance(topic, str):
        raise DecodeError("topic must be a string", field="topic")
    return Message(
        key=payload_from_json(obj.get("key"), "key"),
        value=payload_from_json(obj.get("value"), "value"),
        topic=topic,
        partition=part,
    )


# ------------------------------------------------------------------------------------------------
# Tables
# ------------------------------------------------------------------------------------------------


def table_to_json(t: TableInfo) -> dict[str, Any]:
    obj: dict[str, Any] = {"schema": t.schema, "table": t.table}
    if t.table_id is not None:
        obj["tableID"] = t.table_id
    if t.version is not None:
        obj["version"] = t.version
    if t.charset is not None:
        obj["charset"] = t.charset
    cols = []
    for c in t.columns:
        co: dict[str, Any] = {"name": c.name, "mysqlType": c.mysql_type}
        if c.charset is not None:
            co["charset"] = c.charset
        if c.collate is not None:
            co["collate"] = c.collate
        if c.nullable is not None:
            co["nullable"] = c.nullable
        if c.default is not None:  # a binary column's default is bytes: written as a payload is
            co["default"] = {"$b64": base64.b64encode(c.default).decode("ascii")} if isinstance(c.default, bytes) \
                else c.default
        if c.primary_key:
            co["primaryKey"] = True
        if c.unique_key:
            co["uniqueKey"] = True
        if c.auto_increment:
            co["autoIncrement"] = True
        if c.comment:
            co["comment"] = c.comment
        cols.append(co)
    obj["columns"] = cols
    obj["indexes"] = [
        {"name": i.name, "primary": i.primary, "unique": i.unique, "columns": list(i.columns)} for i in t.indexes
    ]
    return obj


def _req(obj: dict, key: str, typ: type | tuple, path: str) -> Any:
    if key not in obj:
        raise DecodeError("missing", field=f"{path}.{key}")
    v = obj[key]
    if not isinstance(v, typ) or isinstance(v, bool) and typ is not bool:
        raise DecodeError(f"expected {getattr(typ, '__name__', typ)}", field=f"{path}.{key}")
    return v


def _opt(obj: dict, key: str, typ: type | tuple, path: str) -> Any:
    v = obj.get(key)
    if v is None:
        return None
    if not isinstance(v, typ) or (isinstance(v, bool) and typ is not bool):
        raise DecodeError(f"expected {getattr(typ, '__name__', typ)}", field=f"{path}.{key}")
    return v


def _default(v: Any, path: str) -> Any:
    """A column's default: bytes where it was written as `{"$b64": ...}`."""
    return payload_from_json(v, f"{path}.default") if isinstance(v, dict) else v


def table_from_json(obj: Any, path: str = "table") -> TableInfo:
    if not isinstance(obj, dict):
        raise DecodeError("expected an object", field=path)
    cols: list[Column] = []
    raw_cols = _opt(obj, "columns", list, path) or []
    for i, rc in enumerate(raw_cols):
        cp = f"{path}.columns[{i}]"
        if not isinstance(rc, dict):
            raise DecodeError("expected an object", field=cp)
        try:
            cols.append(
                Column(
                    name=_req(rc, "name", str, cp),
                    mysql_type=_req(rc, "mysqlType", str, cp),
                    charset=_opt(rc, "charset", str, cp),
                    collate=_opt(rc, "collate", str, cp),
                    nullable=_opt(rc, "nullable", bool, cp),
                    default=_default(rc.get("default"), cp),
                    primary_key=bool(_opt(rc, "primaryKey", bool, cp)),
                    unique_key=bool(_opt(rc, "uniqueKey", bool, cp)),
                    auto_increment=bool(_opt(rc, "autoIncrement", bool, cp)),
                    comment=_opt(rc, "comment", str, cp),
                )
            )
        except TypeParseError as e:
            raise DecodeError(str(e), field=f"{cp}.mysqlType") from None
    idxs: list[Index] = []
    for i, ri in enumerate(_opt(obj, "indexes", list, path) or []):
        ip = f"{path}.indexes[{i}]"
        if not isinstance(ri, dict):
            raise DecodeError("expected an object", field=ip)
        names = _req(ri, "columns", list, ip)
        known = {c.name for c in cols}
        for n in names:
            if not isinstance(n, str) or (cols and n not in known):
                raise DecodeError(f"index column {n!r} is not a column of the table", field=f"{ip}.columns")
        idxs.append(
            Index(
                name=_opt(ri, "name", str, ip) or "",
                columns=list(names),
                primary=bool(_opt(ri, "primary", bool, ip)),
                unique=bool(_opt(ri, "unique", bool, ip)) or bool(_opt(ri, "primary", bool, ip)),
            )
        )
    if len({c.name for c in cols}) != len(cols):
        raise DecodeError("duplicate column names", field=f"{path}.columns")
    return TableInfo(
        schema=_req(obj, "schema", str, path),
        table=_opt(obj, "table", str, path) or "",
        columns=cols,
        indexes=idxs,
        table_id=_opt(obj, "tableID", int, path),
        version=_opt(obj, "version", int, path),
        charset=_opt(obj, "charset", str, path),
    )


# ------------------------------------------------------------------------------------------------
# Events
# ------------------------------------------------------------------------------------------------

_KINDS = {k.value: k for k in Kind}


def row_from_json(table: TableInfo, obj: Any, path: str) -> Row:
    if not isinstance(obj, dict):
        raise DecodeError("a row is a JSON object of column name to value", field=path)
    by_name = table.by_name
    row: Row = {}
    for name, v in obj.items():
        col = by_name.get(name)
        if col is None:
            raise DecodeError(f"no column {name!r} in {table.qualified}", field=f"{path}.{name}")
        try:
            row[name] = col.store(v)  # as TiDB would hold it: rounded to the scale/fsp the table gives
        except ValueError_ as e:
            raise DecodeError(str(e), field=f"{path}.{name}") from None
    return row


def row_to_json(table: TableInfo, row: Row) -> dict[str, Any]:
    by_name = table.by_name
    out: dict[str, Any] = {}
    for name, v in row.items():
        col = by_name.get(name)
        out[name] = col.to_json(v) if col is not None and v is not None else v
    return out


class EventReader:
    """Parses event lines; tables seen before are reused, so a long file parses each table once.

    A table's JSON is most of a row event's line and the same on every line of that table version: a line laid
    out as EventWriter writes it (`"table":` then `,"preTable":`) whose table text was seen before is parsed
    without it (the text is looked up, the rest of the line parsed), about half the JSON work of a row event."""

    def __init__(self) -> None:
        self._tables: dict[bytes, TableInfo] = {}
        self._raw: dict[bytes, TableInfo] = {}  # a table's exact JSON text, as lines carry it

    @property
    def tables_by_text(self) -> dict[bytes, TableInfo]:
        """The tables parsed so far, by their exact JSON text in the lines (a live view, for direct paths)."""
        return self._raw

    def _table(self, obj: Any, path: str) -> TableInfo | None:
        if obj is None:
            return None
        key = orjson.dumps(obj)
        t = self._tables.get(key)
        if t is None:
            t = table_from_json(obj, path)
            if len(self._tables) > 10000:
                self._tables.clear()
            self._tables[key] = t
        return t

    def parse(self, line: bytes | str) -> Event:
        if isinstance(line, bytes):
            a = line.find(b'"table":{')
            b = line.find(b',"preTable":', a) if a > 0 else -1
            if b > 0:
                raw = line[a + 8:b]
                table = self._raw.get(raw)
                if table is not None:
                    try:
                        obj = orjson.loads(line[:a + 8] + b"null" + line[b:])
                    except orjson.JSONDecodeError:
                        obj = None
                    if isinstance(obj, dict) and "table" in obj and obj["table"] is None:
                        return self.from_obj(obj, table)
                obj = json_object(line, "an event line")
                ev = self.from_obj(obj)
                if ev.table is not None and len(raw) < 1 << 20 and _same_json(raw, obj.get("table")):
                    if len(self._raw) > 10000:
                        self._raw.clear()
                    self._raw[raw] = ev.table
                return ev
        return self.from_obj(json_object(line, "an event line"))

    def from_obj(self, obj: dict[str, Any], known: TableInfo | None = None) -> Event:
        """An event from a parsed line; `known`: its table, when the line's table text was seen before."""
        kind = _KINDS.get(obj.get("kind"))  # type: ignore[arg-type]
        if kind is None:
            raise DecodeError(f"unknown kind {obj.get('kind')!r}: expected one of {', '.join(_KINDS)}", field="kind")
        ts = obj.get("commitTs", 0)
        if isinstance(ts, dict) and "$int" in ts:
            digits = ts["$int"]
            ts = int(digits) if isinstance(digits, str) and digits.isdigit() else None
        if not isinstance(ts, int) or isinstance(ts, bool) or not 0 <= ts < 1 << 64:
            raise DecodeError("commitTs must be an unsigned 64-bit integer", field="commitTs")
        table = known if known is not None else self._table(obj.get("table"), "table")
        pre_table = self._table(obj.get("preTable"), "preTable")
        ev = Event(kind=kind, commit_ts=ts, table=table, pre_table=pre_table)
        pos = obj.get("position")
        if isinstance(pos, dict):
            ev.position = pos
        start = obj.get("startTs")
        if start is not None:
            if type(start) is not int or not 0 <= start < 1 << 64:
                raise DecodeError("startTs must be an unsigned 64-bit integer", field="startTs")
            ev.start_ts = start
        phys = obj.get("physicalTableID")
        if phys is not None:
            if type(phys) is not int or not 0 < phys < 1 << 63:
                raise DecodeError("physicalTableID must be a positive 64-bit integer", field="physicalTableID")
            ev.physical_table_id = phys
        if kind in (Kind.INSERT, Kind.UPDATE, Kind.DELETE):
            if table is None:
                raise DecodeError(f"a {kind} needs a table", field="table")
            before, after = obj.get("before"), obj.get("after")
            if kind is not Kind.INSERT:
                if before is None:
                    raise DecodeError(f"a {kind} needs a before image", field="before")
                ev.before = row_from_json(table, before, "before")
            if kind is not Kind.DELETE:
                if after is None:
                    raise DecodeError(f"a {kind} needs an after image", field="after")
                ev.after = row_from_json(table, after, "after")
        elif kind is Kind.DDL:
            ddl = obj.get("ddl")
            if not isinstance(ddl, dict) or not isinstance(ddl.get("query"), str):
                raise DecodeError('a ddl event needs "ddl": {"query": ..., "type": ...}', field="ddl.query")
            ev.query = ddl["query"]
            dtype = ddl.get("type")
            try:
                ev.ddl_type = check_action(dtype) if dtype else action_from_query(ev.query)
            except UnknownDDLType as e:
                raise DecodeError(str(e), field="ddl.type") from None
            if table is None and pre_table is None:
                raise DecodeError("a ddl event needs a table or preTable (at least its schema)", field="table")
        elif kind is Kind.BOOTSTRAP:
            if table is None:
                raise DecodeError("a bootstrap event needs a table", field="table")
        return ev


def event_to_obj(ev: Event, table_cache: dict[int, dict] | None = None) -> dict[str, Any]:
    def tj(t: TableInfo | None) -> Any:
        if t is None:
            return None
        if table_cache is None:
            return table_to_json(t)
        cached = table_cache.get(id(t))
        if cached is None or cached[0] is not t:
            cached = (t, table_to_json(t))
            table_cache[id(t)] = cached  # type: ignore[assignment]
        return cached[1]

    table = ev.table
    return {
        "kind": ev.kind.value,
        "commitTs": ev.commit_ts,
        "table": tj(table),
        "preTable": tj(ev.pre_table),
        "before": None if ev.before is None else row_to_json(table or ev.pre_table, ev.before),  # type: ignore[arg-type]
        "after": None if ev.after is None else row_to_json(table, ev.after),  # type: ignore[arg-type]
        "ddl": {"query": ev.query, "type": ev.ddl_type} if ev.kind is Kind.DDL else None,
        **({"position": ev.position} if ev.position else {}),
        **({"startTs": ev.start_ts} if ev.start_ts is not None else {}),
        **({"physicalTableID": ev.physical_table_id} if ev.physical_table_id is not None else {}),
    }


class EventWriter:
    """Serialises events to lines, each distinct table converted once. A row event's table is written as the
    JSON text made the first time (most of the line, the same on every line of a table version), the rest
    by orjson: the bytes are those `orjson.dumps(event_to_obj(ev))` gives."""

    def __init__(self) -> None:
        self._cache: dict[int, Any] = {}
        self._text: dict[int, tuple[TableInfo, bytes]] = {}

    def line(self, ev: Event) -> bytes:
        table = ev.table
        if table is None or ev.pre_table is not None or ev.position or ev.start_ts is not None \
                or ev.physical_table_id is not None or ev.kind not in _ROW_KINDS:
            return orjson.dumps(event_to_obj(ev, self._cache))
        cached = self._text.get(id(table))
        if cached is None or cached[0] is not table:
            cached = self._text[id(table)] = (table, orjson.dumps(table_to_json(table)))
        before = b"null" if ev.before is None else orjson.dumps(row_to_json(table, ev.before))
        after = b"null" if ev.after is None else orjson.dumps(row_to_json(table, ev.after))
        return b"".join((_ROW_HEAD[ev.kind], str(ev.commit_ts).encode(), b',"table":', cached[1],
                         b',"preTable":null,"before":', before, b',"after":', after, b',"ddl":null}'))


_ROW_KINDS = (Kind.INSERT, Kind.UPDATE, Kind.DELETE)
_ROW_HEAD = {k: b'{"kind":"%s","commitTs":' % k.value.encode() for k in _ROW_KINDS}


def _same_json(raw: bytes, obj: Any) -> bool:
    """Whether `raw` is JSON text for `obj` (a line's table text, before it is trusted on later lines)."""
    try:
        return bool(orjson.loads(raw) == obj)
    except orjson.JSONDecodeError:
        return False


class LineSource:
    """(1-based line number, line) for every non-blank line of a stream, when iterated; `blocks` reads the same
    stream in big pieces of whole lines instead (the CLI's block tier)."""

    def __init__(self, stream: Iterable[bytes]) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        for n, raw in enumerate(self._stream, 1):
            line = raw.strip()
            if line:
                yield n, line

    def blocks(self, size: int = 1 << 18) -> Iterator[bytes] | None:
        """Whole lines joined by newlines (no newline at the end, lines not stripped), a piece of the stream at a
        time, reading what it has (a pipe's block goes on as soon as it has whole lines); None for a stream that is
        not a binary file. 256 KB: measured faster than 1-4 MB (a block and its columns stay in the cache)."""
        read = getattr(self._stream, "read1", None) or getattr(self._stream, "read", None)
        if read is None:
            return None
        return self._blocks(read, size)

    @staticmethod
    def _blocks(read: Any, size: int) -> Iterator[bytes]:
        carry = b""
        while True:
            data = read(size)
            if not data:
                break
            end = data.rfind(b"\n")
            if end < 0:
                carry += data
                continue
            yield b"".join((carry, memoryview(data)[:end]))  # one copy (a slice and a sum would be two)
            carry = data[end + 1:]
        if carry:
            yield carry


def read_lines(stream: Iterable[bytes]) -> LineSource:
    """(1-based line number, line) for every non-blank line, when iterated (see LineSource)."""
    return LineSource(stream)
