"""Compare events before encoding with events after decoding, knowing where each protocol is lossy.

canal-json loses: the logical part of the commit ts without `_tidb` (es is milliseconds); column
facts other than name, base type, unsigned/zerofill and the primary key (nullability, defaults,
charsets, secondary indexes, and type parameters unless content-compatible); columns left out on
purpose (handle-key-only, delete-only-output-handle-key-columns); watermarks without `_tidb`;
bootstrap events (canal-json has none). The debezium protocol is compared by columns only (see
compare_events).

`roundtrip_file` is the `changefeed roundtrip` workflow: a file of event lines through a protocol's encoder
into a message file, through its decoder into an event file, then compared.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from .codecs import make_decoder, make_encoder
from .config import CodecConfig
from .debezium.avro import sends_ddl_and_watermarks
from .errors import DecodeError
from .eventline import EventReader, EventWriter, message_from_line, message_to_line, read_lines
from .model import Event, Kind, Row, TableInfo
from .tso import PHYSICAL_SHIFT
from .workdir import open_folder


@dataclass
class Report:
    compared: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def summary(self) -> str:
        if self.ok:
            return f"{self.compared} events equal after decoding"
        return f"{len(self.problems)} differences in {self.compared} events"


def expected_events(events: list[Event], cfg: CodecConfig) -> list[Event]:
    """The events a decoder can give back: those the protocol sends."""
    out = []
    for ev in events:
        if ev.kind is Kind.BOOTSTRAP and cfg.protocol == "simple":
            continue  # the producer sends its own, on its cadence: compared apart
        if ev.kind is Kind.BOOTSTRAP and cfg.protocol in ("debezium", "debezium-avro"):
            continue
        dbz = cfg.protocol in ("debezium", "debezium-avro")
        if dbz and ev.kind is Kind.DDL and not cfg.debezium_output_ddl_and_watermark:
            continue
        if dbz and ev.kind is Kind.WATERMARK and not (cfg.debezium_output_ddl_and_watermark
                                                      and cfg.enable_tidb_extension):
            continue
        if cfg.protocol == "debezium-avro" and ev.kind in (Kind.DDL, Kind.WATERMARK) \
                and not sends_ddl_and_watermarks(cfg):
            continue
        if ev.kind is Kind.BOOTSTRAP and cfg.protocol == "canal-json":
            continue
        if ev.kind is Kind.WATERMARK and cfg.protocol == "canal-json" and not cfg.enable_tidb_extension:
            continue
        out.append(ev)
    return out


def _ts(ts: int, cfg: CodecConfig) -> int:
    if cfg.protocol == "canal-json" and not cfg.enable_tidb_extension:
        return (ts >> PHYSICAL_SHIFT) << PHYSICAL_SHIFT
    return ts


def _key_shape(t: TableInfo, cfg: CodecConfig) -> tuple:
    """What a protocol carries of a table's key: canal-json the PRI columns (pkNames), the simple protocol the
    primary key (implicit too: its `primary` index), the others the handle key their message keys hold."""
    if cfg.protocol == "canal-json":
        return tuple(t.pk_names)
    if cfg.protocol == "simple":
        return tuple(t.primary_columns)
    return tuple(sorted(t.handle_key))


def _table_shape(t: TableInfo | None, cfg: CodecConfig) -> tuple:
    if t is None:
        return ()
    if cfg.protocol == "simple":  # the whole definition travels
        return (t.schema, t.table, t.table_id or 0, t.version or 0,
                tuple((c.name, c.type.full_str(), c.nullable is not False) for c in t.columns),
                _key_shape(t, cfg))
    cols = tuple(
        (c.name, c.type.full_str() if cfg.content_compatible else c.type.short_str()) for c in t.columns
    )
    return (t.schema, t.table, cols, _key_shape(t, cfg))


def _rows_equal(a: Row | None, b: Row | None, subset_ok: bool) -> str | None:
    if a is None or b is None:
        return None if a is b else f"{a!r} != {b!r}"
    keys = b.keys() if subset_ok else a.keys() | b.keys()
    for k in keys:
        if k not in a or k not in b:
            return f"column {k} present on one side only"
        if a[k] != b[k] or type(a[k]) is not type(b[k]):
            return f"column {k}: {a[k]!r} != {b[k]!r}"
    return None


def compare_events(orig: Event, got: Event, cfg: CodecConfig) -> str | None:
    if orig.kind is not got.kind:
        return f"kind {orig.kind} != {got.kind}"
    if _ts(orig.commit_ts, cfg) != got.commit_ts:
        return f"commitTs {orig.commit_ts} != {got.commit_ts}"
    if orig.kind is Kind.DDL:
        if orig.query != got.query:
            return f"query {orig.query!r} != {got.query!r}"
        if orig.ddl_type != got.ddl_type:
            return f"ddl type {orig.ddl_type} != {got.ddl_type}"
        a, b = orig.subject, got.subject
        if cfg.protocol == "simple" and not (a is not None and a.columns):
            return None  # a DDL about no table (CREATE DATABASE): the simple protocol carries no schema
        if a is None or b is None or (a.schema, a.table) != (b.schema, b.table):
            return f"DDL table {a and a.qualified} != {b and b.qualified}"
        if cfg.protocol == "simple":
            for x, y, side in ((orig.table, got.table, "table"), (orig.pre_table, got.pre_table, "preTable")):
                if x is not None and x.columns and _table_shape(x, cfg) != _table_shape(y, cfg):
                    return f"DDL {side} {_table_shape(x, cfg)} != {_table_shape(y, cfg)}"
        return None
    if orig.kind is Kind.WATERMARK:
        return None
    if cfg.protocol in ("debezium", "debezium-avro"):
        # Debezium's types cannot say everything (decimal as double, text and binary both strings without
        # the TiDB extension, bigint unsigned wrapping): compare which columns came back, not their values
        for side in ("before", "after"):
            a, b = getattr(orig, side), getattr(got, side)
            if (a is None) != (b is None) or (a is not None and set(a) != set(b)):
                return f"{side}: columns {a and sorted(a)} != {b and sorted(b)}"
        return None
    partial = cfg.delete_only_output_handle_key_columns and orig.kind is Kind.DELETE
    ta, tb = _table_shape(orig.table, cfg), _table_shape(got.table, cfg)
    if not partial and ta != tb:
        return f"table {ta} != {tb}"
    for side in ("before", "after"):
        why = _rows_equal(getattr(orig, side), getattr(got, side), subset_ok=partial)
        if why:
            return f"{side}: {why}"
    return None


def compare_streams(originals: list[Event], decoded: list[Event], cfg: CodecConfig) -> Report:
    expected = expected_events(originals, cfg)
    if cfg.protocol == "simple":
        decoded = [ev for ev in decoded if ev.kind is not Kind.BOOTSTRAP]
    rep = Report(compared=min(len(expected), len(decoded)))
    if len(expected) != len(decoded):
        rep.problems.append(f"{len(expected)} events expected back, {len(decoded)} decoded")
    for i, (a, b) in enumerate(zip(expected, decoded, strict=False)):
        why = compare_events(a, b, cfg)
        if why:
            rep.problems.append(f"event {i + 1} ({a.kind}): {why}")
    return rep


@dataclass
class RoundtripRun:
    """What `roundtrip_file` did: the files it wrote, what went through them, how long each way took."""

    source: Path
    messages_path: Path
    events_path: Path
    originals: list[Event]
    decoded: list[Event]
    messages: int
    message_bytes: int
    encode_ms: float
    decode_ms: float
    report: Report


def roundtrip_file(cfg: CodecConfig, source: Path, out: Path, *, name: str | None = None,
                   option: str = "--out") -> RoundtripRun:
    """Event lines in `source` -> protocol messages (`<out>/<name>.messages.jsonl`) -> events again
    (`<out>/<name>.decoded.jsonl`), compared. `out` may hold the user's files: changefeed writes beside them,
    never over one (`option` names the folder in errors); `name` defaults to the protocol."""
    name = name or cfg.protocol
    folder = open_folder(out, option, shared=True)  # beside the user's files, never over one
    msg_path = folder.claim(f"{name}.messages.jsonl", option)
    ev_path = folder.claim(f"{name}.decoded.jsonl", option)
    encoder, decoder = make_encoder(cfg), make_decoder(cfg)
    reader, writer = EventReader(), EventWriter()
    t0 = time.perf_counter()
    originals = []
    n_bytes = n_msgs = 0
    with open(source, "rb") as fin, open(msg_path, "wb") as fout:
        for lineno, line in read_lines(fin):
            try:
                ev = reader.parse(line)
            except DecodeError as e:
                raise e.located(f"{source} line {lineno}") from None
            originals.append(ev)
            for m in encoder.encode(ev):
                n_bytes += len(m.value or b"")
                n_msgs += 1
                fout.write(message_to_line(m) + b"\n")
    t1 = time.perf_counter()
    decoded = []
    with open(msg_path, "rb") as fin, open(ev_path, "wb") as fout:
        for lineno, line in read_lines(fin):
            m = message_from_line(line)
            try:
                events = decoder.decode(m.value, m.key)
            except DecodeError as e:
                raise e.located(f"{msg_path} line {lineno}") from None
            for ev in events:
                decoded.append(ev)
                fout.write(writer.line(ev) + b"\n")
    t2 = time.perf_counter()
    return RoundtripRun(source=source, messages_path=msg_path, events_path=ev_path, originals=originals,
                        decoded=decoded, messages=n_msgs, message_bytes=n_bytes, encode_ms=(t1 - t0) * 1000,
                        decode_ms=(t2 - t1) * 1000, report=compare_streams(originals, decoded, cfg))
