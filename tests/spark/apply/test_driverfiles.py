"""A small group's files written by the driver (`driverfiles`, no Spark): each table gets exactly its rows, in one
file of its own folder, without the table-index column; a table left without rows gets no file."""

from __future__ import annotations

import itertools
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from changefeed.spark.apply import driverfiles


def test_each_table_gets_its_rows_in_one_file_of_its_folder(tmp_path: Path) -> None:
    folders = [tmp_path / f"t{i}" for i in range(4)]
    for f in folders:
        f.mkdir()
    which = [2, 0, 2, 3, 0, 2]
    rows = pa.table({"__t": pa.array(which, pa.int32()), "id": list(range(6)),
                     "amount": pa.array([Decimal(f"{i}.25") for i in range(6)], pa.decimal128(12, 2))})
    names = (f"part-{n}.snappy.parquet" for n in itertools.count())
    parts = driverfiles.split(rows, "__t", len(folders))
    out = [driverfiles.write(part, str(f), lambda: next(names)) for part, f in zip(parts, folders, strict=True)]
    assert [len(x) for x in out] == [1, 0, 1, 1]  # t1 holds no row: no file
    assert list((tmp_path / "t1").iterdir()) == []
    for i in (0, 2, 3):
        (name, size, mtime), = out[i]
        path = folders[i] / name
        assert path.stat().st_size == size and mtime > 0
        got = pq.read_table(path)
        assert got.column_names == ["id", "amount"]
        assert sorted(got.column("id").to_pylist()) == [k for k, t in enumerate(which) if t == i]
        assert got.schema.field("amount").type == pa.decimal128(12, 2)
        assert pq.ParquetFile(path).metadata.row_group(0).column(0).compression == "SNAPPY"


def test_nothing_is_written_for_no_rows(tmp_path: Path) -> None:
    rows = pa.table({"__t": pa.array([], pa.int32()), "id": pa.array([], pa.int64())})
    part, = driverfiles.split(rows, "__t", 1)
    assert part.column_names == ["id"] and driverfiles.write(part, str(tmp_path), lambda: "x.parquet") == []
    assert list(tmp_path.iterdir()) == []


def test_rows_are_kept_only_for_the_version_and_files_they_were_written_as() -> None:
    rows = pa.table({"id": list(range(100))})
    kept = driverfiles.Kept(max_bytes=rows.nbytes * 2)
    kept.put("a", 3, ["f1"], rows)
    assert kept.get("a", 3, ["f1"]) is rows
    assert kept.get("a", 4, ["f1"]) is None and kept.get("a", 3, ["f2"]) is None  # the table moved on
    kept.put("b", 1, [], rows)
    kept.put("c", 1, [], rows)  # over the budget: the oldest goes
    assert kept.get("a", 3, ["f1"]) is None and kept.get("c", 1, []) is rows
    kept.forget("c")
    assert kept.get("c", 1, []) is None


def test_only_a_small_counted_group_passes_through_the_driver() -> None:
    assert driverfiles.small(1 << 20, [10, 20])
    assert not driverfiles.small(driverfiles.MAX_HELD_BYTES + 1, [10])
    assert not driverfiles.small(0, [driverfiles.MAX_CHANGES, 1])
    assert not driverfiles.small(0, [10, None])  # a table whose changes were not counted


def test_a_column_mapped_tables_rows_are_written_under_physical_names_and_field_ids(tmp_path: Path) -> None:
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "remark": ["a", None]})
    out = driverfiles.physical(rows, {"id": "id", "remark": "note"}, {"id": 1, "remark": 2})
    (name, _, _), = driverfiles.write(out, str(tmp_path), lambda: "f.parquet")
    back = pq.read_table(tmp_path / name)
    assert back.column_names == ["id", "note"] and back.column("note").to_pylist() == ["a", None]
    assert [f.metadata[b"PARQUET:field_id"] for f in back.schema] == [b"1", b"2"]


def test_a_kept_slice_holds_only_its_own_rows() -> None:
    result = pa.table({"__t": [i % 1000 for i in range(200_000)], "v": [f"row {i}" for i in range(200_000)]})
    parts = driverfiles.split(result, "__t", 1000)  # slices of the sorted result
    kept = driverfiles.Kept()
    kept.put("t7", 1, ["a"], parts[7])
    got = kept.get("t7", 1, ["a"])
    assert got is not None and got.equals(parts[7])
    # what it holds is about what it counts, not the whole result's buffers
    assert got.get_total_buffer_size() < 4 * parts[7].nbytes + 4096 < result.get_total_buffer_size() // 50


def test_a_files_stats_from_the_footer_written_are_those_read_back_from_it(tmp_path: Path) -> None:
    from changefeed.spark.apply.filestats import of_file

    schema = ('{"type":"struct","fields":[{"name":"id","type":"long","nullable":false,"metadata":{}},'
              '{"name":"name","type":"string","nullable":true,"metadata":{}},'
              '{"name":"amount","type":"decimal(12,2)","nullable":true,"metadata":{}}]}')
    rows = pa.table({"id": pa.array([3, 1, 2], pa.int64()), "name": ["b", None, "a"],
                     "amount": pa.array([Decimal("1.25"), None, Decimal("-7.50")], pa.decimal128(12, 2))})
    (name, size, _), = (written := driverfiles.write_with_stats(rows, str(tmp_path), lambda: "f.parquet", schema,
                                                                 {}))[0]
    assert written[1] == {name: of_file(str(tmp_path / name), schema, {})} and size == (tmp_path / name).stat().st_size
    assert '"minValues":{"id":1,"name":"a","amount":-7.50}' in written[1][name]
    assert driverfiles.write_with_stats(rows.slice(0, 0), str(tmp_path), lambda: "g.parquet", schema, {}) == ([], {})


def test_split_gives_each_table_its_rows_in_their_order() -> None:
    import random

    import pyarrow.compute as pc

    rng = random.Random(7)
    which = [rng.choice([0, 2, 3, 5]) for _ in range(500)]
    rows = pa.concat_tables([pa.table({"__t": pa.array(which[i:i + 100], pa.int32()), "id": list(range(i, i + 100))})
                             for i in range(0, 500, 100)])  # several chunks, as a collect gives them
    parts = driverfiles.split(rows, "__t", 6)
    assert len(parts) == 6
    for i, part in enumerate(parts):
        want = rows.filter(pc.equal(rows["__t"], i)).drop_columns(["__t"])
        assert part.column_names == ["id"] and part.column("id").to_pylist() == want.column("id").to_pylist()
    one, = driverfiles.split(rows.filter(pc.equal(rows["__t"], 3)).set_column(0, "__t", pa.array([0] * which.count(3),
                                                                                                 pa.int32())), "__t", 1)
    assert one.column("id").to_pylist() == [k for k, t in enumerate(which) if t == 3]
