"""Decoding a change stream on Spark: raw records in, one row per change out (`CHANGES_SCHEMA`).

The protocols' own decoders (the same code the CLI uses, checked byte for byte against TiCDC) run inside
`mapInArrow`, one Spark task per topic-partition, fed Arrow batches in offset order: no per-row pickled UDF,
and every message is decoded with the table definitions its partition carried before it. Definitions learnt
from DDL and BOOTSTRAP messages are kept in a schema store (a folder of JSON lines beside the checkpoint) so
that later micro-batches, and a restarted consumer, start from what earlier ones learnt.

Values travel as text maps (see types.text_of) so that one DataFrame holds every table; `typed()` turns
them into Spark values on the JVM when a table is written.
"""

from __future__ import annotations

import os
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ..canal.decoder import plain_row_commit_ts
from ..codecs import make_decoder
from ..config import build_config
from ..errors import DecodeError
from ..eventline import table_from_json, table_to_json
from ..model import ROW_KINDS, Column, Event, Kind, TableInfo
from ..mysqltypes import make_text_formatter
from .types import text_of

# canal-json row kinds, and the protocol's own value text kept as it is (the "canal" dialect of types.typed)
_CANAL_KINDS = {"INSERT": "insert", "UPDATE": "update", "DELETE": "delete"}

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

CHANGES_SCHEMA = (
    "topic string, partition int, offset long, idx int, kind string, database string, `table` string, "
    "commit_ts long, schema_version long, position string, before map<string,string>, "
    "after map<string,string>, ddl string, ddl_type string, table_def string, pre_table_def string, "
    "error string, key binary, value binary"
)


class SchemaStore:
    """Table definitions learnt from the stream, as JSON lines in a folder every task can read.

    Each writer adds its own file (written aside, then renamed), so tasks never step on each other."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def load(self) -> list[tuple[int, TableInfo]]:
        out: list[tuple[int, TableInfo]] = []
        if not self.folder.is_dir():
            return out
        for f in sorted(self.folder.glob("*.jsonl")):
            for line in f.read_bytes().splitlines():
                rec = orjson.loads(line)
                out.append((rec["ts"], table_from_json(rec["table"])))
        out.sort(key=lambda x: x[0])
        return out

    def add(self, defs: list[tuple[int, TableInfo]]) -> None:
        if not defs:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        name = uuid.uuid4().hex
        tmp = self.folder / f".{name}.tmp"
        tmp.write_bytes(b"".join(orjson.dumps({"ts": ts, "table": table_to_json(t)}) + b"\n" for ts, t in defs))
        os.replace(tmp, self.folder / f"{name}.jsonl")


class _Converters:
    """Datum-to-text functions of one table definition, built once per definition."""

    __slots__ = ("table", "funcs")

    def __init__(self, t: TableInfo, dialect: str = "text") -> None:
        self.table = t
        if dialect == "canal":  # canal-json's own text, as the JVM decoder and the raw fast path keep it
            self.funcs: dict[str, Callable[[Any], str | None]] = {
                c.name: (lambda f: lambda v: None if v is None else f(v))(make_text_formatter(c.type, "latin1"))
                for c in t.columns}
        else:
            self.funcs = {c.name: text_of(c.type) for c in t.columns}

    def text(self, row: dict[str, Any] | None, image: str = "") -> list[tuple[str, str | None]] | None:
        if row is None:
            return None
        f = self.funcs
        try:
            return [(k, f[k](v) if k in f else (None if v is None else str(v))) for k, v in row.items()]
        except Exception:  # noqa: BLE001 - say which column holds what its type cannot
            for k, v in row.items():
                try:
                    f[k](v) if k in f else None
                except Exception as e:  # noqa: BLE001
                    raise DecodeError(f"a {type(v).__name__} value column {k!r} ({self.table.by_name[k].type}) "
                                      f"cannot hold ({type(e).__name__}: {e})", field=f"{image}.{k}") from None
            raise


def def_json(t: TableInfo) -> str:
    """A table definition as a change row carries it, read back once here: a definition the lake could not
    take (a column named by a list ...) is the message's dead letter, not a failed micro-batch."""
    obj = table_to_json(t)
    table_from_json(obj)
    return orjson.dumps(obj).decode()


def decode_partitions(protocol: str, options: dict[str, str] | None = None, store: str | None = None,
                      dialect: str = "text") -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function `mapInArrow` runs: RAW_SCHEMA batches of one task in, CHANGES_SCHEMA batches out.

    `dialect="canal"` (canal-json only): images keep canal-json's own value text. A well-formed row or
    watermark message is then read straight from its JSON, its `data`/`old` objects becoming the images
    (no datum round trip: measured faster in Spark, see bench/RESULTS.md); anything else takes the protocol's
    decoder."""
    opts = dict(options or {})
    raw_canal = dialect == "canal" and protocol == "canal-json"

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        cfg = build_config(protocol, opts)
        schema_store = SchemaStore(store) if store else None
        seed = schema_store.load() if schema_store else []
        decoders: dict[tuple[str, int], Any] = {}
        seeded: dict[tuple[str, int], int] = {}  # per decoder: the latest commit ts of the definitions it was given
        local_defs: dict[tuple[str, int], list[tuple[int, TableInfo]]] = {}  # definitions each decoder learnt here
        waiting: dict[tuple[str, int], deque[tuple[int, bytes | None, bytes | None]]] = {}
        convs: dict[int, _Converters] = {}
        emitted: set[tuple] = set()
        learnt: list[tuple[int, TableInfo]] = []
        out_schema = _arrow_schema()

        def decoder(tp: tuple[str, int], before: int | None = None) -> Any:
            """The decoder of one partition, knowing the stored definitions (only those older than `before`:
            a DDL replayed after a restart is decoded against the definitions that preceded it)."""
            d = decoders.get(tp)
            if d is None or before is not None:
                d = decoders[tp] = make_decoder(cfg)
                remember = getattr(d, "remember", None)
                given = [x for x in seed if before is None or x[0] < before]
                given += [x for x in local_defs.get(tp, []) if before is not None and x[0] < before]
                if remember is not None:
                    for _, t in sorted(given, key=lambda x: x[0]):
                        remember(t)
                seeded[tp] = max((ts for ts, _ in given), default=-1) if remember is not None else -1
                waiting.setdefault(tp, deque())
            return d

        def replayed_ddl(tp: tuple[str, int], d: Any, events: list[Event]) -> int | None:
            """The commit ts of a DDL this decoder already knows the outcome of (a replay), if any."""
            if getattr(d, "pending", 0):
                return None
            for ev in events:
                if ev.kind is Kind.DDL and ev.commit_ts <= seeded.get(tp, -1):
                    return ev.commit_ts
            return None

        def conv(t: TableInfo) -> _Converters:
            c = convs.get(id(t))
            if c is None or c.table is not t:
                if len(convs) > 4096:
                    convs.clear()
                c = convs[id(t)] = _Converters(t, dialect)
            return c

        seen: dict[int, TableInfo] = {}  # definitions already looked at, by identity (a signature per row costs)

        def table_def(t: TableInfo | None) -> tuple[bytes, str] | None:
            """The definition a row carries the first time its shape is seen (noted as emitted by `emit`)."""
            if t is None or not t.columns or seen.get(id(t)) is t:
                return None
            sig = t.signature()
            if sig in emitted:
                if len(seen) > 4096:
                    seen.clear()
                seen[id(t)] = t
                return None
            return sig, def_json(t)

        out = _Columns()
        cols = out.dense
        sparse = out.sparse
        before_col, after_col = out.before, out.after

        def prepare(ev: Event) -> tuple[Event, Any, Any, Any, str | None]:
            """What a change row needs that can still fail on a decoded event (a value its column type does
            not take): done before anything is appended, so a message lands whole or as one dead letter."""
            t = ev.subject
            if ev.kind in ROW_KINDS and t is not None:
                cv = conv(t)
                before, after = cv.text(ev.before, "before"), cv.text(ev.after, "after")
                return ev, before, after, table_def(t), None
            return (ev, None, None, def_json(ev.table) if ev.table is not None else None,
                    def_json(ev.pre_table) if ev.pre_table is not None else None)

        def emit(topic: str, part: int, off: int, idx: int, prepared: tuple[Event, Any, Any, Any, Any]) -> None:
            ev, before, after, tdef, pre = prepared
            t = ev.subject
            c = cols
            i = len(c["topic"])
            c["topic"].append(topic)
            c["partition"].append(part)
            c["offset"].append(off)
            c["idx"].append(idx)
            c["kind"].append(ev.kind.value)
            c["database"].append(t.schema if t is not None else None)
            c["table"].append(t.table if t is not None else None)
            c["commit_ts"].append(ev.commit_ts)
            if t is not None and t.version is not None:
                sparse["schema_version"][i] = t.version
            if ev.position:
                sparse["position"][i] = orjson.dumps(ev.position).decode()
            before_col.add_pairs(before)
            after_col.add_pairs(after)
            if isinstance(tdef, tuple):  # a row's table shape, the first time it is seen
                if tdef[0] not in emitted:
                    emitted.add(tdef[0])
                    sparse["table_def"][i] = tdef[1]
            elif tdef is not None:
                sparse["table_def"][i] = tdef
            if pre is not None:
                sparse["pre_table_def"][i] = pre
            if ev.kind not in ROW_KINDS and ev.table is not None and ev.table.columns \
                    and ev.kind in (Kind.DDL, Kind.BOOTSTRAP):
                learnt.append((ev.commit_ts, ev.table))
                local_defs.setdefault((topic, part), []).append((ev.commit_ts, ev.table))
            if ev.query is not None:
                sparse["ddl"][i] = ev.query
            if ev.ddl_type is not None:
                sparse["ddl_type"][i] = ev.ddl_type

        def emit_all(topic: str, part: int, off: int, events: list[Event], key: bytes | None,
                     value: bytes | None) -> None:
            try:
                ready = [prepare(ev) for ev in events]
            except DecodeError as e:
                fail(topic, part, off, str(e.located(f"{topic}/{part}@{off}")), key, value)
                return
            except Exception as e:  # noqa: BLE001 - whatever else a decoded event cannot become: a dead letter
                fail(topic, part, off, f"{topic}/{part}@{off}: {type(e).__name__}: {e}", key, value)
                return
            for i, r in enumerate(ready):
                emit(topic, part, off, i, r)

        shapes: dict[tuple[str, str], tuple[Any, Any]] = {}  # canal: the last table shape emitted, per table

        def canal_raw(topic: str, part: int, off: int, m: Any) -> bool:
            """A canal-json row or watermark message taken from its JSON as it is; False: not one."""
            if type(m) is not dict or m.get("isDdl"):
                return False
            etype = m.get("type")
            if etype == "TIDB_WATERMARK":
                tidb = m.get("_tidb")
                wts = tidb.get("watermarkTs") if type(tidb) is dict else None
                if type(wts) is not int or not 0 <= wts < 1 << 64:
                    return False
                emit_mark(topic, part, off, wts)
                return True
            kind = _CANAL_KINDS.get(etype) if type(etype) is str else None
            data, mt, db, tbl = m.get("data"), m.get("mysqlType"), m.get("database"), m.get("table")
            if kind is None or type(data) is not list or not data or type(mt) is not dict or not mt \
                    or type(db) is not str or type(tbl) is not str:
                return False
            ts = plain_row_commit_ts(m)  # the decoder's own rule: a claim-check or handle-key-only row is not one
            if ts is None:
                return False
            old = m.get("old") if kind == "update" else None
            if kind == "update" and (type(old) is not list or len(old) != len(data)):
                return False
            pk = m.get("pkNames")
            have = shapes.get((db, tbl))
            if (have is None or have[0] != mt or have[1] != pk) and not _plain_shape(mt, pk):
                return False
            keys = mt.keys()
            for i, d in enumerate(data):
                if type(d) is not dict or d.keys() != keys or not _TEXT_TYPES.issuperset(map(type, d.values())) or (
                        old is not None and (type(old[i]) is not dict
                                             or not _TEXT_TYPES.issuperset(map(type, old[i].values())))):
                    return False
            shape = None
            if have is None or have[0] != mt or have[1] != pk:
                shapes[(db, tbl)] = (mt, pk)
                shape = orjson.dumps({"schema": db, "table": tbl, "mysqlType": mt, "pkNames": pk}).decode()
            c = cols
            for i, d in enumerate(data):
                if shape is not None:
                    sparse["table_def"][len(c["topic"])] = shape
                    shape = None
                c["topic"].append(topic)
                c["partition"].append(part)
                c["offset"].append(off)
                c["idx"].append(i)
                c["kind"].append(kind)
                c["database"].append(db)
                c["table"].append(tbl)
                c["commit_ts"].append(ts)
                if kind == "insert":
                    before_col.add(None)
                    after_col.add(d)
                elif kind == "delete":
                    before_col.add(d)
                    after_col.add(None)
                else:
                    before_col.add(old[i])  # type: ignore[index]
                    after_col.add(d)
            return True

        def emit_mark(topic: str, part: int, off: int, ts: int) -> None:
            c = cols
            for f, v in (("topic", topic), ("partition", part), ("offset", off), ("idx", 0), ("kind", "watermark"),
                         ("database", None), ("table", None), ("commit_ts", ts)):
                c[f].append(v)
            before_col.add(None)
            after_col.add(None)

        def fail(topic: str, part: int, off: int, reason: str, key: bytes | None, value: bytes | None) -> None:
            c = cols
            i = len(c["topic"])
            for f, v in (("topic", topic), ("partition", part), ("offset", off), ("idx", 0), ("kind", "error"),
                         ("database", None), ("table", None), ("commit_ts", None)):
                c[f].append(v)
            before_col.add(None)
            after_col.add(None)
            sparse["error"][i] = reason
            sparse["key"][i] = key
            sparse["value"][i] = value

        for batch in batches:
            topics = batch.column(0).to_pylist()
            parts = batch.column(1).to_pylist()
            offsets = batch.column(2).to_pylist()
            keys = batch.column(3).to_pylist()
            values = batch.column(4).to_pylist()
            for topic, part, off, key, value in zip(topics, parts, offsets, keys, values, strict=True):
                if raw_canal and value is not None:
                    try:
                        if canal_raw(topic, part, off, orjson.loads(value)):
                            continue
                    except Exception:  # noqa: BLE001 - not JSON, or of a shape the fast path does not take:
                        pass  # the decoder names the problem
                tp = (topic, part)
                d = decoder(tp)
                before_pending = getattr(d, "pending", 0)
                try:
                    events = d.decode(value, key)
                    again = replayed_ddl(tp, d, events)
                    if again is not None:
                        d = decoder(tp, before=again)
                        events = d.decode(value, key)
                except DecodeError as e:
                    fail(topic, part, off, str(e.located(f"{topic}/{part}@{off}")), key, value)
                    continue
                except Exception as e:  # a decoder bug must not lose the message either
                    fail(topic, part, off, f"{topic}/{part}@{off}: {type(e).__name__}: {e}", key, value)
                    continue
                after_pending = getattr(d, "pending", 0)
                q = waiting[tp]
                if after_pending > before_pending:
                    q.append((off, key, value))
                released = before_pending - after_pending if after_pending < before_pending else 0
                own = len(events) - released
                emit_all(topic, part, off, events[:own], key, value)
                for ev in events[own:]:
                    woff, wkey, wvalue = q.popleft()
                    emit_all(topic, part, woff, [ev], wkey, wvalue)
            yield out.take(out_schema)

        # DML still waiting for its table's schema at the end of the task: dead letters, not silence
        for (topic, part), q in waiting.items():
            d = decoders[(topic, part)]
            if hasattr(d, "take_pending"):
                d.take_pending()
            for off, key, value in q:
                fail(topic, part, off, f"{topic}/{part}@{off}: DML before any BOOTSTRAP or DDL of its table "
                     "(no schema to decode it with)", key, value)
        if cols["topic"]:
            yield out.take(out_schema)
        if schema_store is not None:
            schema_store.add(learnt)

    return run


def _plain_shape(mysql_types: dict[str, Any], pk: Any) -> bool:
    """Whether canal-json's `mysqlType`/`pkNames` make a table the lake can create (checked once per shape): else
    the decoder takes the message and names the field that is wrong."""
    if pk is not None and (type(pk) is not list or not all(type(n) is str and n in mysql_types for n in pk)):
        return False
    try:
        for n, mt in mysql_types.items():
            if type(mt) is not str:
                return False
            Column(name=n, mysql_type=mt)
    except (ValueError, TypeError):  # TypeParseError is a ValueError
        return False
    return True


# canal-json's own value text: a string or JSON null (anything else takes the decoder)
_TEXT_TYPES = frozenset((str, type(None)))
# columns most rows leave empty: set by row index, not appended row by row
_SPARSE = ("schema_version", "position", "table_def", "pre_table_def", "ddl", "ddl_type", "error", "key", "value")
_DENSE = ("topic", "partition", "offset", "idx", "kind", "database", "table", "commit_ts")


class _MapColumn:
    """A map<string,string> column built from flat key and value lists, not a list of pairs per row: with the
    sparse columns of `_Columns`, the raw canal-json path measured much faster on one core (see
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


class _Columns:
    """The CHANGES_SCHEMA columns of one output batch, filled row by row and handed to Arrow at once."""

    def __init__(self) -> None:
        self.dense: dict[str, list[Any]] = {f: [] for f in _DENSE}
        self.sparse: dict[str, dict[int, Any]] = {f: {} for f in _SPARSE}
        self.before = _MapColumn()
        self.after = _MapColumn()

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


def _arrow_schema() -> pa.Schema:
    import pyarrow as pa

    m = pa.map_(pa.string(), pa.string())
    return pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("idx", pa.int32()),
                      ("kind", pa.string()), ("database", pa.string()), ("table", pa.string()),
                      ("commit_ts", pa.int64()), ("schema_version", pa.int64()), ("position", pa.string()),
                      ("before", m), ("after", m), ("ddl", pa.string()), ("ddl_type", pa.string()),
                      ("table_def", pa.string()), ("pre_table_def", pa.string()), ("error", pa.string()),
                      ("key", pa.binary()), ("value", pa.binary())])


def decode(raw: DataFrame, protocol: str, options: dict[str, str] | None = None,
           store: str | None = None, dialect: str = "text") -> DataFrame:
    """Decoded changes of a RAW_SCHEMA DataFrame (streaming or not)."""
    return raw.mapInArrow(decode_partitions(protocol, options, store, dialect), CHANGES_SCHEMA)
