"""The canal-json decoder learns table definitions from the DDL in the stream."""

from __future__ import annotations

import orjson

from changefeed.canal import CanalJSONDecoder
from changefeed.model import Kind


def ddl(query: str, table: str = "t", etype: str = "CREATE", ms: int = 5) -> bytes:
    return orjson.dumps({"id": 0, "database": "d", "table": table, "pkNames": None, "isDdl": True, "type": etype,
                         "es": 1, "ts": 1, "sql": query, "sqlType": None, "mysqlType": None, "data": None,
                         "old": None, "_tidb": {"commitTs": ms << 18}})


def insert(data: dict, mysql_types: dict, pk=("id",), ms: int = 6) -> bytes:
    return orjson.dumps({"id": 0, "database": "d", "table": "t", "pkNames": list(pk), "isDdl": False,
                         "type": "INSERT", "es": 1, "ts": 1, "sql": "", "sqlType": {}, "mysqlType": mysql_types,
                         "old": None, "data": [data], "_tidb": {"commitTs": ms << 18}})


CREATE = ("CREATE TABLE `d`.`t` (`id` int NOT NULL, `e` enum('x','y') NOT NULL DEFAULT 'y', "
          "`s` set('a','b') NULL, `v` varchar(20) NULL, PRIMARY KEY (`id`))")
TYPES = {"id": "int", "e": "enum", "s": "set", "v": "varchar"}
ROW = {"id": "1", "e": "2", "s": "3", "v": "hi"}


def test_create_table_gives_full_definition_and_names():
    dec = CanalJSONDecoder()
    [d] = dec.decode(ddl(CREATE))
    assert d.kind is Kind.DDL and d.ddl_type == "ActionCreateTable" and d.pre_table is None
    assert [c.name for c in d.table.columns] == ["id", "e", "s", "v"]
    [ev] = dec.decode(insert(ROW, TYPES))
    t = ev.table
    assert t is d.table  # the very definition the DDL gave
    assert t.by_name["e"].type.elements == ("x", "y") and t.by_name["e"].nullable is False
    assert t.by_name["e"].default == "y" and t.by_name["v"].nullable is True
    assert ev.after == {"id": 1, "e": 2, "s": 3, "v": "hi"}
    assert t.by_name["e"].to_json(ev.after["e"]) == "y" and t.by_name["s"].to_json(3) == "a,b"


def test_alter_is_followed_and_drop_gives_the_before_image():
    dec = CanalJSONDecoder()
    dec.decode(ddl(CREATE))
    [a] = dec.decode(ddl("ALTER TABLE `d`.`t` ADD COLUMN `n` bigint unsigned NOT NULL DEFAULT 0", etype="ALTER"))
    assert a.ddl_type == "ActionAddColumn"
    assert [c.name for c in a.pre_table.columns] == ["id", "e", "s", "v"]
    assert [c.name for c in a.table.columns] == ["id", "e", "s", "v", "n"]
    [ev] = dec.decode(insert(dict(ROW, n="18446744073709551615"), dict(TYPES, n="bigint unsigned")))
    assert ev.table is a.table and ev.after["n"] == 18446744073709551615
    [drop] = dec.decode(ddl("DROP TABLE `d`.`t`", etype="ERASE"))
    assert drop.table is None and drop.pre_table is a.table


def test_a_missed_ddl_falls_back_to_the_message():
    dec = CanalJSONDecoder()
    dec.decode(ddl(CREATE))
    # a column the decoder never saw added: the message's own facts are used, nothing is guessed
    [ev] = dec.decode(insert(dict(ROW, extra="1"), dict(TYPES, extra="int")))
    assert [c.name for c in ev.table.columns] == ["id", "e", "s", "v", "extra"]
    assert ev.table.by_name["e"].type.elements == () and ev.after["e"] == 2
    # a type that disagrees is not trusted either
    [ev] = dec.decode(insert(ROW, dict(TYPES, v="int")) .replace(b'"v":"hi"', b'"v":"7"'))
    assert ev.table.by_name["v"].type.name == "int" and ev.after["v"] == 7


def test_a_ddl_sent_again_is_not_applied_twice():
    """A DDL's copy (a producer's retry, a transcode restarted, a lagging partition's copy forwarded): applied
    again, RENAME COLUMN would not fit and the table would be forgotten (its enum/set members with it: the
    issue-40 bug). The copy gives the same definitions, and rows between the copies keep the full ones."""
    dec = CanalJSONDecoder()
    dec.decode(ddl(CREATE))
    rename = ddl("ALTER TABLE `d`.`t` RENAME COLUMN `v` TO `w`", etype="ALTER", ms=7)
    [first] = dec.decode(rename)
    renamed = {"id": "int", "e": "enum", "s": "set", "w": "varchar"}
    row = {"id": "1", "e": "2", "s": "3", "w": "hi"}
    [again] = dec.decode(rename)
    assert again.table is first.table and again.pre_table is first.pre_table
    [ev] = dec.decode(insert(row, renamed, ms=8))
    assert ev.table is first.table and ev.table.by_name["s"].type.elements == ("a", "b")
    drop = ddl("ALTER TABLE `d`.`t` DROP COLUMN `e`", etype="ALTER", ms=9)
    dec.decode(drop)
    # a restart sends both again, with a row of the shape between them
    [r2] = dec.decode(rename)
    assert r2.table is first.table
    [ev] = dec.decode(insert(row, renamed, ms=8))
    assert ev.table is first.table and ev.after["s"] == 3
    [d2] = dec.decode(drop)
    [ev] = dec.decode(insert({"id": "2", "s": "1", "w": "x"}, {"id": "int", "s": "set", "w": "varchar"}, ms=10))
    assert ev.table is d2.table and ev.table.by_name["s"].type.elements == ("a", "b")
