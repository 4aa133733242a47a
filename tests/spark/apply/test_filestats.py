"""File statistics on the adds the driver commits (`filestats`): the columns Delta would index, Delta's string
truncation, ranges over several row groups; then, with Spark, the stats Delta's own writer records for a file equal
those read from its footer, and a filtered read of a table the engine committed skips files in Spark and in
delta-rs."""

from __future__ import annotations

import datetime as dt
import decimal
import os
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from changefeed.spark.apply import filestats

FIELDS = [("id", "long"), ("name", "string"), ("at", "timestamp"), ("day", "date"), ("price", "decimal(10,2)"),
          ("ok", "boolean"), ("raw", "binary"), ("v", "double")]


def _schema(fields: list[tuple[str, object]]) -> str:
    return orjson.dumps({"type": "struct", "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}}
                                                      for n, t in fields]}).decode()


def test_the_indexed_columns_are_the_first_32_leaves_or_those_named() -> None:
    wide = _schema([(f"c{i}", "long") for i in range(40)])
    assert [p for p, _ in filestats.indexed(wide, {})] == [(f"c{i}",) for i in range(32)]
    assert len(filestats.indexed(wide, {filestats.NUM_INDEXED: "-1"})) == 40
    assert [p for p, _ in filestats.indexed(wide, {filestats.NUM_INDEXED: "3"})] == [("c0",), ("c1",), ("c2",)]
    nested = _schema([("a", "long"), ("s", {"type": "struct", "fields": [
        {"name": "x", "type": "long", "nullable": True, "metadata": {}},
        {"name": "y.z", "type": "string", "nullable": True, "metadata": {}}]}), ("b", "string")])
    # named columns win over the count, in the schema's order; a named struct stands for its leaves; case ignored
    assert [p for p, _ in filestats.indexed(nested, {filestats.STATS_COLUMNS: "B, s", filestats.NUM_INDEXED: "1"})] \
        == [("s", "x"), ("s", "y.z"), ("b",)]
    assert [p for p, _ in filestats.indexed(nested, {filestats.STATS_COLUMNS: "`s`.`y.z`"})] == [("s", "y.z")]
    # a struct's leaves count one each toward the first N
    assert [p for p, _ in filestats.indexed(nested, {filestats.NUM_INDEXED: "2"})] == [("a",), ("s", "x")]


def test_strings_are_cut_as_delta_cuts_them_and_the_max_stays_above_every_value() -> None:
    short = "é" * 32
    assert filestats.truncate_min(short) == short and filestats.truncate_max(short) == short
    long_ascii = "a" * 40
    assert filestats.truncate_min(long_ascii) == "a" * 32
    assert filestats.truncate_max(long_ascii) == "a" * 32 + "\x7f"
    long_wide = "a" * 32 + "é" + "b"
    assert filestats.truncate_max(long_wide) == "a" * 32 + "\U0010ffff"
    for s in (long_ascii, long_wide, "z" * 31 + "\x7f" * 5):
        m = filestats.truncate_max(s)
        assert m is not None and m.encode() >= s.encode() and filestats.truncate_min(s).encode() <= s.encode()


def test_footer_ranges_span_every_row_group_and_follow_deltas_json(tmp_path: Path) -> None:
    base = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.UTC)
    rows = {
        "id": [7, None, -3, 12, 5, 9],
        "name": ["kiwi", "apple" * 10, None, "fig", "pear", "ápple"],
        "at": [base + dt.timedelta(microseconds=1500 * i + 1) for i in range(5)] + [None],
        "day": [dt.date(2024, 1, 1 + i) for i in range(6)],
        "price": [decimal.Decimal(f"{i}.0{i}") for i in range(6)],
        "ok": [True, False, None, True, True, False],
        "raw": [b"x", None, None, b"y", b"z", b"w"],
        "v": [1.5, float("nan"), None, 0.5, 2.5, 3.5],
    }
    types = [pa.int64(), pa.string(), pa.timestamp("us", tz="UTC"), pa.date32(), pa.decimal128(10, 2), pa.bool_(),
             pa.binary(), pa.float64()]
    table = pa.table({n: pa.array(rows[n], t) for (n, _), t in zip(FIELDS, types, strict=True)})
    file = tmp_path / "f.parquet"
    pq.write_table(table, file, row_group_size=2)  # three row groups
    assert pq.read_metadata(file).num_row_groups == 3
    stats = orjson.loads(filestats.of_file(str(file), _schema(FIELDS), {}))
    assert stats["numRecords"] == 6
    assert stats["nullCount"] == {n: sum(v is None for v in rows[n]) for n, _ in FIELDS}
    ids = [v for v in rows["id"] if v is not None]
    names = [v for v in rows["name"] if v is not None]
    ats = [v for v in rows["at"] if v is not None]
    mn, mx = stats["minValues"], stats["maxValues"]
    assert (mn["id"], mx["id"]) == (min(ids), max(ids))
    assert mn["name"] == min(names, key=str.encode)[:32]
    assert mx["name"] == filestats.truncate_max(max(names, key=str.encode))
    # milliseconds: the min rounded down, the max up, so every row lies within
    lo, hi = (dt.datetime.fromisoformat(mn["at"]), dt.datetime.fromisoformat(mx["at"]))
    assert lo <= min(ats) < lo + dt.timedelta(milliseconds=1) and hi - dt.timedelta(milliseconds=1) < max(ats) <= hi
    assert mn["at"].endswith("Z") and len(mn["at"]) == len("2024-05-01T12:00:00.000Z")
    assert (mn["day"], mx["day"]) == (min(rows["day"]).isoformat(), max(rows["day"]).isoformat())
    raw = filestats.of_file(str(file), _schema(FIELDS), {})
    assert f'"price":{min(rows["price"])}' in raw and f'"price":{max(rows["price"])}' in raw  # exact numbers
    # a boolean, a binary and a float keep a null count only (a footer's float range leaves NaN out)
    assert not {"ok", "raw", "v"} & (set(mn) | set(mx))
    # only the named columns
    named = orjson.loads(filestats.of_file(str(file), _schema(FIELDS), {filestats.STATS_COLUMNS: "day,id"}))
    assert set(named["minValues"]) == {"id", "day"} and set(named["nullCount"]) == {"id", "day"}


def test_a_timestamp_at_the_last_microsecond_keeps_no_range_rather_than_failing(tmp_path: Path) -> None:
    # MySQL's '9999-12-31 23:59:59.999999' (the main workload's boundary values): no millisecond above it
    last = dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
    fields = [("id", "long"), ("seen", "timestamp_ntz")]
    file = tmp_path / "f.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()),
                             "seen": pa.array([dt.datetime(2024, 1, 1), last], pa.timestamp("us"))}), file)
    stats = orjson.loads(filestats.of_file(str(file), _schema(fields), {}))
    assert stats["maxValues"] == {"id": 2} and "seen" not in stats["minValues"]
    assert stats["nullCount"] == {"id": 0, "seen": 0}


def test_a_date_past_year_9999_keeps_no_range_rather_than_failing(tmp_path: Path) -> None:
    """Spark writes dates past 9999-12-31 (a mutated stream's value read as a date); Python's dates end there, so
    the footer's range cannot be read as one: that column keeps no range, the others keep theirs."""
    fields = [("id", "long"), ("day", "date")]
    file = tmp_path / "f.parquet"
    far = (dt.date(9999, 12, 31) - dt.date(1970, 1, 1)).days + 400  # a day in the year 10000
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "day": pa.array([0, far], pa.int32()).cast(
        pa.date32())}), file)
    stats = orjson.loads(filestats.of_file(str(file), _schema(fields), {}))
    assert stats["minValues"] == {"id": 1} and stats["maxValues"] == {"id": 2}
    assert stats["nullCount"] == {"id": 0, "day": 0}


def test_with_column_mapping_stats_are_read_and_keyed_by_physical_names(tmp_path: Path) -> None:
    """Delta keys a column-mapped table's stats by each column's physical name, the name it has in the files."""
    schema = orjson.dumps({"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {"delta.columnMapping.physicalName": "id"}},
        {"name": "remark", "type": "string", "nullable": True,
         "metadata": {"delta.columnMapping.physicalName": "note"}},
        {"name": "note", "type": "string", "nullable": True,  # a new column under an old name: another physical
         "metadata": {"delta.columnMapping.physicalName": "col-9a"}}]}).decode()
    file = tmp_path / "f.parquet"
    pq.write_table(pa.table({"id": [3, 1], "note": ["b", None], "col-9a": [None, None]},
                            schema=pa.schema([("id", pa.int64()), ("note", pa.string()), ("col-9a", pa.string())])),
                   file)
    stats = orjson.loads(filestats.of_file(str(file), schema, {"delta.columnMapping.mode": "name"}))
    assert stats["minValues"] == {"id": 1, "note": "b"} and stats["maxValues"] == {"id": 3, "note": "b"}
    assert stats["nullCount"] == {"id": 0, "note": 1, "col-9a": 2}
    # without column mapping the same schema's names are the files' names
    plain = orjson.loads(filestats.of_file(str(file), schema, {}))
    assert plain["nullCount"]["note"] == 1 and plain["nullCount"]["remark"] == 2


def _adds(log: Path) -> list[dict]:
    out = []
    for name in sorted(os.listdir(log)):
        if name.endswith(".json"):
            out += [a["add"] for a in map(orjson.loads, (log / name).read_bytes().splitlines()) if "add" in a]
    return out


def _files_scanned(df) -> int:
    """Files Spark's scan of `df` read (after Delta's data skipping), from the executed plan's metrics."""
    df.collect()
    it = df._jdf.queryExecution().executedPlan().collectLeaves().iterator()
    total = 0
    while it.hasNext():
        m = it.next().metrics().get("numFiles")
        if m.isDefined():
            total += int(m.get().value())
    return total


def test_the_engines_adds_carry_the_stats_delta_writes_and_readers_skip_files(spark, tmp_path: Path) -> None:
    from deltalake import DeltaTable
    from pyspark.sql import functions as F

    from changefeed.spark.apply.deltalog import new_file_name
    from changefeed.spark.apply.lake import Lake

    # Delta's own writer: the stats it records for its file equal those read from that file's footer
    theirs = tmp_path / "theirs"
    cols = ", ".join(f"{n} {t}" for n, t in FIELDS)
    df = spark.createDataFrame([
        (1, "b" * 40, dt.datetime(2024, 1, 1, 10, 0, 0, 125000), dt.date(2024, 1, 2), decimal.Decimal("1.25"), True,
         b"x", 1.0),
        (None, "a\u00e9", dt.datetime(2023, 12, 31, 23, 59, 59, 999000), None, decimal.Decimal("-7.50"), None, None,
         None),
        (42, None, None, dt.date(2020, 2, 29), None, False, b"y", 2.0)], cols).coalesce(1)
    df.write.format("delta").save(str(theirs))
    (add,) = _adds(theirs / "_delta_log")
    schema_json = df.schema.json()
    delta = orjson.loads(add["stats"])
    ours = orjson.loads(filestats.of_file(str(theirs / add["path"]), schema_json, {}))
    for kind in ("minValues", "maxValues"):
        delta[kind].pop("v")  # a double's range: Delta's only, see the module
    assert ours == delta

    # the engine's commit of three files (disjoint id ranges) through the lake's driver-side log
    lake = Lake(spark, str(tmp_path / "lake"), "app")
    path = lake.path("db", "t")
    table_schema = _schema([("id", "long"), ("name", "string")])
    assert lake.logs.create(path, table_schema, {})
    added = []
    for k in range(3):
        name = new_file_name()
        pq.write_table(pa.table({"id": pa.array(range(k * 100, k * 100 + 100), pa.int64()),
                                 "name": [f"n{k}-{i}" for i in range(100)]}), Path(path) / name)
        st = os.stat(Path(path) / name)
        added.append((name, st.st_size, int(st.st_mtime * 1000)))
    lake.logs.commit(path, lake.logs.files(path), added, 5, "app")
    adds = _adds(Path(path) / "_delta_log")
    assert len(adds) == 3 and all(orjson.loads(a["stats"])["numRecords"] == 100 for a in adds)
    table = spark.read.format("delta").load(path)
    assert _files_scanned(table.where(F.col("id") >= 250)) == 1
    assert _files_scanned(table.where(F.col("name") == "n1-7")) == 1
    assert _files_scanned(table) == 3
    assert table.where(F.col("id") >= 250).count() == 50
    # delta-rs reads the same ranges
    actions = pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pylist()
    assert sorted((a["min.id"], a["max.id"]) for a in actions) == [(0, 99), (100, 199), (200, 299)]
