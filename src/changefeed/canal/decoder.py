"""canal-json decoder: TiCDC's output (any version, with or without `_tidb`) and official Canal's.

canal-json carries no table definition, so the decoder rebuilds one from each message (column
order from `data`, types from `mysqlType`, keys from `pkNames`) and caches it; a DDL on a table
drops its cached definition, as TiCDC's own decoder does. Lossy points: without `_tidb` the commit
ts is only `es << 18`; enum/set names are unknown unless `mysqlType` carries the full type.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from ..compression import decompress
from ..config import CodecConfig
from ..ddl import CANAL_DDL_TYPES, action_from_canal, drops
from ..errors import DecodeError, field_offset, json_object
from ..model import Column, Event, Index, Kind, Row, TableInfo
from ..mysqltypes import ColumnType, TypeParseError, ValueError_, make_text_parser
from ..tso import PHYSICAL_SHIFT

if TYPE_CHECKING:
    from ..sqlschema import SchemaTracker

_DML = {"INSERT": Kind.INSERT, "UPDATE": Kind.UPDATE, "DELETE": Kind.DELETE}
_NO_CHANGE = frozenset(("QUERY", "XACOMMIT", "XAROLLBACK", "GTID", "MHEARTBEAT"))  # Canal types with no row
_UPDATE = Kind.UPDATE
_DELETE = Kind.DELETE


class ClaimCheckReader(Protocol):
    def read(self, location: str) -> bytes: ...


class _Shape:
    """A table as rebuilt from messages, with a text parser per column."""

    __slots__ = ("table", "parsers", "mysql_types", "pk", "fast", "names")

    def __init__(self, table: TableInfo, mysql_types: dict[str, str], pk: list[str]) -> None:
        self.table = table
        self.mysql_types = mysql_types
        self.pk = pk
        self.parsers: dict[str, Callable[[str], Any]] = {
            c.name: make_text_parser(c.type, "latin1") for c in table.columns
        }
        self.fast = _compile_row_parser(self.parsers)
        self.names = list(self.parsers)


def _compile_row_parser(parsers: dict[str, Callable[[str], Any]]) -> Callable[[dict[str, Any]], Row]:
    """A row parser unrolled per column, for rows holding exactly the table's columns (the hot path).

    Anything unusual (a missing column, a value of the wrong JSON type, a bad value) raises, and the
    caller then takes the general path, which reports the error precisely.
    """
    env: dict[str, Any] = {}
    body = []
    for i, (name, parse) in enumerate(parsers.items()):
        env[f"p{i}"] = parse
        body.append(f"        {name!r}: None if (v{i} := obj[{name!r}]) is None else p{i}(v{i}),")
    src = "def parse_row(obj):\n    return {\n" + "\n".join(body) + "\n    }\n"
    exec(compile(src, "<canal-json row parser>", "exec"), env)
    return env["parse_row"]


def plain_row_commit_ts(msg: dict[str, Any]) -> int | None:
    """The commit ts of a row message whose `_tidb` holds nothing but it (or that has no `_tidb`: `es`);
    None for anything else (claim-check, handle-key-only ...), which the general path then decodes."""
    tidb = msg.get("_tidb")
    if tidb is None:
        es = msg.get("es")
        if type(es) is not int or not 0 <= es < 1 << (64 - PHYSICAL_SHIFT):
            return None
        return es << PHYSICAL_SHIFT
    ts = tidb.get("commitTs") if type(tidb) is dict and len(tidb) == 1 else None
    if type(ts) is not int or not 0 <= ts < 1 << 64:
        return None
    return ts


class CanalJSONDecoder:
    def __init__(self, config: CodecConfig | None = None, *, claim_check: ClaimCheckReader | None = None) -> None:
        self.config = config or CodecConfig()
        self._claim_check = claim_check
        self._shapes: dict[tuple, _Shape] = {}
        # table definitions learnt from the DDL in the stream (made at the first: its SQL reader is ~7 ms of the
        # start of a command that may read none)
        self._schemas: SchemaTracker | None = None
        self._fast: dict[tuple[str, str], _Shape] = {}  # the last full-row shape of each table
        self._history: dict[tuple[str, str], list[TableInfo]] = {}
        # the DDL applied, by (commit ts, database, table, statement): a copy sent again is not applied twice
        self._applied: dict[tuple[int, str, str, str], tuple[TableInfo | None, TableInfo | None]] = {}
        self._compression = self.config.large_message_handle_compression

    @property
    def _tracker(self) -> SchemaTracker:
        if self._schemas is None:
            from ..sqlschema import SchemaTracker

            self._schemas = SchemaTracker()
        return self._schemas

    def remember(self, t: TableInfo) -> None:
        """Learn a table definition from earlier DDL (a consumer resuming, or one running in pieces).

        Definitions are remembered in commit order; the last is the current one, and the earlier ones still
        serve messages of a partition that lags behind the DDL (canal-json sends DDL to one partition)."""
        self._forget(t.schema, t.table)
        self._tracker.put(t)
        self._history.setdefault((t.schema, t.table), []).append(t)

    def decode(self, value: bytes | None, key: bytes | None = None) -> list[Event]:
        """Events in one message; raises DecodeError naming the field and offset."""
        if value is None:
            raise DecodeError("canal-json messages have a value; this one is null", field="value")
        if self._compression != "none":
            try:
                value = decompress(self._compression, value)
            except ValueError as e:
                raise DecodeError(str(e), offset=0) from None
        msg = json_object(value, "a canal-json message")
        if msg.get("isDdl") is False:
            fast = self._decode_fast(msg)
            if fast is not None:
                return fast
        return self._decode_obj(msg, value)

    def fast_row(self, msg: dict[str, Any]) -> tuple[_Shape, Kind, int, dict[str, Any], dict[str, Any] | None] | None:
        """A DML message of one full row of a table whose last full row had the same mysqlType and pkNames:
        (its shape, kind, commit ts, the row object of `data`, that of `old` for an update), else None. The one
        guard of the fast paths (this decoder's, canal/lines.py's): they skip the general checks after it."""
        shape = self._fast.get((msg.get("database"), msg.get("table")))
        if shape is None:
            return None
        kind = _DML.get(msg.get("type"))  # type: ignore[arg-type]
        data = msg.get("data")
        if kind is None or type(data) is not list or len(data) != 1:
            return None
        if msg.get("mysqlType") != shape.mysql_types or (msg.get("pkNames") or []) != shape.pk:
            return None
        ts = plain_row_commit_ts(msg)
        if ts is None:
            return None
        ncols = len(shape.parsers)
        d = data[0]
        if type(d) is not dict or len(d) != ncols:  # same count, and the parser finds every name: same columns
            return None
        old = None
        if kind is _UPDATE:
            olds = msg.get("old")
            if type(olds) is not list or len(olds) != 1 or type(olds[0]) is not dict or len(olds[0]) != ncols:
                return None
            old = olds[0]
        return shape, kind, ts, d, old

    def _decode_fast(self, msg: dict[str, Any]) -> list[Event] | None:
        """One full row of the table the previous message was about: skip the general checks.

        Returns None whenever anything differs; the general path then decodes (and reports errors).
        """
        got = self.fast_row(msg)
        if got is None:
            return None
        shape, kind, ts, d, old = got
        t = shape.table
        try:
            row = shape.fast(d)
            if kind is _UPDATE:
                return [Event(kind, ts, t, None, shape.fast(old), row)]  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - the general path names the problem
            return None
        if kind is _DELETE:
            return [Event(kind, ts, t, None, row)]
        return [Event(kind, ts, t, None, None, row)]

    # ------------------------------------------------------------------------------------------
    def _fail(self, raw: bytes, fld: str, reason: str) -> DecodeError:
        return DecodeError(reason, field=fld, offset=field_offset(raw, fld.split(".")[0].split("[")[0]))

    def _decode_obj(self, msg: dict[str, Any], raw: bytes) -> list[Event]:
        etype = msg.get("type")
        if not isinstance(etype, str):
            raise self._fail(raw, "type", "missing or not a string")
        is_ddl = msg.get("isDdl", False)
        if not isinstance(is_ddl, bool):
            raise self._fail(raw, "isDdl", "expected true or false")
        tidb = msg.get("_tidb")
        if tidb is not None and not isinstance(tidb, dict):
            raise self._fail(raw, "_tidb", "expected an object")
        if is_ddl:
            return [self._ddl(msg, raw, etype, tidb)]
        if etype == "TIDB_WATERMARK":
            # Go's omitempty leaves a watermark of 0 out of `_tidb` (our encoder writes `{}` too)
            wts = tidb.get("watermarkTs", 0) if tidb is not None else None
            if not _is_u64(wts):
                raise self._fail(raw, "_tidb", "a TIDB_WATERMARK message needs _tidb.watermarkTs")
            return [Event(kind=Kind.WATERMARK, commit_ts=wts)]
        if etype in _NO_CHANGE:
            # official Canal's messages that hold no row: the statement a rows event came from (QUERY with
            # isDdl=false: MariaDB's annotate-rows, MySQL's rows-query events; its rows come in their own messages),
            # an XA transaction's end, a GTID or heartbeat marker (Canal's LogEventConvert, EventType)
            return []
        kind = _DML.get(etype)
        if kind is None:
            raise self._fail(raw, "type", f"unknown event type {etype!r}: expected INSERT, UPDATE, DELETE, "
                             "TIDB_WATERMARK, or a DDL with isDdl=true")
        if tidb is not None and tidb.get("claimCheckLocation"):
            return self._claim_checked(tidb["claimCheckLocation"], raw)
        return self._rows(msg, raw, kind, tidb)

    def _commit_ts(self, msg: dict[str, Any], raw: bytes, tidb: dict | None) -> int:
        if tidb is not None and "commitTs" in tidb:
            ts = tidb["commitTs"]
            if not _is_u64(ts):
                raise self._fail(raw, "_tidb", "_tidb.commitTs must be an unsigned 64-bit integer")
            return ts
        es = msg.get("es", 0)
        if not isinstance(es, int) or isinstance(es, bool) or not 0 <= es < 1 << (64 - PHYSICAL_SHIFT):
            raise self._fail(raw, "es", "expected a millisecond timestamp that fits a TSO (0 <= es < 2^46)")
        return es << PHYSICAL_SHIFT  # lossy: the logical part of the TSO is not carried

    def _ddl(self, msg: dict[str, Any], raw: bytes, etype: str, tidb: dict | None) -> Event:
        if etype not in CANAL_DDL_TYPES:
            raise self._fail(raw, "type", f"unknown DDL type {etype!r}: expected one of "
                             f"{', '.join(sorted(CANAL_DDL_TYPES))}")
        query = msg.get("sql")
        if not isinstance(query, str):
            raise self._fail(raw, "sql", "a DDL message needs the statement in sql")
        schema = msg.get("database") or ""
        table = msg.get("table") or ""
        if not isinstance(schema, str) or not isinstance(table, str):
            raise self._fail(raw, "database", "database and table must be strings")
        action = action_from_canal(etype, query)
        commit_ts = self._commit_ts(msg, raw, tidb)
        key = (commit_ts, schema, table, query)
        done = self._applied.get(key)
        if done is not None:  # a copy of a DDL this decoder applied (a producer's retry, a restarted transcode):
            # applied again it would not fit (RENAME COLUMN of a column renamed) and the table would be forgotten
            return Event(kind=Kind.DDL, commit_ts=commit_ts, query=query, ddl_type=action, table=done[1],
                         pre_table=done[0])
        self._forget(schema, table)
        from ..sqlschema import SchemaError

        try:
            before, after = self._tracker.apply(query, default_schema=schema)
        except SchemaError:
            before = after = None  # the statement does not fit what we know: fall back to the message
            if table:
                self._tracker.forget(schema, table)
        ev = Event(kind=Kind.DDL, commit_ts=commit_ts, query=query, ddl_type=action, table=after, pre_table=before)
        if after is not None and after.columns:  # rows of a copy sent again may follow in this shape
            self._history.setdefault((after.schema, after.table), []).append(after)
        if before is None and after is None:
            t = TableInfo(schema=schema, table=table)
            if drops(action):
                ev.pre_table = t
            else:
                ev.table = t
        if len(self._applied) >= 4096:
            self._applied.pop(next(iter(self._applied)))  # the oldest
        self._applied[key] = (ev.pre_table, ev.table)
        return ev

    def _forget(self, schema: str, table: str) -> None:
        self._fast = {k: v for k, v in self._fast.items() if k[0] != schema or (table and k[1] != table)}
        for k in [k for k in self._shapes if k[0] == schema and (not table or k[1] == table)]:
            del self._shapes[k]

    def _shape(self, msg: dict[str, Any], raw: bytes, first: dict[str, Any]) -> _Shape:
        schema, tname = msg.get("database"), msg.get("table")
        if not isinstance(schema, str) or not isinstance(tname, str):
            raise self._fail(raw, "database", "database and table must be strings")
        mysql_types = msg.get("mysqlType")
        if not isinstance(mysql_types, dict):
            raise self._fail(raw, "mysqlType", "a DML message needs mysqlType, an object of column types")
        pk = msg.get("pkNames") or []
        if not isinstance(pk, list) or not all(isinstance(n, str) for n in pk):
            raise self._fail(raw, "pkNames", "expected an array of column names or null")
        # TiCDC writes mysqlType in random order (a Go map): key on data's columns, then compare the maps
        key = (schema, tname, tuple(first))
        shape = self._shapes.get(key)
        if shape is not None and shape.mysql_types == mysql_types and shape.pk == pk:
            return shape
        names = list(first)
        names.extend(n for n in mysql_types if n not in first)
        tracked = self._tracked(schema, tname, names, mysql_types, pk)
        if tracked is not None:
            shape = _Shape(tracked, dict(mysql_types), pk)
            self._shapes[key] = shape
            return shape
        cols = []
        pkset = set(pk)
        for n in names:
            mt = mysql_types.get(n)
            if not isinstance(mt, str):
                raise self._fail(raw, f"mysqlType.{n}", f"no MySQL type for column {n!r}")
            try:
                cols.append(Column(name=n, mysql_type=mt, primary_key=n in pkset, nullable=False if n in pkset
                                   else None))
            except TypeParseError as e:
                raise self._fail(raw, f"mysqlType.{n}", str(e)) from None
        indexes = [Index(name="PRIMARY", columns=list(pk), primary=True, unique=True)] if pk else []
        shape = _Shape(TableInfo(schema=schema, table=tname, columns=cols, indexes=indexes), dict(mysql_types), pk)
        if len(self._shapes) > 4096:
            self._shapes.clear()
        self._shapes[key] = shape
        return shape

    def _tracked(self, schema: str, tname: str, names: list[str], mysql_types: dict[str, Any],
                 pk: list[str]) -> TableInfo | None:
        """The definition known from this stream's DDL, when it agrees with the message (else None).

        It carries what canal-json leaves out: enum/set members, nullability, defaults, indexes.
        """
        current = self._schemas.get(schema, tname) if self._schemas is not None else None
        for t in [current, *reversed(self._history.get((schema, tname), []))]:
            if t is not None and self._agrees(t, names, mysql_types, pk):
                return t
        return None

    @staticmethod
    def _agrees(t: TableInfo, names: list[str], mysql_types: dict[str, Any], pk: list[str]) -> bool:
        if set(names) != set(t.by_name) and set(names) != set(t.handle_key):
            return False  # a DDL this decoder did not see, or a partial image of another shape
        if pk and set(pk) != set(t.pk_names):
            return False
        for n in names:
            mt = mysql_types.get(n)
            col = t.by_name.get(n)
            if col is None or not isinstance(mt, str):
                return False
            try:
                mtype = ColumnType.parse(mt)
            except TypeParseError:
                return False
            if mtype.name != col.type.name or mtype.unsigned != col.type.unsigned:
                return False
        return True

    def _row(self, shape: _Shape, obj: Any, raw: bytes, fld: str) -> Row:
        if not isinstance(obj, dict):
            raise self._fail(raw, fld, "expected an object of column name to string value")
        parsers = shape.parsers
        if len(obj) == len(parsers):
            try:
                return shape.fast(obj)
            except Exception:  # noqa: BLE001 - the general path below names the problem
                pass
        row: Row = {}
        for name, text in obj.items():
            parse = parsers.get(name)
            if parse is None:
                raise self._fail(raw, f"{fld}.{name}", f"column {name!r} has no mysqlType")
            if text is None:
                row[name] = None
                continue
            if not isinstance(text, str):
                # official Canal writes strings; accept plain JSON numbers for robustness
                if isinstance(text, int | float) and not isinstance(text, bool):
                    text = orjson.dumps(text).decode()
                else:
                    raise self._fail(raw, f"{fld}.{name}", "canal-json values are strings or null")
            try:
                row[name] = parse(text)
            except ValueError_ as e:
                raise self._fail(raw, f"{fld}.{name}", str(e)) from None
        return row

    def _rows(self, msg: dict[str, Any], raw: bytes, kind: Kind, tidb: dict | None) -> list[Event]:
        data = msg.get("data")
        if data is None and isinstance(msg.get("sql"), str) and msg["sql"]:
            raise self._fail(raw, "data", "a DML statement without its rows (official Canal reading a STATEMENT or "
                             "MIXED format binlog): set binlog_format=ROW upstream")
        if not isinstance(data, list) or not data:
            raise self._fail(raw, "data", "a DML message needs data, an array of row objects")
        old = msg.get("old")
        if kind is Kind.UPDATE and (not isinstance(old, list) or len(old) != len(data)):
            raise self._fail(raw, "old", "an UPDATE needs old, an array with one object per data row")
        if not isinstance(data[0], dict):
            raise self._fail(raw, "data[0]", "expected an object")
        shape = self._shape(msg, raw, data[0])
        if list(data[0]) == shape.names:
            self._fast[(shape.table.schema, shape.table.table)] = shape
        ts = self._commit_ts(msg, raw, tidb)
        events = []
        for i, d in enumerate(data):  # TiCDC writes one row; official Canal may batch several
            row = self._row(shape, d, raw, f"data[{i}]")
            ev = Event(kind=kind, commit_ts=ts, table=shape.table)
            if kind is Kind.DELETE:
                ev.before = row  # `old` is null (v5.4+) or a copy of data (before v5.4): data is the image
            elif kind is Kind.INSERT:
                ev.after = row
            else:
                before = self._row(shape, old[i], raw, f"old[{i}]")  # type: ignore[index]
                if len(before) < len(row):
                    # only the changed columns (official Canal, only-output-updated-columns)
                    before = {n: (before[n] if n in before else v) for n, v in row.items()}
                ev.before = before
                ev.after = row
            events.append(ev)
        return events

    def _claim_checked(self, location: str, raw: bytes) -> list[Event]:
        if self._claim_check is None:
            raise self._fail(raw, "_tidb", f"message is in claim-check storage at {location!r}, "
                             "and no claim-check storage is configured to read it")
        try:
            stored = self._claim_check.read(location)
        except OSError as e:
            raise self._fail(raw, "_tidb", f"cannot read claim-check {location!r}: {e}") from None
        full = stored
        if not self.config.claim_check_raw_value:
            try:
                env = orjson.loads(stored)
                full = base64.b64decode(env["value"])
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                raise self._fail(raw, "_tidb", f"claim-check file {location!r} is not TiCDC's "
                                 '{"key","value"} envelope') from None
        return self.decode(full)


def _is_u64(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 64
