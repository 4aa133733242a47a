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

from ..codecs import ConsumerDecoder, make_decoder
from ..config import build_config
from ..errors import DecodeError
from ..eventline import table_from_json, table_to_json
from ..model import ROW_KINDS, Event, Kind, TableInfo
from ..mysqltypes import make_text_formatter
from .canal_raw import CanalRaw
from .columns import Columns, arrow_schema
from .objectstore import SchemaFolder
from .pyworker import cheap_zip_invalidation
from .types import text_of

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

    Each writer adds its own file (written aside, then renamed; on S3 one PUT of a new key, atomic), so tasks
    never step on each other. The folder is a local path, or a `SchemaFolder` on S3 (objectstore.py)."""

    def __init__(self, folder: str | Path | SchemaFolder) -> None:
        self.remote = folder if isinstance(folder, SchemaFolder) else None
        self.folder = Path(folder) if not isinstance(folder, SchemaFolder) else Path()

    def load(self) -> list[tuple[int, TableInfo]]:
        out: list[tuple[int, TableInfo]] = []
        for blob in self._blobs():
            for line in blob.splitlines():
                rec = orjson.loads(line)
                out.append((rec["ts"], table_from_json(rec["table"])))
        out.sort(key=lambda x: x[0])
        return out

    def _blobs(self) -> list[bytes]:
        if self.remote is not None:
            from pyarrow import fs

            s3, base = self.remote.filesystem()
            infos = s3.get_file_info(fs.FileSelector(base, allow_not_found=True))
            names = sorted(i.path for i in infos if i.type == fs.FileType.File and i.path.endswith(".jsonl"))
            out = []
            for n in names:
                with s3.open_input_stream(n) as f:
                    out.append(f.read())
            return out
        if not self.folder.is_dir():
            return []
        return [f.read_bytes() for f in sorted(self.folder.glob("*.jsonl"))]

    def add(self, defs: list[tuple[int, TableInfo]]) -> None:
        if not defs:
            return
        name = uuid.uuid4().hex
        data = b"".join(orjson.dumps({"ts": ts, "table": table_to_json(t)}) + b"\n" for ts, t in defs)
        if self.remote is not None:
            s3, base = self.remote.filesystem()
            with s3.open_output_stream(f"{base}/{name}.jsonl") as f:
                f.write(data)
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".{name}.tmp"
        tmp.write_bytes(data)
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


_DEF_JSON: dict[int, tuple[TableInfo, str]] = {}  # by identity: the text of definitions this process wrote


def def_json(t: TableInfo) -> str:
    """A table definition as a change row carries it, read back once here: a definition the lake could not
    take (a column named by a list ...) is the message's dead letter, not a failed micro-batch. Once per
    definition object in this process: a DDL's copies on other partitions share its definition (the schema
    tracker parses a CREATE TABLE once per process)."""
    got = _DEF_JSON.get(id(t))
    if got is not None and got[0] is t:
        return got[1]
    obj = table_to_json(t)
    table_from_json(obj)
    text = orjson.dumps(obj).decode()
    if len(_DEF_JSON) >= 4096:
        _DEF_JSON.clear()
    _DEF_JSON[id(t)] = (t, text)
    return text


class PartitionDecoder:
    """One decode task: RAW_SCHEMA batches in (several topic-partitions, each in offset order), CHANGES_SCHEMA
    batches out. A decoder per partition, seeded with the schema store's definitions; what the task learns
    goes back to the store at its end.

    `dialect="canal"` (canal-json only): images keep canal-json's own value text. A well-formed row or
    watermark message is then read straight from its JSON (canal_raw.py); anything else takes the
    protocol's decoder."""

    __slots__ = ("cfg", "dialect", "schema_store", "seed", "decoders", "seeded", "local_defs", "waiting", "convs",
                 "seen", "emitted", "learnt", "out", "out_schema", "cols", "sparse", "before_col", "after_col",
                 "canal")

    def __init__(self, protocol: str, options: dict[str, str], store: str | SchemaFolder | None,
                 dialect: str = "text") -> None:
        self.cfg = build_config(protocol, options)
        self.dialect = dialect
        self.schema_store = SchemaStore(store) if store else None
        self.seed = self.schema_store.load() if self.schema_store else []
        self.decoders: dict[tuple[str, int], ConsumerDecoder] = {}
        self.seeded: dict[tuple[str, int], int] = {}  # per decoder: the latest commit ts of the definitions given
        self.local_defs: dict[tuple[str, int], list[tuple[int, TableInfo]]] = {}  # what each decoder learnt here
        # per partition: the messages its decoder holds until their table's schema comes (the simple protocol)
        self.waiting: dict[tuple[str, int], deque[tuple[int, bytes | None, bytes | None]]] = {}
        self.convs: dict[int, _Converters] = {}
        self.seen: dict[int, TableInfo] = {}  # definitions already looked at, by identity (a signature per row costs)
        self.emitted: set[tuple] = set()  # signatures of the table definitions rows carried already
        self.learnt: list[tuple[int, TableInfo]] = []  # for the schema store
        self.out = Columns()
        self.out_schema = arrow_schema()
        self.cols = self.out.dense
        self.sparse = self.out.sparse
        self.before_col, self.after_col = self.out.before, self.out.after
        self.canal = CanalRaw(self.out) if dialect == "canal" and protocol == "canal-json" else None

    def run(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            self.decode_batch(batch)
            yield self.out.take(self.out_schema)
        self.fail_waiting()
        if self.cols["topic"]:
            yield self.out.take(self.out_schema)
        if self.schema_store is not None:
            self.schema_store.add(self.learnt)

    def decode_batch(self, batch: pa.RecordBatch) -> None:
        topics = batch.column(0).to_pylist()
        parts = batch.column(1).to_pylist()
        offsets = batch.column(2).to_pylist()
        keys = batch.column(3).to_pylist()
        values = batch.column(4).to_pylist()
        canal = self.canal.take if self.canal is not None else None
        decoder, fail, emit_all = self.decoder, self.fail, self.emit_all
        for topic, part, off, key, value in zip(topics, parts, offsets, keys, values, strict=True):
            if canal is not None and value is not None:
                try:
                    if canal(topic, part, off, orjson.loads(value)):
                        continue
                except Exception:  # noqa: BLE001 - not JSON, or of a shape the fast path does not take:
                    pass  # the decoder names the problem
            tp = (topic, part)
            d = decoder(tp)
            before_pending = d.pending
            try:
                events = d.decode(value, key)
                again = self.replayed_ddl(tp, d, events)
                if again is not None:
                    d = decoder(tp, before=again)
                    events = d.decode(value, key)
            except DecodeError as e:
                fail(topic, part, off, str(e.located(f"{topic}/{part}@{off}")), key, value)
                continue
            except Exception as e:  # a decoder bug must not lose the message either
                fail(topic, part, off, f"{topic}/{part}@{off}: {type(e).__name__}: {e}", key, value)
                continue
            after_pending = d.pending
            if after_pending == before_pending:
                emit_all(topic, part, off, events, key, value)
            else:
                self.queue(tp, off, key, value, events, before_pending, after_pending)

    def decoder(self, tp: tuple[str, int], before: int | None = None) -> ConsumerDecoder:
        """The decoder of one partition, knowing the stored definitions (only those older than `before`:
        a DDL replayed after a restart is decoded against the definitions that preceded it)."""
        d = self.decoders.get(tp)
        if d is None or before is not None:
            d = self.decoders[tp] = make_decoder(self.cfg)
            given = [x for x in self.seed if before is None or x[0] < before]
            given += [x for x in self.local_defs.get(tp, []) if before is not None and x[0] < before]
            if d.remembers:
                for _, t in sorted(given, key=lambda x: x[0]):
                    d.remember(t)
            self.seeded[tp] = max((ts for ts, _ in given), default=-1) if d.remembers else -1
            self.waiting.setdefault(tp, deque())
        return d

    def replayed_ddl(self, tp: tuple[str, int], d: ConsumerDecoder, events: list[Event]) -> int | None:
        """The commit ts of a DDL this decoder already knows the outcome of (a replay), if any."""
        if d.pending:
            return None
        for ev in events:
            if ev.kind is Kind.DDL and ev.commit_ts <= self.seeded.get(tp, -1):
                return ev.commit_ts
        return None

    def queue(self, tp: tuple[str, int], off: int, key: bytes | None, value: bytes | None, events: list[Event],
              before_pending: int, after_pending: int) -> None:
        """A message that changed what its decoder holds: kept while it waits for its table's schema; the
        events its decoder released belong to the messages waiting, in their order."""
        topic, part = tp
        q = self.waiting[tp]
        if after_pending > before_pending:
            q.append((off, key, value))
        released = before_pending - after_pending if after_pending < before_pending else 0
        own = len(events) - released
        self.emit_all(topic, part, off, events[:own], key, value)
        for ev in events[own:]:
            woff, wkey, wvalue = q.popleft()
            self.emit_all(topic, part, woff, [ev], wkey, wvalue)

    def fail_waiting(self) -> None:
        """DML still waiting for its table's schema at the end of the task: dead letters, not silence."""
        for (topic, part), q in self.waiting.items():
            self.decoders[(topic, part)].take_pending()
            for off, key, value in q:
                self.fail(topic, part, off, f"{topic}/{part}@{off}: DML before any BOOTSTRAP or DDL of its table "
                          "(no schema to decode it with)", key, value)

    def conv(self, t: TableInfo) -> _Converters:
        convs = self.convs
        c = convs.get(id(t))
        if c is None or c.table is not t:
            if len(convs) > 4096:
                convs.clear()
            c = convs[id(t)] = _Converters(t, self.dialect)
        return c

    def table_def(self, t: TableInfo | None) -> tuple[bytes, str] | None:
        """The definition a row carries the first time its shape is seen (noted as emitted by `emit`)."""
        seen = self.seen
        if t is None or not t.columns or seen.get(id(t)) is t:
            return None
        sig = t.signature()
        if sig in self.emitted:
            if len(seen) > 4096:
                seen.clear()
            seen[id(t)] = t
            return None
        return sig, def_json(t)

    def prepare(self, ev: Event) -> tuple[Event, Any, Any, Any, str | None]:
        """What a change row needs that can still fail on a decoded event (a value its column type does
        not take): done before anything is appended, so a message lands whole or as one dead letter."""
        t = ev.subject
        if ev.kind in ROW_KINDS and t is not None:
            cv = self.conv(t)
            before, after = cv.text(ev.before, "before"), cv.text(ev.after, "after")
            return ev, before, after, self.table_def(t), None
        return (ev, None, None, def_json(ev.table) if ev.table is not None else None,
                def_json(ev.pre_table) if ev.pre_table is not None else None)

    def emit_all(self, topic: str, part: int, off: int, events: list[Event], key: bytes | None,
                 value: bytes | None) -> None:
        """A message's events, or its dead letter."""
        prepare = self.prepare
        try:
            ready = [prepare(ev) for ev in events]
        except DecodeError as e:
            self.fail(topic, part, off, str(e.located(f"{topic}/{part}@{off}")), key, value)
            return
        except Exception as e:  # noqa: BLE001 - whatever else a decoded event cannot become: a dead letter
            self.fail(topic, part, off, f"{topic}/{part}@{off}: {type(e).__name__}: {e}", key, value)
            return
        emit = self.emit
        for i, r in enumerate(ready):
            emit(topic, part, off, i, r)

    def emit(self, topic: str, part: int, off: int, idx: int, prepared: tuple[Event, Any, Any, Any, Any]) -> None:
        ev, before, after, tdef, pre = prepared
        t = ev.subject
        c = self.cols
        sparse = self.sparse
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
        self.before_col.add_pairs(before)
        self.after_col.add_pairs(after)
        if isinstance(tdef, tuple):  # a row's table shape, the first time it is seen
            if tdef[0] not in self.emitted:
                self.emitted.add(tdef[0])
                sparse["table_def"][i] = tdef[1]
        elif tdef is not None:
            sparse["table_def"][i] = tdef
        if pre is not None:
            sparse["pre_table_def"][i] = pre
        if ev.kind not in ROW_KINDS and ev.table is not None and ev.table.columns \
                and ev.kind in (Kind.DDL, Kind.BOOTSTRAP):
            self.learnt.append((ev.commit_ts, ev.table))
            self.local_defs.setdefault((topic, part), []).append((ev.commit_ts, ev.table))
        if ev.query is not None:
            sparse["ddl"][i] = ev.query
        if ev.ddl_type is not None:
            sparse["ddl_type"][i] = ev.ddl_type

    def fail(self, topic: str, part: int, off: int, reason: str, key: bytes | None, value: bytes | None) -> None:
        """A dead letter: the message's bytes and the reason."""
        c = self.cols
        i = len(c["topic"])
        for f, v in (("topic", topic), ("partition", part), ("offset", off), ("idx", 0), ("kind", "error"),
                     ("database", None), ("table", None), ("commit_ts", None)):
            c[f].append(v)
        self.before_col.add(None)
        self.after_col.add(None)
        sparse = self.sparse
        sparse["error"][i] = reason
        sparse["key"][i] = key
        sparse["value"][i] = value


def decode_partitions(protocol: str, options: dict[str, str] | None = None, store: str | SchemaFolder | None = None,
                      dialect: str = "text") -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function `mapInArrow` runs (pickled to the executors: each task makes its own `PartitionDecoder`)."""
    opts = dict(options or {})

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        cheap_zip_invalidation()  # this worker's next tasks start without re-reading pyspark.zip (pyworker.py)
        yield from PartitionDecoder(protocol, opts, store, dialect).run(batches)

    return run


def decode(raw: DataFrame, protocol: str, options: dict[str, str] | None = None,
           store: str | SchemaFolder | None = None, dialect: str = "text") -> DataFrame:
    """Decoded changes of a RAW_SCHEMA DataFrame (streaming or not)."""
    return raw.mapInArrow(decode_partitions(protocol, options, store, dialect), CHANGES_SCHEMA)
