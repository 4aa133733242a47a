"""Event lines: the fields beside the row that a source may know (a partition's table id, the start TSO)."""

from __future__ import annotations

import orjson
import pytest

from changefeed.errors import DecodeError
from changefeed.eventline import EventReader, EventWriter
from changefeed.model import Column, Event, Index, Kind, TableInfo

T = TableInfo("d", "t", [Column("id", "int", nullable=False, primary_key=True), Column("v", "varchar(10)")],
              [Index("PRIMARY", ["id"], primary=True, unique=True)], 148, 1)


def test_a_partitions_row_keeps_its_physical_table_id_through_a_line():
    ev = Event(kind=Kind.INSERT, commit_ts=7, table=T, after={"id": 1, "v": "a"}, physical_table_id=150)
    line = EventWriter().line(ev)
    assert orjson.loads(line)["physicalTableID"] == 150
    back = EventReader().parse(line)
    assert back.physical_table_id == 150 and back.table.table_id == 148 and back.after == ev.after
    plain = EventWriter().line(Event(kind=Kind.INSERT, commit_ts=7, table=T, after={"id": 1, "v": "a"}))
    assert b"physicalTableID" not in plain and EventReader().parse(plain).physical_table_id is None


@pytest.mark.parametrize("bad", [0, -1, "150", 1.5, 1 << 63])
def test_a_bad_physical_table_id_is_named(bad):
    obj = orjson.loads(EventWriter().line(Event(kind=Kind.INSERT, commit_ts=7, table=T, after={"id": 1, "v": "a"})))
    obj["physicalTableID"] = bad
    with pytest.raises(DecodeError, match="physicalTableID"):
        EventReader().parse(orjson.dumps(obj))


def test_a_binary_default_travels_as_bytes():
    """A BINARY column's stored default is bytes (`sqlschema.defaults`): written as `{"$b64": ...}`, read back
    as the same bytes."""
    import orjson

    from changefeed.eventline import table_from_json, table_to_json
    from changefeed.sqlschema import parse_create_table

    t = parse_create_table("CREATE TABLE t (id int PRIMARY KEY, b binary(3) DEFAULT x'7b02', v varchar(3) "
                           "DEFAULT '{a')")
    back = table_from_json(orjson.loads(orjson.dumps(table_to_json(t))))
    assert back.by_name["b"].default == b"{\x02\x00" and back.by_name["v"].default == "{a"
