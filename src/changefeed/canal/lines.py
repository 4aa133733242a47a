"""canal-json straight between event lines and message lines: the CLI's hot path for rows of tables seen before.

The full path builds an Event per line (eventline.EventReader), encodes it (CanalJSONEncoder) and writes the
message line, and back the same way. Here a table's first line takes the full path; later row lines of the same
table text (encode) or the same table shape (decode) go through a function compiled for that table, from the
line's bytes to the output line's bytes, with no Event, no typed row and no message object in between. Each
column's value goes through the very functions the full path calls (store, format, parse, to_json), except
values that a cheap check shows they would leave unchanged (an int in range, a string, a datetime or decimal
already at the column's fsp or scale). Anything else (another layout, a bad value, a too-large message, an
option the compiled path does not do) returns None, and the caller takes the full path, which also names errors.
The output is byte-identical to the full path's (tests/canal/test_lines.py compares them).
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from .. import gojson
from ..eventline import table_to_json
from ..gojson import go_escape
from ..largemsg import record_length
from ..model import Column, Kind, TableInfo
from ..mysqltypes import Family
from ..mysqltypes.text import _as_text
from ..mysqltypes.values import _DATETIME_RE
from ..rounding import datetime_length, decimal_held, rounds
from ..tso import PHYSICAL_SHIFT
from .encoder import CanalJSONEncoder, _TablePlan
from .rowtext import Mismatch, decode_row_pattern, encode_row_pattern, escaped

# an event line as EventWriter writes a row event: kind, commitTs, then the table (looked up by its text)
_EVENT_HEAD = re.compile(rb'\{"kind":"(insert|update|delete)","commitTs":(0|[1-9][0-9]{0,19}),"table":(?=\{)')
_PRE_TABLE = b',"preTable":null,'
_MESSAGE_HEAD = b'{"key":null,"value":'
_TAIL_KEYS = {"preTable", "before", "after", "ddl"}
_INSERT_MID, _INSERT_TAIL = b',"preTable":null,"before":null,"after":', b',"ddl":null}'
_DELETE_MID, _DELETE_TAIL = b',"preTable":null,"before":', b',"after":null,"ddl":null}'
_ETYPE = {b"insert": b"INSERT", b"update": b"UPDATE", b"delete": b"DELETE"}
_OVERHEAD = record_length(None, b"")
# a row message's text between `"es":` and `,"mysqlType":`: es, ts (not read), sql, sqlType (not read: checked once)
_MESSAGE_MID = re.compile(r'(0|[1-9][0-9]{0,18}),"ts":-?(?:0|[1-9][0-9]{0,19}),"sql":"","sqlType":(\{[^{}]*\})')
_TIDB_TAIL = '],"_tidb":{"commitTs":'
_COMMIT_TS = re.compile("0|[1-9][0-9]{0,19}")
_DML = {"INSERT": Kind.INSERT, "UPDATE": Kind.UPDATE, "DELETE": Kind.DELETE}
_ROW_HEAD = {k: b'{"kind":"%s","commitTs":' % k.value.encode() for k in _DML.values()}


# ------------------------------------------------------------------------------------------------
# Encode: event line -> message line
# ------------------------------------------------------------------------------------------------


def _encode_column(i: int, c: Column, p: Any, env: dict[str, Any], promoted: bool) -> list[str]:
    """Source lines setting x{i} (the column's canal-json text) and, for a promoted column, t{i} (its datum)
    from `v`, the event line's value: `fmt(store(v))`, with a shortcut where the value is as stored."""
    ctype, fam = c.type, c.type.family
    env[f"S{i}"], env[f"F{i}"] = c.store, p.fmt
    guard = None
    fast = "v"
    if fam is Family.INT and p.fmt is str:
        lo, hi = ctype.int_range()
        guard, fast = f"v.__class__ is int and {lo} <= v <= {hi}", "str(v)"
    elif fam is Family.ENUM and ctype.elements and not promoted:
        env[f"E{i}"] = {e: str(n) for n, e in enumerate(ctype.elements, 1) if e != ""}
        guard, fast = f"v.__class__ is str and v in E{i}", f"E{i}[v]"
    elif fam in (Family.STRING, Family.JSON, Family.VECTOR) and p.fmt is _as_text:
        guard = "v.__class__ is str"
    elif fam is Family.BYTES and not promoted and ctype.name not in ("binary", "varbinary") \
            and p.fmt(b"\xff") == "\xff":  # no length to check or pad to; latin-1 text
        env["A2B"] = binascii.a2b_base64  # base64.b64decode(s, validate=True), without its layers
        guard, fast = 'v.__class__ is dict and "$b64" in v', 'A2B(v["$b64"], strict_mode=True).decode("latin-1")'
    elif fam in (Family.DATETIME, Family.TIMESTAMP) and p.fmt is _as_text:
        env["DT"] = _DATETIME_RE.match
        size = f"len(v) == {datetime_length(ctype)} and " if rounds(ctype, False) else ""
        guard = f"v.__class__ is str and {size}v[10:11] == ' ' and DT(v)"
    elif fam is Family.DECIMAL and p.fmt is _as_text and rounds(ctype, False):
        env[f"H{i}"] = decimal_held(ctype).match
        guard = f"v.__class__ is str and v[:1] != '-' and H{i}(v)"
    if promoted:
        general = [f"        t{i} = S{i}(v)", f"        x{i} = None if t{i} is None else F{i}(t{i})"]
        fast_lines = [f"        t{i} = v", f"        x{i} = {fast}"]
        none = [f"        t{i} = x{i} = None"]
    else:
        general = [f"        x{i} = None if (t := S{i}(v)) is None else F{i}(t)"]
        fast_lines = [f"        x{i} = {fast}"]
        none = [f"        x{i} = None"]
    src = [f"    v = row[{c.name!r}]", "    if v is None:", *none]
    if guard is not None:
        src += [f"    elif {guard}:", *fast_lines]
    return src + ["    else:", *general]


def _compile_text_row(plan: _TablePlan) -> Callable[[dict[str, Any]], tuple[dict[str, str | None], tuple]]:
    """A function from an event line's row object (every column) to canal-json's `data` object and the key of
    its sqlType (the value-dependent codes of unsigned integer columns); raises on anything else."""
    env: dict[str, Any] = {}
    src = ["def text_row(row):", f"    if len(row) != {plan.ncols}:", "        raise KeyError"]
    promoted = {id(p) for p in plan.promote_all}
    for i, (c, p) in enumerate(zip(plan.table.columns, plan.cols, strict=True)):
        src += _encode_column(i, c, p, env, id(p) in promoted)
    keys = []
    for i, p in enumerate(plan.cols):
        if id(p) in promoted:
            env[f"P{i}"] = p.promote
            keys.append(f"P{i}(t{i}),")
    data = ", ".join(f"{p.name!r}: x{i}" for i, p in enumerate(plan.cols))
    src.append(f"    return {{{data}}}, ({' '.join(keys)})")
    exec(compile("\n".join(src), f"<canal-json text row {plan.table.qualified}>", "exec"), env)
    return env["text_row"]


class _EncodePlan:
    """What a table's lines need, escaped once for a message line's `value` string."""

    __slots__ = ("plan", "text_row", "row_re", "row_text", "head", "mysql", "java", "fixed")

    def __init__(self, plan: _TablePlan) -> None:
        self.plan = plan
        self.text_row = _compile_text_row(plan)
        got = encode_row_pattern(plan.table, [p.fmt for p in plan.cols], [p.promote for p in plan.cols])
        self.row_re, self.row_text = got if got is not None else (None, None)
        self.head = {k: escaped(plan.head + t) for k, t in _ETYPE.items()}
        self.mysql = escaped(b',"mysqlType":' + plan.mysql_bytes + b',"old":')
        self.java: dict[tuple, tuple[bytes, int]] = {}
        # the length of the value's constant parts (the message's size is checked against max-message-bytes)
        self.fixed = len(b"".join((plan.head, b"INSERT", b'","es":', b',"ts":', b',"sql":"","sqlType":',
                                   b',"mysqlType":', plan.mysql_bytes, b',"old":', b',"data":[', b"]")))

    def java_for(self, key: tuple) -> tuple[bytes, int]:
        """The escaped sqlType object of a row, and its length unescaped."""
        got = self.java.get(key)
        if got is None:
            raw = self.plan.java_bytes if not key else self.plan.java_by_key(key)
            got = self.java[key] = (escaped(raw), len(raw))
        return got


class LineEncoder:
    """Event lines of row events to canal-json message lines, for tables the `reader` already parsed."""

    def __init__(self, encoder: CanalJSONEncoder, tables: dict[bytes, TableInfo]) -> None:
        cfg = encoder.config
        self._encoder = encoder
        self._tables = tables  # a table's exact text in event lines -> its definition (EventReader's cache)
        self._plans: dict[bytes, _EncodePlan] = {}
        self._clock = encoder._clock
        self._limit = encoder._limit
        self._ext = encoder._ext
        # `_tidb.rowkey` (output-row-key) is not in the compiled lines: the full path writes it
        self.enabled = encoder._plain and not encoder._row_key
        self._updates = not cfg.only_output_updated_columns
        self._last_raw, self._last = b"\0", None  # the table of the previous line (most lines are of it)
        self._deletes = not cfg.delete_only_output_handle_key_columns

    def line(self, line: bytes) -> bytes | None:
        """The message line for an event line, or None for the full path (which also names what is wrong)."""
        try:
            return self._line(line)
        except Exception:  # noqa: BLE001 - a line of a shape not foreseen here: the full path decides
            return None

    def _plan_at(self, line: bytes, a: int) -> tuple[_EncodePlan, int] | None:
        """The plan of the table whose text starts at `a`, and where that text ends."""
        raw = self._last_raw
        b = a + len(raw)
        if line.startswith(raw, a) and line.startswith(_PRE_TABLE, b):  # the previous line's table
            return self._last, b
        b = line.find(_PRE_TABLE, a)
        if b < 0:
            return None
        raw = line[a:b]
        ep = self._plans.get(raw)
        if ep is None:
            table = self._tables.get(raw)
            if table is None:
                return None
            ep = _EncodePlan(self._encoder._plan(table))
            if len(self._plans) > 4096:
                self._plans.clear()
            self._plans[raw] = ep
        self._last_raw, self._last = raw, ep
        return ep, b

    def _line(self, line: bytes) -> bytes | None:
        m = _EVENT_HEAD.match(line)
        if m is None:
            return None
        got = self._plan_at(line, m.end())
        if got is None:
            return None
        ep, b = got
        kind = m.group(1)
        ts = int(m.group(2))
        if ts >= 1 << 64:
            return None
        old = b"null"
        data = key = image = None
        if kind == b"insert" and line.startswith(_INSERT_MID, b) and line.endswith(_INSERT_TAIL):
            start, end = b + len(_INSERT_MID), len(line) - len(_INSERT_TAIL)
        elif kind == b"delete" and line.startswith(_DELETE_MID, b) and line.endswith(_DELETE_TAIL):
            if not self._deletes:
                return None
            start, end = b + len(_DELETE_MID), len(line) - len(_DELETE_TAIL)
        else:
            start = end = 0
        if end:
            rm = ep.row_re.fullmatch(line, start, end) if ep.row_re is not None else None
            if rm is not None and (line.isascii() or line.decode("utf-8")):  # (bad UTF-8 raises)
                try:
                    data, key = ep.row_text(rm)  # type: ignore[misc]
                except Mismatch:
                    pass
            if data is None:
                image = orjson.loads(line[start:end])
        elif kind == b"update" and self._updates:
            rest = orjson.loads(b"{" + line[b + 1:])
            if rest.keys() != _TAIL_KEYS or rest["ddl"] is not None or rest["preTable"] is not None:
                return None
            before, image = rest["before"], rest["after"]
            if before.__class__ is not dict:
                return None
            old_json = orjson.dumps(ep.text_row(before)[0])
            old_json = go_escape(old_json)
            old = b"[" + escaped(old_json) + b"]"
        else:
            return None
        if data is None:
            if image.__class__ is not dict:
                return None
            row, key = ep.text_row(image)
            data = orjson.dumps(row)
        data = escaped(go_escape(data))
        java, java_len = ep.java_for(key)
        es, now = b"%d" % (ts >> 18), b"%d" % self._clock()
        tidb = b',\\"_tidb\\":{\\"commitTs\\":%d}}' % ts if self._ext else b"}"
        # the value's length, escaped: at least its own (a message near the limit takes the full path)
        if _OVERHEAD + ep.fixed + len(es) + len(now) + java_len + len(old) + len(data) + len(tidb) > self._limit:
            return None
        return b"".join((
            _MESSAGE_HEAD, b'"', ep.head[kind], b'\\",\\"es\\":', es, b',\\"ts\\":', now,
            b',\\"sql\\":\\"\\",\\"sqlType\\":', java, ep.mysql, old, b',\\"data\\":[', data, b"]", tidb, b'"}',
        ))


# ------------------------------------------------------------------------------------------------
# Decode: message line -> event line
# ------------------------------------------------------------------------------------------------


def _compile_json_row(shape: _Shape) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A function from a canal-json row object (every column) to the event line's row object:
    `to_json(parse(text))` per column, as the full path does, with shortcuts for text that stays itself."""
    env: dict[str, Any] = {}
    body = []
    for i, c in enumerate(shape.table.columns):
        parse = shape.parsers[c.name]
        env[f"P{i}"], env[f"J{i}"] = parse, c.to_json
        fam = c.type.family
        if fam in (Family.STRING, Family.JSON, Family.VECTOR) and parse is _as_text:
            expr = f"v{i} if v{i}.__class__ is str else J{i}(P{i}(v{i}))"
        else:
            expr = f"None if (t := P{i}(v{i})) is None else J{i}(t)"
        body.append(f"        {c.name!r}: None if (v{i} := obj[{c.name!r}]) is None else {expr},")
    src = "def json_row(obj):\n    return {\n" + "\n".join(body) + "\n    }\n"
    exec(compile(src, f"<canal-json json row {shape.table.qualified}>", "exec"), env)
    return env["json_row"]


if TYPE_CHECKING:  # (the decoder's modules are not loaded for encoding)
    from .decoder import CanalJSONDecoder, _Shape

    _Layout = tuple[_Shape, str, str, re.Pattern[str], Callable[[tuple], str], bytes, tuple]


class LineDecoder:
    """canal-json message lines of full rows to event lines, for table shapes the decoder already knows."""

    def __init__(self, decoder: CanalJSONDecoder) -> None:
        self._decoder = decoder
        self._rows: dict[int, tuple[_Shape, Callable[[dict[str, Any]], dict[str, Any]], bytes]] = {}
        self.enabled = decoder._compression == "none"
        # a message's text up to `,"pkNames":` -> the shape of its table, the text up to the type and from
        # mysqlType to the row, the row's pattern and writer, the event line's `,"table":...`, the shape's key
        self._patterns: dict[str, _Layout | None] = {}
        self._sql_types: set[str] = set()  # sqlType texts seen to be JSON objects (the decoder does not read them)
        self.last: _Layout | None = None  # the layout of the table of the last message taken (the block tier's)

    def _learn(self, shape: _Shape, key: tuple[str, str]) -> None:
        """The layout of a table's messages as TiCDC writes them, after one took the parsed path: its constant
        text (up to `es`, and from `mysqlType` to the row), and the pattern of the row."""
        db, tb = key
        prefix = '{"id":0,"database":' + gojson.dumps(db).decode() + ',"table":' + gojson.dumps(tb).decode()
        if prefix in self._patterns:
            self.last = self._patterns[prefix]
            return
        if len(shape.names) != len(shape.parsers):
            return
        if len(self._patterns) > 4096:
            self._patterns.clear()
        got = decode_row_pattern(shape.table, shape.names, shape.parsers, 0)
        if got is None:
            self._patterns[prefix] = None
            return
        row, build = got
        head = prefix + ',"pkNames":' + gojson.dumps(shape.pk or None).decode() + ',"isDdl":false,"type":"'
        mid = ',"mysqlType":' + gojson.dumps(shape.mysql_types).decode() + ',"old":null,"data":['
        table = b',"table":' + orjson.dumps(table_to_json(shape.table))
        self._patterns[prefix] = self.last = (shape, head, mid, re.compile(row), build, table, key)

    def _matched(self, value: str) -> tuple[str, bytes] | None:
        """The event line of a message laid out as its table's first (constant text, a row its pattern
        matches), or None."""
        got = self._patterns.get(value[:value.find(',"pkNames":')])
        if got is None:
            return None
        shape, head, mid, row_re, build, table, key = got
        if value.startswith(head + 'INSERT","es":'):
            kind = "insert"
        elif value.startswith(head + 'DELETE","es":'):
            kind = "delete"
        else:
            return None
        m = _MESSAGE_MID.match(value, len(head) + 13)
        if m is None or not value.startswith(mid, m.end()) or self._decoder._fast.get(key) is not shape:
            return None
        sql_type = m.group(2)
        if sql_type not in self._sql_types:
            if orjson.loads(sql_type).__class__ is not dict:
                return None
            if len(self._sql_types) > 4096:
                self._sql_types.clear()
            self._sql_types.add(sql_type)
        if value.endswith("]}"):  # no _tidb: the commit ts is es's
            end = len(value) - 2
            es = int(m.group(1))
            if es >= 1 << (64 - PHYSICAL_SHIFT):
                return None
            ts = es << PHYSICAL_SHIFT
        else:
            end = value.rfind(_TIDB_TAIL)
            commit = value[end + len(_TIDB_TAIL):-2]
            if end < 0 or not value.endswith("}}") or not _COMMIT_TS.fullmatch(commit):
                return None
            ts = int(commit)
            if ts >= 1 << 64:
                return None
        rm = row_re.fullmatch(value, m.end() + len(mid), end)
        if rm is None:
            return None
        self.last = got
        try:
            row = build(rm.groups())
        except Exception:  # noqa: BLE001 - a value the pattern could not check: the parsed path decides
            return None
        if kind == "insert":
            return kind, b"".join((b'{"kind":"insert","commitTs":%d' % ts, table,
                                   b',"preTable":null,"before":null,"after":', row.encode(), b',"ddl":null}'))
        return kind, b"".join((b'{"kind":"delete","commitTs":%d' % ts, table, b',"preTable":null,"before":',
                               row.encode(), b',"after":null,"ddl":null}'))

    def _compiled(self, shape: _Shape) -> tuple[Callable[[dict[str, Any]], dict[str, Any]], bytes]:
        got = self._rows.get(id(shape))
        if got is None or got[0] is not shape:
            if len(self._rows) > 4096:
                self._rows.clear()
            got = self._rows[id(shape)] = (shape, _compile_json_row(shape),
                                           b',"table":' + orjson.dumps(table_to_json(shape.table)))
        return got[1], got[2]

    def line(self, line: bytes) -> tuple[str, bytes] | None:
        """(the event's kind, its event line) for a message line, or None for the full path (which also names
        what is wrong)."""
        try:
            return self._line(line)
        except Exception:  # noqa: BLE001 - a message of a shape not foreseen here: the full path decides
            return None

    def _line(self, line: bytes) -> tuple[str, bytes] | None:
        if not line.startswith(_MESSAGE_HEAD) or line[20:21] != b'"':
            return None
        try:
            value = orjson.loads(line[20:-1])
            if line[-1:] != b"}" or value.__class__ is not str:
                return None
            got = self._matched(value)
            if got is not None:
                return got
            msg = orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
        if msg.__class__ is not dict or msg.get("isDdl") is not False:
            return None
        got = self._decoder.fast_row(msg)
        if got is None:
            return None
        shape, kind, ts, d, old = got
        key = (msg["database"], msg["table"])
        json_row, table = self._compiled(shape)
        self._learn(shape, key)  # type: ignore[arg-type]
        try:
            row = orjson.dumps(json_row(d))
            if kind is Kind.UPDATE:
                before, after = orjson.dumps(json_row(old)), row  # type: ignore[arg-type]
            elif kind is Kind.DELETE:
                before, after = row, b"null"
            else:
                before, after = b"null", row
        except Exception:  # noqa: BLE001 - a value the parsers refuse: the full path names it
            return None
        return kind.value, b"".join((_ROW_HEAD[kind], b"%d" % ts, table, b',"preTable":null,"before":', before,
                                     b',"after":', after, b',"ddl":null}'))
