"""A window with DDL whose tables are known from the batches' spans (a database's first window: each CREATE TABLE
before its table's rows): its segments found without the Spark job, the same writes and DDL as the job finds;
a DDL inside a table's span, or a span astride the window, takes the job, and its rows still land on the right
side of the DDL."""

from __future__ import annotations

from changefeed.model import Column, TableInfo
from changefeed.spark.apply import ApplyOptions, BatchReport, ConsumerState
from changefeed.spark.apply.catalog import TableCatalog
from changefeed.spark.apply.ddlplan import Ddl
from changefeed.spark.apply.schedule import batch_spans
from changefeed.spark.apply.segments import TableWrite, WindowApplier, stamps_from_spans

ROWS = "database string, `table` string, kind string, commit_ts long, topic string, partition int, offset long"
LO, HI = 50, 100


def _def(table: str, *cols: str) -> TableInfo:
    return TableInfo("db", table, columns=[Column(c, "int", primary_key=c == "id", nullable=c != "id") for c in cols])


def _create(table: str, ts: int) -> Ddl:
    return Ddl(ts, f"CREATE TABLE db.{table} (id int primary key)", "ActionCreateTable", "db", table,
               _def(table, "id"), None)


def _add_column(table: str, ts: int) -> Ddl:
    return Ddl(ts, f"ALTER TABLE db.{table} ADD COLUMN a int", "ActionAddColumn", "db", table,
               _def(table, "id", "a"), _def(table, "id"))


def _spans(rows: list[tuple]) -> list[dict]:
    """The batch's spans as its first job finds them (per kind, topic, partition, database and table)."""
    agg: dict[tuple, dict] = {}
    for db, tbl, kind, ts, topic, part, _ in rows:
        r = agg.setdefault((kind, topic, part, db, tbl), {"kind": kind, "topic": topic, "partition": part,
                                                          "database": db, "table": tbl, "n": 0, "lo": ts, "ts": ts})
        r["n"] += 1
        r["lo"], r["ts"] = min(r["lo"], ts), max(r["ts"], ts)
    spans = batch_spans(agg.values())
    assert spans is not None
    return [spans]


def _apply(spark, rows: list[tuple], ddls: list[Ddl], spans: list[dict] | None) -> tuple[list, int]:
    """The window (LO, HI] of `rows` applied with `ddls` pending: what is written and applied, in order (each
    write's table, version, bounds, changes, and its rows' commit ts), and the Spark jobs the apply ran."""
    cat = TableCatalog(ApplyOptions(), ConsumerState())
    for d in ddls:
        cat.pending[(d.commit_ts, d.query)] = Ddl(d.commit_ts, d.query, d.ddl_type, d.database, d.table, d.after,
                                                  d.before)
    done: list[tuple] = []
    writes: list[TableWrite] = []

    def write(work: list[TableWrite]) -> list[tuple[str, str]]:
        for w in work:
            done.append(("rows", w.table, w.version, w.after, w.upto, w.changes, len(writes)))
            writes.append(w)
        return [(w.database, w.table) for w in work]

    def ddl(steps: list) -> None:
        done.extend(("ddl", s.ddl.table, s.version) for s in steps)

    window = spark.createDataFrame(rows, ROWS).where(f"commit_ts > {LO} AND commit_ts <= {HI}")
    sched = spark.sparkContext._jsc.sc().dagScheduler()
    before = sched.numTotalJobs()
    WindowApplier(ApplyOptions(), cat, ConsumerState(), write, ddl).apply(
        window, LO, HI, BatchReport(0), keyed_batch=None, from_cache=True, spans=spans)
    jobs = sched.numTotalJobs() - before
    # each write's rows (counted after the apply, so that its jobs are not the apply's)
    out = [x[:-1] + (sorted(r["commit_ts"] for r in writes[x[-1]].rows.collect()),) if x[0] == "rows" else x
           for x in done]
    return out, jobs


def _row(table: str, ts: int, offset: int, part: int = 0) -> tuple:
    return ("db", table, "insert", ts, "t", part, offset)


def test_a_first_window_takes_its_segments_from_the_spans(spark) -> None:
    # each table created before its rows; b's CREATE falls within a's rows (it does not touch a)
    rows = [_row("a", 60, 1), _row("a", 70, 2, part=1), _row("b", 66, 3), _row("b", 90, 4), _row("c", 95, 5)]
    ddls = [_create("a", 55), _create("b", 65), _create("c", 92)]
    fast, jobs = _apply(spark, rows, ddls, _spans(rows))
    slow, slow_jobs = _apply(spark, rows, ddls, None)
    assert jobs == 0 and slow_jobs >= 1
    assert fast == slow
    # every row written once, after its table's CREATE
    written = {x[1]: x[-1] for x in fast if x[0] == "rows"}
    assert written == {"a": [60, 70], "b": [66, 90], "c": [95]}
    order = [x[:2] for x in fast]
    assert all(order.index(("ddl", t)) < order.index(("rows", t)) for t in "abc")


def test_a_ddl_inside_a_tables_span_takes_the_job_and_cuts_its_rows(spark) -> None:
    rows = [_row("a", 60, 1), _row("a", 70, 2), _row("a", 80, 3)]
    ddls = [_create("a", 55), _add_column("a", 75)]
    assert stamps_from_spans(_spans(rows), LO, HI, ddls, True) is None
    got, jobs = _apply(spark, rows, ddls, _spans(rows))
    assert jobs >= 1
    assert got == _apply(spark, rows, ddls, None)[0]
    # the rows before the ADD COLUMN written before it, the one after it after
    assert [(x[0], x[-1]) if x[0] == "rows" else x[:2] for x in got] == [
        ("ddl", "a"), ("rows", [60, 70]), ("ddl", "a"), ("rows", [80])]


def test_a_span_astride_the_window_takes_the_job(spark) -> None:
    rows = [_row("a", 40, 1), _row("a", 60, 2), _row("b", 70, 3), _row("b", 120, 4)]
    ddls = [_create("a", 55), _create("b", 65)]
    spans = _spans(rows)
    assert stamps_from_spans(spans, LO, HI, ddls, True) is None
    assert stamps_from_spans(spans, LO, HI, [], True) is None
    got, jobs = _apply(spark, rows, ddls, spans)
    assert jobs >= 1
    assert got == _apply(spark, rows, ddls, None)[0]
    assert {x[1]: x[-1] for x in got if x[0] == "rows"} == {"a": [60], "b": [70]}


def test_spans_wholly_outside_the_window_are_no_tables_of_it() -> None:
    spans = [{("db", "old"): (10, 50, 3), ("db", "a"): (60, 70, 2), ("db", "later"): (101, 130, 4)}]
    got = stamps_from_spans(spans, LO, HI, [_create("a", 55)], True)
    assert got == ({("db", "a"): 2}, {("db", "a"): [60]})


def test_ddl_whose_tables_are_found_later_take_the_job() -> None:
    spans = [{("db", "a"): (60, 70, 2), ("db", "z"): (80, 90, 1)}]
    ren = Ddl(62, "RENAME TABLE db.a TO db.y", "ActionRenameTable", "db", "y", _def("y", "id"), None)
    assert stamps_from_spans(spans, LO, HI, [ren], True) is None
    # a DDL without its definition (read from its statement later): any table's span may hold it
    bare = Ddl(85, "ALTER TABLE db.q ADD COLUMN a int", "ActionAddColumn", "db", "q", None, None)
    assert stamps_from_spans(spans, LO, HI, [bare], True) is None
    assert stamps_from_spans(spans, LO, HI, [bare], False) is None
    # outside every span it cuts none
    early = Ddl(55, "ALTER TABLE db.q ADD COLUMN a int", "ActionAddColumn", "db", "q", None, None)
    assert stamps_from_spans(spans, LO, HI, [early], False) is not None
