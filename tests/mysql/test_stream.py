"""Transactions, commit ts and DDL mid-stream, read from a live MariaDB binlog."""

from __future__ import annotations

import time

import pytest

from changefeed.model import Kind
from changefeed.mysql.source import BinlogSource
from changefeed.mysql.uri import parse_mysql_uri
from changefeed.tso import logical, physical_ms

from .helpers import drain


def test_a_transaction_over_several_tables_has_one_commit_ts(mariadb) -> None:
    db = mariadb.fresh_db("tx_db")
    mariadb.run("CREATE TABLE a (id INT PRIMARY KEY, v INT)", "CREATE TABLE b (id INT PRIMARY KEY, w VARCHAR(10))",
                "CREATE TABLE c (id INT PRIMARY KEY)", db=db)
    src = BinlogSource(parse_mysql_uri(mariadb.uri(f"{db}.*", snapshot="false")))
    before_ms = int(time.time() * 1000) - 1000
    conn = mariadb.admin(db)
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO a VALUES (1, 10), (2, 20)")
        cur.execute("INSERT INTO b VALUES (1, 'x')")
        cur.execute("UPDATE a SET v = 11 WHERE id = 1")
        cur.execute("DELETE FROM c")  # nothing to delete: no rows
        cur.execute("INSERT INTO c VALUES (7)")
        cur.execute("COMMIT")
        cur.execute("INSERT INTO a VALUES (3, 30)")  # autocommit: a transaction of its own
        cur.execute("BEGIN")
        cur.execute("INSERT INTO b VALUES (2, 'y')")
        cur.execute("ROLLBACK")  # never in the binlog
        for i in range(20):  # many transactions within one second: the logical counter keeps ts increasing
            cur.execute(f"INSERT INTO c VALUES ({100 + i})")
    conn.close()
    after_ms = int(time.time() * 1000) + 1000
    txs = [(ts, evs) for ts, evs in drain(src) if any(e.kind is not Kind.DDL for e in evs)]
    src.close()
    first_ts, first = txs[0]
    assert [(e.kind, e.table.table) for e in first] == [
        (Kind.INSERT, "a"), (Kind.INSERT, "a"), (Kind.INSERT, "b"), (Kind.UPDATE, "a"), (Kind.INSERT, "c")]
    assert {e.commit_ts for e in first} == {first_ts}
    assert first[3].before == {"id": 1, "v": 10} and first[3].after == {"id": 1, "v": 11}
    assert [e.after for e in txs[1][1]] == [{"id": 3, "v": 30}]
    assert len(txs) == 2 + 20  # the rolled back one is not there
    assert all(e.table.table != "b" or e.after["id"] != 2 for _, evs in txs for e in evs)
    ts = [t for t, _ in txs]
    assert ts == sorted(ts) and len(set(ts)) == len(ts), "commit ts strictly increase"
    for t in ts:  # the commit time, in ms (the binlog has seconds), << 18, plus a logical counter
        assert before_ms - 1000 <= physical_ms(t) <= after_ms
    # 20 commits within about a second share their physical part: the logical counter orders them
    assert max(logical(t) for t in ts) >= 1


def test_ddl_mid_stream_with_definitions_before_and_after(mariadb) -> None:
    db = mariadb.fresh_db("ddl_db")
    mariadb.run("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10), b INT)", "INSERT INTO t VALUES (1, 'one', 1)",
                db=db)
    src = BinlogSource(parse_mysql_uri(mariadb.uri(f"{db}.*", snapshot="false")))
    mariadb.run(
        "ALTER TABLE t ADD COLUMN c DECIMAL(5,2) DEFAULT 1.25",
        "INSERT INTO t VALUES (2, 'two', 2, 2.50)",
        "ALTER TABLE t DROP COLUMN b",
        "UPDATE t SET a = 'uno' WHERE id = 1",
        "ALTER TABLE t RENAME COLUMN a TO name",
        "INSERT INTO t VALUES (3, 'three', 3.75)",
        "CREATE TABLE u (k BIGINT UNSIGNED PRIMARY KEY, v JSON)",
        "INSERT INTO u VALUES (18446744073709551615, '{\"a\":1}')",
        "TRUNCATE TABLE t",
        "INSERT INTO t VALUES (4, 'four', 4.00)",
        "RENAME TABLE u TO u2",
        "INSERT INTO u2 VALUES (1, '[1,2]')",
        "DROP TABLE u2",
        db=db)
    events = [e for _, evs in drain(src) for e in evs]
    src.close()
    # the captured tables' CREATE TABLE at the start, then what happened, in order
    seen = [(e.kind, e.ddl_type) if e.kind is Kind.DDL else (e.kind, e.table.table) for e in events]
    assert seen == [
        (Kind.DDL, "ActionCreateTable"),
        (Kind.DDL, "ActionAddColumn"), (Kind.INSERT, "t"),
        (Kind.DDL, "ActionDropColumn"), (Kind.UPDATE, "t"),
        (Kind.DDL, "ActionModifyColumn"), (Kind.INSERT, "t"),  # TiDB runs RENAME COLUMN as a modify
        (Kind.DDL, "ActionCreateTable"), (Kind.INSERT, "u"),
        (Kind.DDL, "ActionTruncateTable"), (Kind.INSERT, "t"),
        (Kind.DDL, "ActionRenameTable"), (Kind.INSERT, "u2"),
        (Kind.DDL, "ActionDropTable"),
    ]
    ddl = [e for e in events if e.kind is Kind.DDL]
    cols = lambda t: [c.name for c in t.columns] if t is not None else None  # noqa: E731
    assert (cols(ddl[0].pre_table), cols(ddl[0].table)) == (None, ["id", "a", "b"])
    assert (cols(ddl[1].pre_table), cols(ddl[1].table)) == (["id", "a", "b"], ["id", "a", "b", "c"])
    assert ddl[1].table.by_name["c"].mysql_type.lower() == "decimal(5,2)"
    assert (cols(ddl[2].pre_table), cols(ddl[2].table)) == (["id", "a", "b", "c"], ["id", "a", "c"])
    assert (cols(ddl[3].pre_table), cols(ddl[3].table)) == (["id", "a", "c"], ["id", "name", "c"])
    assert (cols(ddl[4].pre_table), cols(ddl[4].table)) == (None, ["k", "v"])
    assert ddl[4].table.by_name["v"].type.name == "json"
    assert (cols(ddl[5].pre_table), cols(ddl[5].table)) == (["id", "name", "c"], ["id", "name", "c"])
    assert (ddl[6].pre_table.table, ddl[6].table.table) == ("u", "u2")
    assert (ddl[7].pre_table.table, ddl[7].table) == ("u2", None)
    assert ddl[1].query == "ALTER TABLE t ADD COLUMN c DECIMAL(5,2) DEFAULT 1.25"
    rows = [e for e in events if e.kind is not Kind.DDL]
    # each row is read with the definition of its moment in the binlog
    assert rows[0].after == {"id": 2, "a": "two", "b": 2, "c": "2.50"}
    assert rows[1].before == {"id": 1, "a": "one", "c": "1.25"} and rows[1].after["a"] == "uno"
    assert rows[2].after == {"id": 3, "name": "three", "c": "3.75"}
    assert rows[3].after == {"k": 18446744073709551615, "v": '{"a": 1}'}
    assert rows[4].after == {"id": 4, "name": "four", "c": "4.00"}
    assert rows[5].table.table == "u2" and rows[5].after == {"k": 1, "v": "[1, 2]"}
    ts = [e.commit_ts for e in events]
    assert ts == sorted(ts)
    assert len({e.commit_ts for e in ddl}) == len(ddl), "each DDL has its own commit ts"


def test_schema_ddl_and_tables_created_after_the_start(mariadb) -> None:
    mariadb.run("DROP DATABASE IF EXISTS later_db")
    src = BinlogSource(parse_mysql_uri(mariadb.uri("later_db.*", snapshot="false")))
    mariadb.run("CREATE DATABASE later_db", "CREATE TABLE later_db.t (id INT PRIMARY KEY, v SET('x','y'))",
                "INSERT INTO later_db.t VALUES (1, 'y')", "CREATE DATABASE other_db_not_captured",
                "DROP DATABASE other_db_not_captured", "DROP DATABASE later_db")
    events = [e for _, evs in drain(src) for e in evs]
    src.close()
    assert [(e.kind, e.ddl_type) for e in events] == [
        (Kind.DDL, "ActionCreateSchema"), (Kind.DDL, "ActionCreateTable"), (Kind.INSERT, None),
        (Kind.DDL, "ActionDropSchema")]
    assert events[0].table.schema == "later_db" and events[3].pre_table.schema == "later_db"
    assert events[2].after == {"id": 1, "v": 2}
    from changefeed.codecs import make_encoder
    from changefeed.config import build_config
    from changefeed.upstream import final_state

    assert final_state(events[:3]).tables[("later_db", "t")].rows == {(1,): {"id": 1, "v": 2}}
    assert final_state(events).tables == {}
    enc = make_encoder(build_config("canal-json", {"enable-tidb-extension": "true"}))
    for e in events:  # a schema DDL is a message like TiCDC's (database set, table empty)
        assert list(enc.encode(e))


def test_schema_ddl_with_a_quoted_name(mariadb) -> None:
    """A database named in backquotes (as mysqldump and most tools write it), a backquote in the name too."""
    mariadb.run("DROP DATABASE IF EXISTS `quoted db`", "DROP DATABASE IF EXISTS `q``d`")
    src = BinlogSource(parse_mysql_uri(mariadb.uri("quoted?db.*,q?d.*", snapshot="false")))
    mariadb.run("CREATE DATABASE `quoted db`", "CREATE DATABASE IF NOT EXISTS `q``d`", "DROP DATABASE `q``d`",
                "DROP DATABASE `quoted db`")
    events = [e for _, evs in drain(src) for e in evs]
    src.close()
    assert [(e.ddl_type, (e.table or e.pre_table).schema) for e in events] == [
        ("ActionCreateSchema", "quoted db"), ("ActionCreateSchema", "q`d"), ("ActionDropSchema", "q`d"),
        ("ActionDropSchema", "quoted db")]


def test_multi_table_drop_and_rename_are_one_ddl_per_table(mariadb) -> None:
    db = mariadb.fresh_db("multi_db")
    mariadb.run("CREATE TABLE a (id INT PRIMARY KEY)", "CREATE TABLE b (id INT PRIMARY KEY)",
                "CREATE TABLE c (id INT PRIMARY KEY)", db=db)
    src = BinlogSource(parse_mysql_uri(mariadb.uri(f"{db}.*", snapshot="false")))
    mariadb.run("RENAME TABLE a TO a2, b TO b2", "DROP TABLE a2, b2, c", db=db)
    txs = [tx for tx in src.transactions(follow=False) if tx.events]
    src.close()
    ddl = [(tx.events[0].ddl_type, tx.events[0].pre_table.table, tx.events[0].table.table
            if tx.events[0].table else None, tx.partial) for tx in txs[3:]]
    assert ddl == [("ActionRenameTable", "a", "a2", True), ("ActionRenameTable", "b", "b2", False),
                   ("ActionDropTable", "a2", None, True), ("ActionDropTable", "b2", None, True),
                   ("ActionDropTable", "c", None, False)]
    ts = [tx.commit_ts for tx in txs]
    assert ts == sorted(ts) and len(set(ts)) == len(ts)
    # a piece's position is the statement's start: a checkpoint there replays the whole statement
    k = [tx.position.key() for tx in txs[3:]]
    assert k[0] < k[1] == k[2] == k[3] < k[4]


def test_a_definition_that_disagrees_with_the_binlog_is_caught(mariadb) -> None:
    """As if a DDL had not been followed: the tracked definition names other columns than the binlog."""
    from changefeed.model import Column, TableInfo
    from changefeed.mysql.server import SourceError

    db = mariadb.fresh_db("drift_db")
    mariadb.run("CREATE TABLE t (id INT PRIMARY KEY, a INT)", db=db)
    stale = TableInfo(db, "t", [Column("id", "int", primary_key=True, nullable=False), Column("b", "int")])
    def stale_source() -> tuple[BinlogSource, object]:
        src = BinlogSource(parse_mysql_uri(mariadb.uri(f"{db}.*", snapshot="false")))
        it = src.transactions(follow=False)
        assert next(it).events[0].ddl_type == "ActionCreateTable"  # the start's definition, replaced:
        src.tracker.put(stale)
        return src, it

    src, it = stale_source()
    mariadb.run("INSERT INTO t VALUES (1, 10)", db=db)
    rows = [e.after for tx in it for e in tx.events if e.kind is Kind.INSERT]
    src.close()
    assert rows == [{"id": 1, "a": 10}]  # the server's definition matches the binlog's columns: taken

    src, it = stale_source()
    mariadb.run("INSERT INTO t VALUES (2, 20)", "ALTER TABLE t ADD COLUMN c INT", db=db)
    with pytest.raises(SourceError, match=r"drift_db.t has the columns \['id', 'a'\] there, the definition "
                                          r"followed from its DDL \['id', 'b'\]"):
        list(it)
    src.close()


def test_a_rollback_to_a_savepoint_undoes_only_the_rows_after_it(mariadb) -> None:
    """A transaction that also changes a non-transactional table cannot be rolled back in the binlog cache, so
    MariaDB logs its SAVEPOINT and its ROLLBACK TO SAVEPOINT. That undoes the transactional rows logged after the
    savepoint, not the transaction: the rows before it and after the rollback stay (a ROLLBACK TO read as a
    ROLLBACK lost them all)."""
    db = mariadb.fresh_db("savepoint_db")
    mariadb.run("CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB", "CREATE TABLE m (id INT PRIMARY KEY) "
                "ENGINE=MyISAM", db=db)
    src = BinlogSource(parse_mysql_uri(mariadb.uri(f"{db}.*")))
    mariadb.run("BEGIN", "INSERT INTO t VALUES (1)", "SAVEPOINT sp", "INSERT INTO t VALUES (2)",
                "INSERT INTO m VALUES (1)", "ROLLBACK TO SAVEPOINT sp", "INSERT INTO t VALUES (3)", "COMMIT", db=db)
    txs = drain(src)
    src.close()
    rows = sorted(e.after["id"] for _, evs in txs for e in evs if e.kind is Kind.INSERT and e.table.table == "t")
    assert rows == [1, 3]  # (m's row is not checked: a MyISAM table has no consistent snapshot to start from)


def test_a_sessions_temporary_table_is_not_the_table_of_its_name(mariadb) -> None:
    """A session that binlogs statements logs its CREATE / DROP TEMPORARY TABLE: a temporary `t` shadows the real
    `t` in that session alone, so neither is a DDL of the captured `t` (a DROP TEMPORARY read as DROP TABLE would
    have dropped the lake's table and forgotten its definition)."""
    db = mariadb.fresh_db("temporary_db")
    mariadb.run("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(5))", db=db)
    src = BinlogSource(parse_mysql_uri(mariadb.uri(f"{db}.*")))
    mariadb.run("SET SESSION binlog_format = 'STATEMENT'", "CREATE TEMPORARY TABLE t (x INT)",
                "DROP TEMPORARY TABLE IF EXISTS t", "SET SESSION binlog_format = 'ROW'",
                "INSERT INTO t VALUES (1, 'a')", db=db)
    txs = drain(src)
    src.close()
    events = [e for _, evs in txs for e in evs]
    assert [e.ddl_type for e in events if e.kind is Kind.DDL] == ["ActionCreateTable"]  # the snapshot's
    [ins] = [e for e in events if e.kind is Kind.INSERT]
    assert ins.after == {"id": 1, "v": "a"} and [c.name for c in ins.table.columns] == ["id", "v"]


def test_xa_transactions_land_at_their_commit_and_not_after_a_rollback(mariadb) -> None:
    """An XA transaction's rows are logged at its XA PREPARE and count at its XA COMMIT, a later event: they
    come out then, with that commit's ts, after the transactions committed in between; an XA ROLLBACK drops them.
    (Read as plain rows, a prepared transaction's rows joined the next transaction, a rolled-back one's too.)"""
    db = mariadb.fresh_db("xa_db")
    mariadb.run("CREATE TABLE t (id INT PRIMARY KEY)", db=db)
    src = BinlogSource(parse_mysql_uri(mariadb.uri(f"{db}.*")))
    mariadb.run("XA START 'x1'", "INSERT INTO t VALUES (1)", "XA END 'x1'", "XA PREPARE 'x1'", db=db)
    mariadb.run("INSERT INTO t VALUES (2)", db=db)
    mariadb.run("XA COMMIT 'x1'", db=db)
    mariadb.run("XA START 'x2'", "INSERT INTO t VALUES (3)", "XA END 'x2'", "XA PREPARE 'x2'", db=db)
    mariadb.run("XA ROLLBACK 'x2'", db=db)
    mariadb.run("XA START 'x3'", "INSERT INTO t VALUES (4)", "XA END 'x3'", "XA COMMIT 'x3' ONE PHASE", db=db)
    txs = drain(src)
    src.close()
    got = [[e.after["id"] for e in evs if e.kind is Kind.INSERT] for _, evs in txs]
    assert [g for g in got if g] == [[2], [1], [4]]
    ts = [t for t, evs in txs if any(e.kind is Kind.INSERT for e in evs)]
    assert ts == sorted(ts) and len(set(ts)) == 3


def test_a_rollback_to_a_savepoint_set_before_any_row(mariadb) -> None:
    """A savepoint set before the transaction logged anything: its ROLLBACK TO undoes every row logged so far
    (also where a server leaves such a SAVEPOINT out of the binlog: a ROLLBACK TO a savepoint never seen goes
    back to the transaction's start)."""
    db = mariadb.fresh_db("savepoint_first_db")
    mariadb.run("CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB", "CREATE TABLE m (id INT PRIMARY KEY) "
                "ENGINE=MyISAM", db=db)
    src = BinlogSource(parse_mysql_uri(mariadb.uri(f"{db}.*", snapshot="false")))
    mariadb.run("BEGIN", "SAVEPOINT sp", "INSERT INTO t VALUES (1)", "INSERT INTO m VALUES (1)",
                "ROLLBACK TO SAVEPOINT sp", "INSERT INTO t VALUES (2)", "COMMIT", db=db)
    txs = drain(src)
    src.close()
    assert sorted(e.after["id"] for _, evs in txs for e in evs if e.kind is Kind.INSERT and e.table.table == "t") \
        == [2]
