"""The statements of binlog query events: what kind each is (transaction control, a statement-based change,
not DDL), and a DDL statement as the change events it makes.

Kept apart from the stream loop in source.py: this is pure text and schema tracking, no server and no reader.
A multi-table DROP/RENAME becomes one statement per table (as TiDB runs them, one job each).
"""

from __future__ import annotations

import re
from typing import Any

from ..ddl import action_from_query, split_top_level
from ..errors import SourceError
from ..model import Event, Kind, TableInfo
from ..sqlschema import SchemaError, SchemaTracker
from .uri import SYSTEM_SCHEMAS, MySQLURI

DML = re.compile(r"\s*(?:/\*.*?\*/\s*)*(INSERT|UPDATE|DELETE|REPLACE|LOAD\s+DATA)\b", re.I | re.S)
# SAVEPOINT sp / ROLLBACK [WORK] TO [SAVEPOINT] sp (group 1: which, group 2: the name, maybe quoted)
SAVEPOINT = re.compile(r"\s*(SAVEPOINT|ROLLBACK(?:\s+WORK)?\s+TO)\s+(?:SAVEPOINT\s+)?(`(?:[^`]|``)+`|\S+)", re.I)
XA = re.compile(r"\s*XA\s+(START|BEGIN|END|COMMIT|ROLLBACK|PREPARE)\b", re.I)
_XID_PART = r"\s*(?:X'([0-9a-fA-F]*)'|'((?:[^'\\]|\\.|'')*)')"


def xa_xid(text: str) -> tuple[bytes, bytes, int] | None:
    """An XA statement's XID (gtrid, bqual, formatID) from the text after its verb: `X'6131',X'',1` as the
    server logs it, or `'a1'[,'b'[,1]]` as a client writes it; None where there is none."""
    m = re.match(_XID_PART + f"(?:\\s*,{_XID_PART}(?:\\s*,\\s*(\\d+))?)?", text)
    if m is None:
        return None

    def part(hex_: str | None, quoted: str | None) -> bytes:
        if hex_ is not None:
            return bytes.fromhex(hex_)
        return (quoted or "").replace("''", "'").encode("utf-8")

    return part(m.group(1), m.group(2)), part(m.group(3), m.group(4)), int(m.group(5) or 1)


TXN_CONTROL = re.compile(r"\s*(BEGIN|COMMIT|ROLLBACK|XA\s|SAVEPOINT|RELEASE\s+SAVEPOINT)", re.I)
NOT_DDL = re.compile(r"\s*(?:/\*.*?\*/\s*)*(FLUSH|GRANT|REVOKE|CREATE\s+USER|DROP\s+USER|ALTER\s+USER|SET\s|"
                     r"ANALYZE|OPTIMIZE|CHECK|REPAIR|CREATE\s+(?:DEFINER|FUNCTION|PROCEDURE|TRIGGER|EVENT|"
                     r"ROLE)|DROP\s+(?:FUNCTION|PROCEDURE|TRIGGER|EVENT|ROLE)|"
                     # a session's temporary table (logged where its session binlogs statements; MySQL writes
                     # DROP /*!40005 TEMPORARY */ TABLE at its end): never the table of that name others see
                     r"CREATE\s+TEMPORARY\s|DROP\s+(?:/\*!\d+\s+)?TEMPORARY\s)", re.I | re.S)


_SCHEMA_DDL = re.compile(r"\s*(CREATE|DROP)\s+(?:DATABASE|SCHEMA)\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?"
                         r"(?:`((?:[^`]|``)+)`|([^\s;`]+))", re.I)

_MULTI_TABLE = re.compile(r"^(DROP\s+(?:TEMPORARY\s+)?TABLES?\s+(?:IF\s+EXISTS\s+)?|RENAME\s+TABLES?\s+)(.*?)"
                          r"(\s+(?:RESTRICT|CASCADE))?$", re.I | re.S)


def query_text(ev: Any) -> str:
    """A query event's statement as text."""
    return ev.query if isinstance(ev.query, str) else bytes(ev.query).decode("utf-8", "replace")


def split_multi_table(query: str) -> list[str]:
    """`DROP TABLE a, b` -> `DROP TABLE a`, `DROP TABLE b` (and RENAME TABLE's pairs); other statements as
    they are."""
    q = " ".join(re.sub(r"/\*.*?\*/", " ", query, flags=re.S).split()).rstrip(";").strip()
    m = _MULTI_TABLE.match(q)
    if m is None:
        return [query]
    items = [i.strip() for i in split_top_level(m.group(2)) if i.strip()]
    if len(items) < 2:
        return [query]
    head = m.group(1)
    if head.upper().startswith("DROP"):
        head = "DROP TABLE " + ("IF EXISTS " if re.search(r"IF\s+EXISTS", head, re.I) else "")
    else:
        head = "RENAME TABLE "
    return [head + i for i in items]


def ddl_events(tracker: SchemaTracker, uri: MySQLURI, ev: Any, where: str) -> list[Event]:
    """The DDL events of a query event (applied to `tracker` in turn): one per table for DROP TABLE a, b and
    RENAME TABLE a TO b, c TO d (as TiDB runs them, one job each). `where`: the binlog position, for errors."""
    q = query_text(ev)
    schema = ev.schema.decode("utf-8") if isinstance(ev.schema, bytes) else str(ev.schema or "")
    return [e for part in split_multi_table(q) for e in _ddl_one(tracker, uri, part, schema, where)]


def _ddl_one(tracker: SchemaTracker, uri: MySQLURI, q: str, schema: str, where: str) -> list[Event]:
    try:
        before, after = tracker.apply(q, schema)
    except SchemaError as e:
        raise SourceError(f"DDL at {where}: {e}") from None
    subject = after or before
    if subject is None:
        m = _SCHEMA_DDL.match(q)
        if m is None:
            return []
        db = m.group(2) if m.group(2) is not None else m.group(3)
        db = db.replace("``", "`")
        if db.lower() in SYSTEM_SCHEMAS or not uri.filter.match(db, ""):
            return []
        create = m.group(1).upper() == "CREATE"
        t = TableInfo(schema=db, table="")
        return [Event(kind=Kind.DDL, commit_ts=0, query=q, table=t if create else None,
                      pre_table=None if create else t,
                      ddl_type="ActionCreateSchema" if create else "ActionDropSchema")]
    if not (uri.wants(subject.schema, subject.table) or
            (before is not None and uri.wants(before.schema, before.table))):
        return []
    action = action_from_query(q)
    if after is not None and before is None and action == "ActionNone":
        action = "ActionCreateTable"
    return [Event(kind=Kind.DDL, commit_ts=0, table=after, pre_table=before, query=q, ddl_type=action)]
