"""Change rows back into events (spark/rebuild.py), without Spark: the inverse of decode's text maps in both dialects
over every type family of the workload, and the definition a row without one takes."""

from __future__ import annotations

import orjson
import pytest

from changefeed.eventline import table_to_json
from changefeed.model import Column, Index, Kind, TableInfo
from changefeed.spark.decode import _Converters
from changefeed.spark.rebuild import DefBook, Rebuilder
from changefeed.workload import generate


@pytest.mark.parametrize("dialect", ["text", "canal"])
def test_every_value_of_the_workload_comes_back_from_its_text(dialect: str) -> None:
    rb = Rebuilder(DefBook(), dialect)
    n = 0
    for ev in generate(seed=13, transactions=300):
        if not ev.is_row:
            continue
        conv = _Converters(ev.table, dialect)
        for image in (ev.before, ev.after):
            if image is None:
                continue
            back = rb.values(ev.table, conv.text(image))
            assert back == image, (ev.table.qualified, {k: (v, back[k]) for k, v in image.items() if back[k] != v})
            n += 1
    assert n > 500


def _t(version: int, cols: list[str]) -> TableInfo:
    return TableInfo("db", "t", columns=[Column(c, "int", nullable=c != "id") for c in cols], version=version,
                     indexes=[Index("PRIMARY", ["id"], primary=True, unique=True)])


def test_a_row_without_a_definition_takes_the_one_in_force_at_its_commit_ts() -> None:
    v1, v2 = _t(1, ["id", "a"]), _t(2, ["id", "a", "b"])
    book = DefBook()
    d1, d2 = (orjson.dumps(table_to_json(t)).decode() for t in (v1, v2))
    book.add("db", "t", 100, 1, d1, 2)  # CREATE TABLE at 100
    book.add("db", "t", 200, 2, d2, 2)  # ADD COLUMN b at 200
    rb = Rebuilder(book, "text")
    row = ("insert", "db", "t", 150, None, None, None, [("id", "1"), ("a", "2")], None, None, None, None)
    ev = rb.event(row)
    assert ev.kind is Kind.INSERT and ev.table.version == 1 and ev.after == {"id": 1, "a": 2}
    later = ("update", "db", "t", 250, None, None, [("id", "1"), ("a", "2"), ("b", None)],
             [("id", "1"), ("a", "3"), ("b", "4")], None, None, None, None)
    ev = rb.event(later)
    assert ev.table.version == 2 and ev.before == {"id": 1, "a": 2, "b": None} and ev.after["b"] == 4
    # a row at 250 with v1's columns (a lagging partition, before the DDL reached it) still finds v1
    assert rb.event(("delete", "db", "t", 250, None, None, [("id", "1"), ("a", "2")], None, None, None, None,
                     None)).table.version == 1


def test_a_row_of_an_unknown_table_is_one_line() -> None:
    from changefeed.errors import ChangefeedError

    with pytest.raises(ChangefeedError, match="no table definition of it"):
        Rebuilder(DefBook(), "text").event(("insert", "db", "x", 1, None, None, None, [("id", "1")], None, None,
                                            None, None))
