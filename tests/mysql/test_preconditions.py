"""Servers and users the capture cannot read losslessly are refused with one line naming the setting."""

from __future__ import annotations

import subprocess
import sys

import pytest

from changefeed.config import ConfigError
from changefeed.mysql.server import SourceError
from changefeed.mysql.source import BinlogSource
from changefeed.mysql.uri import parse_mysql_uri


def test_a_statement_based_binlog_is_refused(mariadb) -> None:
    db = mariadb.fresh_db("stmt_db")
    mariadb.run("CREATE TABLE t (id INT PRIMARY KEY)", db=db)
    uri = mariadb.uri(f"{db}.*", snapshot="false")
    mariadb.run("SET GLOBAL binlog_format = 'STATEMENT'")
    try:
        with pytest.raises(SourceError, match="binlog_format is STATEMENT.*binlog_format=ROW"):
            BinlogSource(parse_mysql_uri(uri))
        r = subprocess.run([sys.executable, "-m", "changefeed.cli", "capture", "--source", uri, "--sink-uri",
                            "file:///nonexistent/x?protocol=canal-json", "--no-follow"], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 1
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
        assert len(lines) == 1 and "binlog_format" in lines[0] and "Traceback" not in r.stderr, r.stderr
    finally:
        mariadb.run("SET GLOBAL binlog_format = 'ROW'")


def test_statement_events_in_a_row_binlog_stop_the_capture(mariadb) -> None:
    """The server was ROW when the capture started, then a session wrote statements: never skipped silently."""
    db = mariadb.fresh_db("stmt_mid_db")
    mariadb.run("CREATE TABLE t (id INT PRIMARY KEY)", db=db)
    src = BinlogSource(parse_mysql_uri(mariadb.uri(f"{db}.*", snapshot="false")))
    mariadb.run("INSERT INTO t VALUES (1)", "SET SESSION binlog_format = 'STATEMENT'", "INSERT INTO t VALUES (2)",
                db=db)
    got = []
    with pytest.raises(SourceError, match="statement-based change.*binlog_format must be ROW"):
        for tx in src.transactions(follow=False):
            got.extend(e.after["id"] for e in tx.events if e.after and "id" in e.after)
    src.close()
    assert got == [1]


def test_missing_privileges_are_named(mariadb) -> None:
    mariadb.run("CREATE USER IF NOT EXISTS 'reader'@'127.0.0.1' IDENTIFIED BY 'pw'",
                "GRANT SELECT ON *.* TO 'reader'@'127.0.0.1'")
    with pytest.raises(SourceError, match=r"lacks the privilege REPLICATION SLAVE \(to read the binlog\); "
                                          r"REPLICATION CLIENT .*GRANT REPLICATION SLAVE, REPLICATION CLIENT, RELOAD"):
        BinlogSource(parse_mysql_uri(mariadb.uri("x.*", user="reader", password="pw")))
    # without a snapshot RELOAD is not needed
    mariadb.run("GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'reader'@'127.0.0.1'")
    BinlogSource(parse_mysql_uri(mariadb.uri("x.*", user="reader", password="pw", snapshot="false"))).close()
    with pytest.raises(SourceError, match="RELOAD"):
        BinlogSource(parse_mysql_uri(mariadb.uri("x.*", user="reader", password="pw")))


def test_a_wrong_password_or_port_is_one_line(mariadb) -> None:
    with pytest.raises(SourceError, match=r"mysql://changefeed@127.0.0.1:\d+: cannot connect: Access denied"):
        BinlogSource(parse_mysql_uri(mariadb.uri("x.*", password="wrong")))


@pytest.mark.parametrize(("uri", "message"), [
    ("mysql://u@h:3306/?server-id=abc", "server-id='abc' is not an integer"),
    ("mysql://u@h:3306/?server-id=0", "server-id=0 is out of range"),
    ("mysql://u@h:3306/?colour=red", "unknown parameter 'colour'"),
    ("mysql://u@h:3306/db", "unexpected path '/db'"),
    ("mysql://u@h:3306/?snapshot=maybe", "snapshot='maybe' is not true or false"),
    ("mysql://u@h:notaport/", "Port could not be cast"),
    ("mysql://u@h:3306/?tables=", "names no table"),
])
def test_bad_uris_say_which_parameter(uri: str, message: str) -> None:
    with pytest.raises(ConfigError, match="mysql source URI") as e:
        parse_mysql_uri(uri)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_the_server_s_own_server_id_is_refused(mariadb) -> None:
    uri = f"mysql://changefeed:changefeed@127.0.0.1:{mariadb.port}/?tables=x.*&server-id=1&snapshot=false"
    with pytest.raises(SourceError, match="server-id=1 is the server's own server_id"):
        BinlogSource(parse_mysql_uri(uri))


def test_a_checkpoint_the_server_no_longer_has_is_one_line(mariadb) -> None:
    from changefeed.mysql.checkpoint import Checkpoint, Position

    src = BinlogSource(parse_mysql_uri(mariadb.uri("x.*")), resume=Checkpoint(Position("binlog.999999", 4), 0, []))
    with pytest.raises(SourceError, match=r"reading the binlog at binlog.999999:4: .*log") as e:
        list(src.transactions(follow=False))
    src.close()
    assert "\n" not in str(e.value)
