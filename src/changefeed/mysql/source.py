"""The binlog stream as TiCDC-style change events, one transaction at a time.

Transactions are grouped by their XID (or a COMMIT query for non-transactional tables); each gets a TSO commit
ts from its commit time (physical ms << 18, plus a logical counter so that ts strictly increase). DDL comes from
query events: `SchemaTracker` keeps the definition of every captured table at the binlog position being read
(started from SHOW CREATE TABLE, or from a checkpoint), which gives each DDL its before/after definitions and
each row the column types it was written with.

What a query event's statement is, and a DDL's events, come from statements.py; the live tables' state
(`live_state`) from server.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..model import Event, Kind, TableInfo
from ..sqlschema import SchemaTracker
from ..tso import compose
from ..upstream import UpstreamState
from . import server
from .checkpoint import Checkpoint, Position, load_checkpoint
from .convert import RowConverter
from .server import SourceError, live_state
from .statements import DML, NOT_DDL, SAVEPOINT, TXN_CONTROL, XA, ddl_events, query_text, split_multi_table, xa_xid
from .uri import MySQLURI

__all__ = ["BinlogSource", "CommitClock", "Transaction", "live_state", "load_checkpoint", "mysql_events",
           "split_multi_table"]


@dataclass
class Transaction:
    """Events sharing one commit ts, and the binlog position just after them (where a resume starts)."""

    events: list[Event]
    position: Position
    commit_ts: int
    partial: bool = False  # a piece (of a snapshot, of a multi-table statement): its position is reached only
    # once the last piece is out, so no checkpoint is taken after it
    prepared: dict[tuple[bytes, bytes, int], list[Event]] | None = None  # XA transactions pending at the position


@dataclass
class _Open:
    events: list[Event] = field(default_factory=list)
    savepoints: dict[str, int] = field(default_factory=dict)  # a savepoint's name -> the events before it


class CommitClock:
    """Commit ts from commit times: physical ms << 18, bumped by one when that would not be above the last."""

    def __init__(self, last: int = 0) -> None:
        self.last = last

    def next(self, ms: int) -> int:
        ts = compose(ms, 0)
        if ts <= self.last:
            ts = self.last + 1
        self.last = ts
        return ts


def _connect(**kw: Any) -> Any:
    """pymysql.connect with the reader's deprecated argument names (db, passwd) spelled as pymysql wants."""
    import pymysql

    for old, new in (("db", "database"), ("passwd", "password")):
        if old in kw:
            kw[new] = kw.pop(old)
    return pymysql.connect(**kw)


class BinlogSource:
    """Reads a server's binlog from a checkpoint (or from now, optionally after a snapshot).

    `transactions()` yields Transaction objects; `checkpoint(tx)` is what to save once the transport has
    acknowledged everything up to and including `tx`.
    """

    def __init__(self, uri: MySQLURI, *, resume: Checkpoint | None = None, snapshot: bool | None = None) -> None:
        self.uri = uri
        self.snapshot = bool(uri.snapshot if snapshot is None else snapshot)
        self.ctl = server.connect(uri)
        self.flavor = server.check(self.ctl, uri, snapshot=self.snapshot and resume is None)
        self.metadata_full = server.row_metadata_full(self.ctl)
        self.tracker = SchemaTracker()
        self.resume = resume
        self.clock = CommitClock(resume.last_ts if resume else 0)
        self.position: Position | None = resume.position if resume else None
        self._converters: dict[int, tuple[TableInfo, RowConverter]] = {}
        # XA transactions prepared, not yet committed nor rolled back: their rows, by XID (statements.xa_xid)
        self._prepared: dict[tuple[bytes, bytes, int], list[Event]] = dict(resume.prepared) if resume else {}
        self._stream: Any = None
        self.stats = {"events": 0, "rows": 0, "transactions": 0}
        self._read: server.ConsistentRead | None = None
        if resume is not None:
            for t in resume.tables:
                self.tracker.put(t)
        else:
            self._begin()

    # --- start: checkpoint, or bootstrap (+ snapshot) -------------------------------------------------------
    def _begin(self) -> None:
        """A fresh start takes its position (and definitions, and with a snapshot its consistent read) now, so
        every change committed after the source was made is captured."""
        if self.snapshot:
            self._read = server.ConsistentRead(self.uri, self.flavor)
            self._start, self._defs = self._read.position, self._read.tables
        else:
            self._read = None
            self._start = server.position(self.ctl, self.flavor)
            self._defs = server.definitions(self.ctl, self.uri)

    def bootstrap(self) -> Iterator[Transaction]:
        """A fresh start: CREATE TABLE for each captured table, then (with a snapshot) its rows as inserts at
        one commit ts; the binlog is read from the position they were taken at."""
        read, pos, defs = self._read, self._start, self._defs
        try:
            now_ms = int(time.time() * 1000)
            for sql, t in defs:
                self.tracker.put(t)
                ts = self.clock.next(now_ms)
                ev = Event(kind=Kind.DDL, commit_ts=ts, table=t, query=sql, ddl_type="ActionCreateTable")
                yield Transaction([ev], pos, ts, partial=True)
            if read is not None:
                ts = self.clock.next(now_ms)
                for _, t in defs:
                    conv = RowConverter(t)
                    batch: list[Event] = []
                    for r in read.rows(t):
                        batch.append(Event(kind=Kind.INSERT, commit_ts=ts, table=t, after=conv.row(r, None)))
                        if len(batch) >= 1000:  # one commit ts; handed on in pieces to bound memory
                            yield Transaction(batch, pos, ts, partial=True)
                            batch = []
                    if batch:
                        yield Transaction(batch, pos, ts, partial=True)
        finally:
            if read is not None:
                read.close()
                self._read = None
        self.position = pos

    def checkpoint(self, tx: Transaction) -> Checkpoint:
        return Checkpoint(tx.position, tx.commit_ts, self.tracker.tables(), tx.prepared or {})

    # --- the stream -----------------------------------------------------------------------------------------
    def _open_stream(self, pos: Position, blocking: bool) -> Any:
        from pymysqlreplication import BinLogStreamReader
        from pymysqlreplication.event import (
            HeartbeatLogEvent,
            MariadbGtidEvent,
            QueryEvent,
            RotateEvent,
            XAPrepareEvent,
            XidEvent,
        )
        from pymysqlreplication.row_event import DeleteRowsEvent, TableMapEvent, UpdateRowsEvent, WriteRowsEvent

        events = [QueryEvent, XidEvent, XAPrepareEvent, RotateEvent, TableMapEvent, WriteRowsEvent, UpdateRowsEvent,
                  DeleteRowsEvent, MariadbGtidEvent, HeartbeatLogEvent]
        try:
            from pymysqlreplication.event import GtidEvent

            events.append(GtidEvent)
        except ImportError:  # pragma: no cover
            pass
        # file/pos resume works for both flavors (with is_mariadb=True the reader ignores log_file/log_pos)
        return BinLogStreamReader(
            connection_settings={"host": self.uri.host, "port": self.uri.port, "user": self.uri.user,
                                 "password": self.uri.password},
            server_id=self.uri.server_id, resume_stream=True, blocking=blocking, log_file=pos.file,
            log_pos=pos.pos, only_events=events, slave_heartbeat=1 if blocking else None, enable_logging=False,
            is_mariadb=False, pymysql_wrapper=_connect)

    def _table(self, schema: str, table: str) -> TableInfo | None:
        t = self.tracker.get(schema, table)
        if t is None and self.uri.wants(schema, table):
            # not known (created by a statement the tracker could not follow): today's definition
            try:
                _, t = server.show_create(self.ctl, schema, table)
            except Exception as e:  # a table dropped since
                raise SourceError(f"{schema}.{table}: rows in the binlog, but no definition of the table is "
                                  f"known ({e})") from None
            self.tracker.put(t)
        return t

    def _conv(self, t: TableInfo) -> RowConverter:
        hit = self._converters.get(id(t))
        if hit is None or hit[0] is not t:
            hit = (t, RowConverter(t, binlog=True))
            self._converters[id(t)] = hit
        return hit[1]

    def _check_table_map(self, ev: Any) -> None:
        """The table map of the rows that follow: without names (binlog_row_metadata other than FULL) they come
        from the tracked definition; with them, they must agree with it (a DDL the tracker could not follow is
        caught here, and the server's definition taken when it matches the binlog's columns)."""
        t = self._table(ev.schema, ev.table)
        if t is None:
            return
        names = [c.name for c in ev.columns]
        if all(n is None for n in names):
            self._fill_metadata(ev, t)
            return
        if names == [c.name for c in t.columns]:
            return
        try:
            _, now = server.show_create(self.ctl, ev.schema, ev.table)
        except Exception:  # noqa: BLE001 - dropped since: no definition to take
            now = None
        if now is not None and names == [c.name for c in now.columns]:
            self.tracker.put(now)
            return
        raise SourceError(f"binlog {self._here()}: {ev.schema}.{ev.table} has the columns {names} there, the "
                          f"definition followed from its DDL {[c.name for c in t.columns]}: a DDL statement the "
                          "capture could not follow")

    def _fill_metadata(self, ev: Any, t: TableInfo) -> None:
        """Without binlog_row_metadata=FULL the table map has no names, charsets nor enum/set values: take them
        from the definition tracked at this position."""
        cols = ev.columns
        if len(cols) != len(t.columns) or all(c.name is not None for c in cols):
            return
        for c, d in zip(cols, t.columns, strict=True):
            c.name = d.name
            ct = d.type
            if ct.family.value == "bytes":
                c.character_set_name = "binary"
            elif ct.family.value in ("string", "json", "enum", "set") and not c.character_set_name:
                # (MINIMAL metadata still gives a string column's character set: the tracked one only fills in)
                c.character_set_name = "utf8mb4" if (ct.charset or "utf8mb4").startswith("utf8") else ct.charset
            if ct.family.value == "enum":
                c.enum_values = ["", *ct.elements]
            if ct.family.value == "set":
                c.set_values = list(ct.elements)
            c.unsigned = ct.unsigned

    def _here(self) -> str:
        s = self._stream
        return f"{s.log_file}:{s.log_pos}" if s is not None else "?"

    def transactions(self, *, follow: bool = False, until: Position | None = None) -> Iterator[Transaction]:
        """The binlog from the current position; `follow`: wait for more at the end (heartbeats yield empty
        transactions so the caller can flush); otherwise stop at the end (or at `until`)."""
        import pymysql

        if self.position is None:
            yield from self.bootstrap()
        assert self.position is not None
        if until is not None and until.key() <= self.position.key():
            return
        stream = self._stream = self._open_stream(self.position, follow)
        try:
            yield from self._follow(stream, until)
        except pymysql.err.Error as e:  # the server refused the stream (a purged binlog file, a lost connection)
            raise SourceError(f"{self.uri.where}: reading the binlog at {self.position}: {e.args[-1]}") from None
        finally:
            stream.close()
            self._stream = None

    def _follow(self, stream: Any, until: Position | None) -> Iterator[Transaction]:
        from pymysqlreplication.event import (
            HeartbeatLogEvent,
            MariadbGtidEvent,
            QueryEvent,
            RotateEvent,
            XAPrepareEvent,
            XidEvent,
        )
        from pymysqlreplication.row_event import DeleteRowsEvent, TableMapEvent, UpdateRowsEvent, WriteRowsEvent

        assert self.position is not None
        open_tx: _Open | None = None
        gtid = self.position.gtid
        for ev in stream:
            self.stats["events"] += 1
            if isinstance(ev, HeartbeatLogEvent):
                if open_tx is None:
                    yield Transaction([], self.position, self.clock.last)
                continue
            if isinstance(ev, RotateEvent):
                continue
            if isinstance(ev, MariadbGtidEvent):
                gtid = ev.gtid
                continue
            if isinstance(ev, XAPrepareEvent) and not ev.one_phase:
                # XA PREPARE: the rows wait for their XA COMMIT (a later event, maybe far later), or go with XA ROLLBACK
                self._prepared[(ev.xid_gtrid, ev.xid_bqual, ev.xid_format_id)] = open_tx.events if open_tx else []
                open_tx = None
                continue
            if isinstance(ev, TableMapEvent):
                if self.uri.wants(ev.schema, ev.table):
                    self._check_table_map(ev)
                continue
            if isinstance(ev, WriteRowsEvent | UpdateRowsEvent | DeleteRowsEvent):
                if not self.uri.wants(ev.schema, ev.table):
                    continue
                t = self._table(ev.schema, ev.table)
                assert t is not None
                conv = self._conv(t)
                if open_tx is None:
                    open_tx = _Open()
                out = open_tx.events
                try:
                    if isinstance(ev, WriteRowsEvent):
                        for r in ev.rows:
                            out.append(Event(kind=Kind.INSERT, table=t,
                                             after=conv.row(r["values"], r.get("none_sources"))))
                    elif isinstance(ev, DeleteRowsEvent):
                        for r in ev.rows:
                            out.append(Event(kind=Kind.DELETE, table=t,
                                             before=conv.row(r["values"], r.get("none_sources"))))
                    else:
                        for r in ev.rows:
                            out.append(Event(kind=Kind.UPDATE, table=t,
                                             before=conv.row(r["before_values"], r.get("before_none_sources")),
                                             after=conv.row(r["after_values"], r.get("after_none_sources"))))
                except ValueError as e:
                    raise SourceError(f"binlog {self._here()}: {e}") from None
                continue
            end = False
            ddl: list[Event] = []
            if isinstance(ev, XidEvent | XAPrepareEvent):  # (the latter: XA ... ONE PHASE)
                end = True
            elif isinstance(ev, QueryEvent):
                q = query_text(ev)
                m = TXN_CONTROL.match(q)
                if m:
                    word = m.group(1).upper()
                    xa = XA.match(q)
                    if xa is not None:
                        verb, xid = xa.group(1).upper(), xa_xid(q[xa.end():])
                        if verb in ("START", "BEGIN"):  # (MySQL logs it; MariaDB starts with the GTID alone)
                            open_tx = _Open()
                            continue
                        if verb == "ROLLBACK" and xid is not None:
                            self._prepared.pop(xid, None)
                            continue
                        if verb != "COMMIT" or xid is None:
                            continue  # XA END: the prepare follows
                        if xid not in self._prepared:
                            raise SourceError(f"binlog {self._here()}: XA COMMIT of a transaction prepared before "
                                              "the capture's start position: its rows are before that position "
                                              "(start the capture before its XA PREPARE)")
                        open_tx = _Open(self._prepared.pop(xid))
                        word = "COMMIT"
                    if word == "BEGIN":
                        open_tx = _Open()
                        continue
                    end = word == "COMMIT"
                    point = SAVEPOINT.match(q)
                    if point is not None:
                        # a savepoint is logged where the transaction touched a non-transactional table, and so is
                        # a ROLLBACK TO it: the rows logged after the savepoint are undone, not the transaction
                        name = point.group(2).strip("`").lower()
                        if open_tx is not None and point.group(1).upper() == "SAVEPOINT":
                            open_tx.savepoints[name] = len(open_tx.events)
                        elif open_tx is not None:  # (a savepoint set before anything was logged is not logged)
                            del open_tx.events[open_tx.savepoints.get(name, 0):]
                        continue
                    if word == "ROLLBACK":
                        open_tx = None
                        continue
                    if not end:
                        continue
                elif DML.match(q):
                    raise SourceError(f"binlog {self._here()}: a statement-based change ({q[:60]!r}): "
                                      "binlog_format must be ROW (SET GLOBAL binlog_format=ROW) for the "
                                      "capture to see rows")
                elif NOT_DDL.match(q):
                    continue
                else:
                    ddl = ddl_events(self.tracker, self.uri, ev, self._here())
                    end = True
            if not end:
                continue
            events = open_tx.events if open_tx else []
            open_tx = None
            before = self.position
            self.position = Position(stream.log_file, stream.log_pos, gtid)
            self.stats["transactions"] += 1
            if ddl:  # each DDL its own commit ts; the statement's position once the last one is out
                for i, e in enumerate(ddl):
                    e.commit_ts = self.clock.next(ev.timestamp * 1000)
                    last = i == len(ddl) - 1
                    yield Transaction([e], self.position if last else before, e.commit_ts, partial=not last,
                                      prepared=dict(self._prepared) if last and self._prepared else None)
            else:
                ts = self.clock.next(ev.timestamp * 1000) if events else self.clock.last
                for e in events:
                    e.commit_ts = ts
                self.stats["rows"] += len(events)
                yield Transaction(events, self.position, ts, prepared=dict(self._prepared) if self._prepared else None)
            if until is not None and self.position.key() >= until.key():
                return

    def close(self) -> None:
        if self._read is not None:
            self._read.close()
        if self._stream is not None:
            self._stream.close()
        self.ctl.close()


def mysql_events(source: str, state_box: list[UpstreamState]) -> Iterator[Event]:
    """`changefeed run`'s source: the captured tables as they are (a snapshot, unless snapshot=false), then the
    binlog to its end; then one consistent read of the live tables (the expected state), and the binlog up to
    the position of that read, so the stream ends exactly where the expected state is."""
    from .uri import parse_mysql_uri

    uri = parse_mysql_uri(source)
    src = BinlogSource(uri)
    try:
        for tx in src.transactions(follow=False):
            yield from tx.events
        state, at = live_state(uri)
        for tx in src.transactions(follow=False, until=at):
            yield from tx.events
    finally:
        src.close()
    state_box.append(state)
