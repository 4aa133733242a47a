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
