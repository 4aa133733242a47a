"""Every MySQL type family, from the SQL that wrote it to the event model's datums (REFERENCE-NOTES §0).

The expected datums are written out here from the SQL literals, not taken from the code under test. The same
row is read twice: by the snapshot (SELECT) and from the binlog, and both must give them.
"""

from __future__ import annotations

import struct

import pytest

from changefeed.model import Kind
from changefeed.mysql.source import BinlogSource
from changefeed.mysql.uri import parse_mysql_uri

from .helpers import drain

DDL = """CREATE TABLE types (
  id INT PRIMARY KEY,
  ti TINYINT, tiu TINYINT UNSIGNED, b1 TINYINT(1), si SMALLINT, siu SMALLINT UNSIGNED, mi MEDIUMINT,
  miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,
  f FLOAT, d DOUBLE, dec0 DECIMAL(10,0), dec2 DECIMAL(12,2), dec30 DECIMAL(40,30),
  dt DATE, dtm DATETIME, dtm3 DATETIME(3), dtm6 DATETIME(6), ts6 TIMESTAMP(6) NULL, tm TIME, tm6 TIME(6), y YEAR,
  c CHAR(5), vc VARCHAR(30), tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT,
  bn BINARY(4), vb VARBINARY(10), tb TINYBLOB, bl BLOB, mb MEDIUMBLOB, lb LONGBLOB,
  e ENUM('small','medium','large'), s SET('a','b','c','d'), bt1 BIT(1), bt64 BIT(64), j JSON, g POINT
) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"""

ROW = """INSERT INTO types VALUES ({id},
  -128, 255, 1, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, -9223372036854775808,
  18446744073709551615,
  1.5, -2.25e-10, 1234567890, -1234567890.12, -0.000000000000000000000000000001,
  '2020-02-20', '2020-02-20 02:20:20', '1999-12-31 23:59:59.999', '2020-02-20 02:20:20.123456',
  '2038-01-19 03:14:07.000001', '-838:59:59', '12:34:56.000789', 2155,
  'ab', 'héllo wörld ✓', 'tiny', 'text', 'medium', 'long',
  x'0102', x'00ff10', x'aa', x'bbcc', x'', x'deadbeef',
  'medium', 'a,d', b'1', b'1111111111111111111111111111111111111111111111111111111111111111',
  '{{"k": [1, 2.5, "x"], "n": null}}', ST_GeomFromText('POINT(1 2)')
)"""

EXPECTED = {
    "ti": -128, "tiu": 255, "b1": 1, "si": -32768, "siu": 65535, "mi": -8388608, "miu": 16777215,
    "i": -2147483648, "iu": 4294967295, "bi": -9223372036854775808, "biu": 18446744073709551615,
    "f": 1.5, "d": -2.25e-10, "dec0": "1234567890", "dec2": "-1234567890.12",
    "dec30": "-0.000000000000000000000000000001",
    "dt": "2020-02-20", "dtm": "2020-02-20 02:20:20", "dtm3": "1999-12-31 23:59:59.999",
    "dtm6": "2020-02-20 02:20:20.123456", "ts6": "2038-01-19 03:14:07.000001", "tm": "-838:59:59",
    "tm6": "12:34:56.000789", "y": 2155,
    "c": "ab", "vc": "héllo wörld ✓", "tt": "tiny", "tx": "text", "mt": "medium", "lt": "long",
    "bn": b"\x01\x02\x00\x00", "vb": b"\x00\xff\x10", "tb": b"\xaa", "bl": b"\xbb\xcc", "mb": b"",
    "lb": b"\xde\xad\xbe\xef",
    "e": 2, "s": 0b1001, "bt1": 1, "bt64": (1 << 64) - 1,
    "j": '{"k": [1, 2.5, "x"], "n": null}',
    # MySQL's internal geometry: a 4-byte SRID, then the WKB (little endian, type 1 = point)
    "g": struct.pack("<IBIdd", 0, 1, 1, 1.0, 2.0),
}
NULLS = {k: None for k in EXPECTED}


@pytest.mark.parametrize("metadata", ["FULL", "MINIMAL"])
def test_every_type_family_from_sql_to_events(mariadb, metadata: str) -> None:
    """FULL: the binlog names the columns and gives charsets, enum/set members, signedness; MINIMAL (MySQL's
    default): they come from the definitions tracked at that binlog position."""
    db = mariadb.fresh_db(f"types_{metadata.lower()}_db")
    mariadb.run(DDL, ROW.format(id=1), "SET time_zone = '+00:00'", db=db)
    mariadb.run(f"SET GLOBAL binlog_row_metadata = '{metadata}'")
    try:
        src = BinlogSource(parse_mysql_uri(mariadb.uri(f"{db}.*")))  # row 1 by the snapshot, the rest: binlog
        assert src.metadata_full is (metadata == "FULL")
        filled = []
        fill = src._fill_metadata
        src._fill_metadata = lambda ev, t: (filled.append(all(c.name is None for c in ev.columns)), fill(ev, t))
        mariadb.run("SET time_zone = '+00:00'", ROW.format(id=2), "INSERT INTO types (id) VALUES (3)",
                    "UPDATE types SET vc = 'changed', s = '', e = 'large', j = '[]' WHERE id = 2",
                    "DELETE FROM types WHERE id = 1", db=db)
        txs = drain(src)
        src.close()
    finally:
        mariadb.run("SET GLOBAL binlog_row_metadata = 'FULL'")
    # with MINIMAL the table maps came without names, and the tracked definition named the columns
    assert filled == ([] if metadata == "FULL" else [True] * len(filled)) and (metadata == "FULL" or filled)
    events = [e for _, evs in txs for e in evs]
    ddl = [e for e in events if e.kind is Kind.DDL]
    assert [e.ddl_type for e in ddl] == ["ActionCreateTable"]
    t = ddl[0].table
    assert t.by_name["j"].type.name == "json"  # MariaDB's JSON is LONGTEXT CHECK (json_valid(j)): kept as JSON
    inserts = {e.after["id"]: e.after for e in events if e.kind is Kind.INSERT}
    assert set(inserts) == {1, 2, 3}
    for rid in (1, 2):  # 1: the snapshot's SELECT; 2: the binlog
        got = {k: v for k, v in inserts[rid].items() if k != "id"}
        diff = {k: (got.get(k), v) for k, v in EXPECTED.items() if got.get(k) != v}
        assert not diff, f"row {rid} (got, expected): {diff}"
    assert {k: v for k, v in inserts[3].items() if k != "id"} == NULLS
    (upd,) = [e for e in events if e.kind is Kind.UPDATE]
    assert upd.before == {"id": 2, **EXPECTED}
    assert upd.after == {"id": 2, **EXPECTED, "vc": "changed", "s": 0, "e": 3, "j": "[]"}
    (dele,) = [e for e in events if e.kind is Kind.DELETE]
    assert dele.before == {"id": 1, **EXPECTED}
    for e in events:
        if e.kind is not Kind.DDL:
            for c in e.table.columns:  # what the other sources produce passes the column's own checks
                for row in (e.before, e.after):
                    if row is not None:
                        assert c.normalize(row[c.name]) == row[c.name]


def test_json_numbers_keep_their_kind_from_the_binlog_to_the_messages(mariadb) -> None:
    """MariaDB's JSON is text: `-15000000000.0` is a double there (JSON_TYPE says DOUBLE), and stays one: the
    integral double is written with its `.0`, by the snapshot and from the binlog, and through canal-json and
    back, so the lake's JSON string reads as the same kind of number."""
    from changefeed.canal import CanalJSONDecoder, CanalJSONEncoder
    from changefeed.config import build_config

    db = mariadb.fresh_db("json_kind_db")
    values = ["-15000000000.0", "[1.0, 2, -0.5, 1e2]", '{"a": -0.0, "b": 7}']
    mariadb.run("CREATE TABLE j (id INT PRIMARY KEY, v JSON)",
                f"INSERT INTO j VALUES (1, '{values[0]}')", db=db)  # row 1 by the snapshot, the rest: binlog
    src = BinlogSource(parse_mysql_uri(mariadb.uri(f"{db}.*")))
    mariadb.run(*(f"INSERT INTO j VALUES ({i}, '{v}')" for i, v in enumerate(values, 2)), db=db)
    with mariadb.admin(db) as conn, conn.cursor() as cur:  # what the server itself says each value is
        cur.execute("SELECT id, JSON_TYPE(v) FROM j ORDER BY id")
        kinds = dict(cur.fetchall())
    events = [e for _, evs in drain(src) for e in evs if e.kind is Kind.INSERT]
    src.close()
    assert kinds[1] == kinds[2] == "DOUBLE"
    got = {e.after["id"]: e.after["v"] for e in events}
    assert got == {1: "-15000000000.0", 2: "-15000000000.0", 3: "[1.0, 2, -0.5, 100.0]", 4: '{"a": -0.0, "b": 7}'}
    cfg = build_config("canal-json", {"enable-tidb-extension": "true"})
    enc, dec = CanalJSONEncoder(cfg), CanalJSONDecoder(cfg)
    back = [ev for e in events for m in enc.encode(e) for ev in dec.decode(m.value)]
    assert {e.after["id"]: e.after["v"] for e in back} == got


def test_zero_year_and_zero_timestamp_from_the_binlog(mariadb) -> None:
    """mysql-replication reads YEAR as its byte + 1900 and a TIMESTAMP as its seconds since the epoch: YEAR 0
    arrives as 1900 and the zero TIMESTAMP as 1970-01-01 00:00:00 (no TIMESTAMP is the epoch itself: their range
    starts a second later). Both are the zero values TiDB keeps, as the snapshot's SELECT reads them."""
    db = mariadb.fresh_db("zeros_db")
    ddl = ("CREATE TABLE z (id INT PRIMARY KEY, y YEAR, ts TIMESTAMP NOT NULL DEFAULT '0000-00-00 00:00:00', "
           "ts3 TIMESTAMP(3) NULL)")
    row = "INSERT INTO z VALUES ({id}, 0, '0000-00-00 00:00:00', '0000-00-00 00:00:00.000')"
    mariadb.run("SET sql_mode = ''", ddl, row.format(id=1), db=db)
    src = BinlogSource(parse_mysql_uri(mariadb.uri(f"{db}.*")))  # row 1 by the snapshot, row 2 by the binlog
    mariadb.run("SET sql_mode = ''", "SET time_zone = '+00:00'", row.format(id=2), db=db)
    txs = drain(src)
    src.close()
    inserts = {e.after["id"]: e.after for _, evs in txs for e in evs if e.kind is Kind.INSERT}
    want = {"y": 0, "ts": "0000-00-00 00:00:00", "ts3": "0000-00-00 00:00:00.000"}
    for rid in (1, 2):
        assert {k: inserts[rid][k] for k in want} == want, rid


def test_mysql_binary_json_with_temporal_values() -> None:
    """MySQL's binary JSON holds dates and times as such (JSON_OBJECT('at', NOW())); mysql-replication gives them
    as Python's date, datetime and timedelta inside the document (json_binary.py). MySQL and TiDB print them as
    strings, a datetime or time with six fractional digits. (MariaDB's JSON is text: no server here makes one.)"""
    import datetime as dt

    from changefeed.model import Column
    from changefeed.mysql.convert import converter

    to_datum, _ = converter(Column("j", "json"))
    doc = {b"at": dt.datetime(2024, 1, 2, 3, 4, 5, 6), b"d": dt.date(2024, 1, 2),
           b"t": [dt.timedelta(hours=-1, microseconds=5)]}
    assert to_datum(doc) == '{"at": "2024-01-02 03:04:05.000006", "d": "2024-01-02", "t": ["-00:59:59.999995"]}'


def test_latin1_text_with_minimal_row_metadata(mariadb) -> None:
    """With binlog_row_metadata=MINIMAL the table map still gives each string column's character set; the
    tracked definition fills in only what it lacks (a latin1 table's text was decoded as UTF-8: 'café' failed)."""
    db = mariadb.fresh_db("latin1_db")
    mariadb.run("CREATE TABLE l (id INT PRIMARY KEY, v VARCHAR(10)) DEFAULT CHARSET=latin1", db=db)
    mariadb.run("SET GLOBAL binlog_row_metadata = 'MINIMAL'")
    try:
        src = BinlogSource(parse_mysql_uri(mariadb.uri(f"{db}.*")))
        mariadb.run("SET NAMES utf8mb4", "INSERT INTO l VALUES (1, 'Ã©')", "ALTER TABLE l ADD COLUMN w VARCHAR(10)",
                    "INSERT INTO l VALUES (2, 'Ã©', 'Ã©')", db=db)
        txs = drain(src)
        src.close()
    finally:
        mariadb.run("SET GLOBAL binlog_row_metadata = 'FULL'")
    # C3 A9 in latin1: two characters, not UTF-8's é; `w` added by an ALTER the capture tracked
    assert [e.after for _, evs in txs for e in evs if e.kind is Kind.INSERT] == [
        {"id": 1, "v": "Ã©"}, {"id": 2, "v": "Ã©", "w": "Ã©"}]


def test_negative_times_with_a_fraction_from_the_binlog(mariadb) -> None:
    """TIME2 keeps a negative value as one signed number (its fraction counted down from the next second), which
    mysql-replication splits into whole seconds and a fraction read as if positive; every fsp back to the value."""
    db = mariadb.fresh_db("neg_time_db")
    values = ["-00:00:01.25", "-12:34:56.1", "-00:00:00.5", "-838:59:58.999999", "-01:00:00.001", "-00:01:00.5",
              "00:00:01.25"]
    cols = "t1 TIME(1), t2 TIME(2), t3 TIME(3), t4 TIME(4), t5 TIME(5), t6 TIME(6)"
    row = "INSERT INTO nt VALUES ({}, '{v}', '{v}', '{v}', '{v}', '{v}', '{v}')"
    mariadb.run(f"CREATE TABLE nt (id INT PRIMARY KEY, {cols})",  # ids 100...: read by the snapshot's SELECT
                *(row.format(100 + i, v=v) for i, v in enumerate(values)), db=db)
    src = BinlogSource(parse_mysql_uri(mariadb.uri(f"{db}.*")))
    mariadb.run(*(row.format(i, v=v) for i, v in enumerate(values)), db=db)
    want = {}
    with mariadb.admin(db).cursor() as cur:  # the server's own text of each stored value
        cur.execute("SELECT id, CAST(t1 AS CHAR), CAST(t2 AS CHAR), CAST(t3 AS CHAR), CAST(t4 AS CHAR), "
                    "CAST(t5 AS CHAR), CAST(t6 AS CHAR) FROM nt")
        for rid, *texts in cur.fetchall():
            want[rid] = dict(zip(("t1", "t2", "t3", "t4", "t5", "t6"), texts, strict=True))
    txs = drain(src)
    src.close()
    got = {e.after["id"]: {k: v for k, v in e.after.items() if k != "id"}
           for _, evs in txs for e in evs if e.kind is Kind.INSERT}
    assert len(got) == 2 * len(values) and got == want
