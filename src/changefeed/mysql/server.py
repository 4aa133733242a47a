"""Talking to the server outside the binlog stream: preconditions, table definitions, consistent reads (and the
captured tables' live state read in one).

Errors are one line naming the server and the setting or privilege that is missing, so an operator can fix
it without reading a traceback.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..errors import SourceError
from ..model import Column, TableInfo
from ..sqlschema import SchemaError, parse_create_table
from ..upstream import TableState, UpstreamState, row_key
from .checkpoint import Position
from .convert import RowConverter
from .uri import MySQLURI


def connect(uri: MySQLURI, **kw: Any) -> Any:
    import pymysql

    args: dict[str, Any] = {"charset": "utf8mb4", "autocommit": True, "connect_timeout": 10, **kw}
    try:
        return pymysql.connect(host=uri.host, port=uri.port, user=uri.user, password=uri.password, **args)
    except pymysql.err.OperationalError as e:
        raise SourceError(f"{uri.where}: cannot connect: {e.args[-1]}") from None


def query(conn: Any, sql: str, args: Any = None) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def variables(conn: Any, names: list[str]) -> dict[str, str]:
    like = " OR ".join(f"Variable_name = '{n}'" for n in names)
    return {k.lower(): str(v) for k, v in query(conn, f"SHOW GLOBAL VARIABLES WHERE {like}")}


def flavor_of(conn: Any) -> str:
    version = str(query(conn, "SELECT VERSION()")[0][0])
    return "mariadb" if "mariadb" in version.lower() else "mysql"


# privileges the capture needs, and what each one is for; a name in a tuple is satisfied by any of them
_NEEDED: list[tuple[tuple[str, ...], str]] = [
    (("REPLICATION SLAVE", "REPLICATION REPLICA"), "to read the binlog"),
    (("REPLICATION CLIENT", "BINLOG MONITOR", "SUPER"), "to read the binlog position (SHOW MASTER STATUS)"),
    (("SELECT",), "to read table definitions and rows"),
]
_RELOAD = (("RELOAD",), "for a consistent snapshot (FLUSH TABLES WITH READ LOCK)")


def granted(conn: Any) -> tuple[str, set[str]]:
    """The current user and the privileges it holds on *.* (SELECT also when granted on some schema)."""
    user = str(query(conn, "SELECT CURRENT_USER()")[0][0])
    privs: set[str] = set()
    for (line,) in query(conn, "SHOW GRANTS FOR CURRENT_USER()"):
        m = re.match(r"GRANT (.+?) ON (\S+) TO ", str(line), re.S)
        if not m:
            continue
        names = {p.strip().upper() for p in m.group(1).split(",")}
        if m.group(2) == "*.*":
            privs |= names
        elif "SELECT" in names or "ALL PRIVILEGES" in names:
            privs.add("SELECT")
    return user, privs


def check(conn: Any, uri: MySQLURI, *, snapshot: bool) -> str:
    """Refuse a server the capture cannot read losslessly; the flavor (mariadb or mysql) when it can."""
    v = variables(conn, ["log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata", "server_id",
                         "binlog_row_value_options"])
    if v.get("log_bin", "OFF").upper() not in ("ON", "1"):
        raise SourceError(f"{uri.where}: the binary log is off (log_bin=OFF): start the server with log-bin, "
                          "binlog_format=ROW and binlog_row_image=FULL")
    fmt = v.get("binlog_format", "").upper()
    if fmt != "ROW":
        raise SourceError(f"{uri.where}: binlog_format is {fmt or 'unknown'}, the capture needs binlog_format=ROW "
                          "(SET GLOBAL binlog_format=ROW, or binlog-format=ROW in the server's configuration)")
    image = v.get("binlog_row_image", "FULL").upper()
    if image != "FULL":
        raise SourceError(f"{uri.where}: binlog_row_image is {image}, the capture needs binlog_row_image=FULL "
                          "(full before and after images)")
    if "PARTIAL_JSON" in v.get("binlog_row_value_options", "").upper():  # MySQL 8's; MariaDB has no such variable
        raise SourceError(f"{uri.where}: binlog_row_value_options is PARTIAL_JSON: an UPDATE of a JSON column is "
                          "then logged as a diff of the document, which the capture cannot read; SET GLOBAL "
                          "binlog_row_value_options=''")
    if v.get("server_id") == str(uri.server_id):
        raise SourceError(f"{uri.where}: server-id={uri.server_id} is the server's own server_id; give the capture "
                          "another one (?server-id=N)")
    user, privs = granted(conn)
    if "ALL PRIVILEGES" not in privs:
        needed = _NEEDED + ([_RELOAD] if snapshot else [])
        missing = [(names, why) for names, why in needed if not privs & set(names)]
        if missing:
            what = "; ".join(f"{names[0]} ({why})" for names, why in missing)
            raise SourceError(f"{uri.where}: user {user} lacks the privilege {what}: GRANT "
                              f"{', '.join(n[0] for n, _ in missing)} ON *.* TO {user}")
    return uri.flavor or flavor_of(conn)


def row_metadata_full(conn: Any) -> bool:
    """Whether table-map events name their columns (binlog_row_metadata=FULL); otherwise names come from the
    tracked definitions."""
    v = variables(conn, ["binlog_row_metadata"])
    return v.get("binlog_row_metadata", "MINIMAL").upper() == "FULL"


def position(conn: Any, flavor: str) -> Position:
    import pymysql

    try:
        rows = query(conn, "SHOW MASTER STATUS")
    except pymysql.err.ProgrammingError:  # MySQL 8.4 knows only the new name
        rows = query(conn, "SHOW BINARY LOG STATUS")
    except pymysql.err.Error as e:  # a privilege missing
        raise SourceError(f"SHOW MASTER STATUS failed: {e.args[-1]} (the capture needs REPLICATION CLIENT)") from None
    if not rows:
        raise SourceError("SHOW MASTER STATUS is empty: the binary log is off (log_bin=OFF)")
    gtid = None
    if flavor == "mariadb":
        gtid = str(query(conn, "SELECT @@gtid_binlog_pos")[0][0]) or None
    elif len(rows[0]) > 4:
        gtid = str(rows[0][4]) or None
    return Position(str(rows[0][0]), int(rows[0][1]), gtid)


def _json_columns(create_sql: str) -> set[str]:
    """MariaDB's JSON is LONGTEXT with a json_valid check: the columns it holds JSON in."""
    return {m.group(1) for m in re.finditer(r"json_valid\(`((?:[^`]|``)+)`\)", create_sql, re.I)}


def as_json_columns(t: TableInfo, names: set[str]) -> TableInfo:
    if not names:
        return t
    cols = []
    for c in t.columns:
        if c.name in names and c.type.name == "longtext":
            c = Column(c.name, "json", None, None, c.nullable, c.default, c.primary_key, c.unique_key,
                       c.auto_increment, c.comment)
        cols.append(c)
    out = TableInfo(t.schema, t.table, cols, list(t.indexes), t.table_id, t.version, t.charset)
    return out


def show_create(conn: Any, schema: str, table: str) -> tuple[str, TableInfo]:
    sql = str(query(conn, f"SHOW CREATE TABLE `{schema.replace('`', '``')}`.`{table.replace('`', '``')}`")[0][1])
    json_cols = _json_columns(sql)
    for name in json_cols:  # say JSON, as the statement that made it did: readers of the DDL then agree
        sql = re.sub(r"(`" + re.escape(name.replace("`", "``")) + r"`) longtext(?: CHARACTER SET \w+)?"
                     r"(?: COLLATE \w+)?", r"\1 json", sql, count=1)
    try:
        t = parse_create_table(sql, schema)
    except SchemaError as e:
        raise SourceError(f"table {schema}.{table}: cannot read its definition: {e}") from None
    return sql, as_json_columns(t, json_cols)


def wanted_tables(conn: Any, uri: MySQLURI) -> list[tuple[str, str]]:
    rows = query(conn, "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
                       "WHERE TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_SCHEMA, TABLE_NAME")
    return [(str(s), str(t)) for s, t in rows if uri.wants(str(s), str(t))]


def definitions(conn: Any, uri: MySQLURI) -> list[tuple[str, TableInfo]]:
    return [show_create(conn, s, t) for s, t in wanted_tables(conn, uri)]


def table_rows(conn: Any, t: TableInfo, batch: int = 2000) -> Iterator[dict[str, Any]]:
    """Every row of a table, keyed by column name (values as pymysql decodes them; converted by the caller)."""
    import pymysql

    names = ", ".join(f"`{c.name.replace('`', '``')}`" for c in t.columns)
    with conn.cursor(pymysql.cursors.SSCursor) as cur:
        cur.execute(f"SELECT {names} FROM `{t.schema.replace('`', '``')}`.`{t.table.replace('`', '``')}`")
        while True:
            chunk = cur.fetchmany(batch)
            if not chunk:
                break
            for r in chunk:
                yield dict(zip((c.name for c in t.columns), r, strict=True))


class ConsistentRead:
    """Debezium's snapshot: a global read lock just long enough to start a consistent-snapshot transaction
    and note the binlog position and the definitions; the rows are then read in that transaction."""

    def __init__(self, uri: MySQLURI, flavor: str) -> None:
        self.uri = uri
        self.conn = connect(uri, autocommit=False)
        try:
            query(self.conn, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            query(self.conn, "SET SESSION time_zone = '+00:00'")
            try:
                query(self.conn, "FLUSH TABLES WITH READ LOCK")
            except Exception as e:
                raise SourceError(f"{uri.where}: FLUSH TABLES WITH READ LOCK failed ({e.args[-1]}): the snapshot "
                                  "needs the RELOAD privilege") from None
            try:
                query(self.conn, "START TRANSACTION WITH CONSISTENT SNAPSHOT")
                self.position = position(self.conn, flavor)
                self.tables = definitions(self.conn, uri)
            finally:
                query(self.conn, "UNLOCK TABLES")
        except BaseException:
            self.conn.close()
            raise

    def rows(self, t: TableInfo) -> Iterator[dict[str, Any]]:
        return table_rows(self.conn, t)

    def close(self) -> None:
        try:
            query(self.conn, "COMMIT")
        finally:
            self.conn.close()


def live_state(uri: MySQLURI) -> tuple[UpstreamState, Position]:
    """The captured tables as they are now (one consistent read), and the binlog position they are at."""
    conn = connect(uri)
    try:
        flavor = uri.flavor or flavor_of(conn)
    finally:
        conn.close()
    read = ConsistentRead(uri, flavor)
    try:
        state = UpstreamState()
        for _, t in read.tables:
            st = state.tables.setdefault((t.schema, t.table), TableState(t))
            conv = RowConverter(t)
            for r in read.rows(t):
                row = conv.row(r, None)
                st.rows[row_key(t, row)] = row
        return state, read.position
    finally:
        read.close()
