"""The producer's routing of what the codecs give: each message to its topic and partition."""

from __future__ import annotations

from pathlib import Path

import orjson

from changefeed.codecs import make_encoder
from changefeed.config import build_config
from changefeed.model import Column, Event, Index, Kind, TableInfo
from changefeed.produce import Producer
from changefeed.routing import DispatchRule, Partitioner, Router, TopicExpression
from changefeed.tablefilter import TableFilter
from changefeed.transport.files import FileProducer, read_topic


def _table(name: str, tid: int) -> TableInfo:
    return TableInfo("d", name, [Column("id", "int", nullable=False, primary_key=True)],
                     [Index("PRIMARY", ["id"], primary=True, unique=True)], tid, 1)


def test_a_bootstrap_due_by_time_goes_to_its_tables_own_topic(tmp_path: Path):
    """TiCDC's bootstraper keeps each table's topic and sends a table's periodic BOOTSTRAP there: with a topic
    per table, a consumer of that topic gets every bootstrap, not only the first."""
    now = [1000.0]
    cfg = build_config("simple", {"send-bootstrap-interval-in-sec": "10"})
    router = Router("default", [DispatchRule(TableFilter(["*.*"]), TopicExpression("tidb_{schema}_{table}"),
                                             Partitioner("default"))], partition_num=1)
    out = FileProducer(tmp_path, partition_num=1)
    p = Producer(make_encoder(cfg, clock_s=lambda: now[0]), router, out)
    t, u = _table("t", 1), _table("u", 2)
    p.send(Event(Kind.INSERT, 1 << 18, table=t, after={"id": 1}))
    p.send(Event(Kind.INSERT, 2 << 18, table=u, after={"id": 1}))
    now[0] += 20  # both tables' bootstraps due by time, sent with the next watermark
    p.send(Event(Kind.WATERMARK, 3 << 18))
    p.close()
    out.close()

    def types(topic: str) -> list[str]:
        return [orjson.loads(r.value)["type"] for r in read_topic(tmp_path, topic)]

    for topic in ("tidb_d_t", "tidb_d_u"):  # the first before the row, the second by time, before the watermark
        got = [k for k in types(topic) if k != "WATERMARK"]
        assert got == ["BOOTSTRAP", "INSERT", "BOOTSTRAP"], (topic, types(topic))
        assert types(topic)[-1] == "WATERMARK"
    assert "BOOTSTRAP" not in types("default")


def test_a_bootstrap_carries_the_whole_table_when_a_column_selector_cuts_the_rows(tmp_path: Path):
    """TiCDC's column selector empties a dropped column's values; the table's schema stays whole, so a BOOTSTRAP
    (like the CREATE's tableSchema) lists every column and index while the row message leaves the column out."""
    from changefeed.routing import ColumnSelector
    from changefeed.tablefilter import ColumnFilter

    cfg = build_config("simple", {})
    selector = ColumnSelector([(TableFilter(["d.*"]), ColumnFilter(["*", "!secret"]))])
    router = Router("topic", partition_num=1, column_selector=selector)
    out = FileProducer(tmp_path, partition_num=1)
    p = Producer(make_encoder(cfg), router, out)
    t = TableInfo("d", "t", [Column("id", "int", nullable=False, primary_key=True), Column("secret", "varchar(10)")],
                  [Index("PRIMARY", ["id"], primary=True, unique=True), Index("idx_s", ["secret"])], 1, 1)
    p.send(Event(Kind.INSERT, 1 << 18, table=t, after={"id": 1, "secret": "x"}))
    p.close()
    out.close()
    msgs = {m["type"]: m for m in (orjson.loads(r.value) for r in read_topic(tmp_path, "topic"))}
    schema = msgs["BOOTSTRAP"]["tableSchema"]
    assert [c["name"] for c in schema["columns"]] == ["id", "secret"]
    assert [i["name"] for i in schema["indexes"]] == ["idx_s", "primary"]  # an int PK is the handle: synthetic
    assert msgs["INSERT"]["data"] == {"id": "1"}
