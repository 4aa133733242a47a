"""The transcode writer's state without Spark (spark/transcode.py): each DDL is sent once across micro-batches, its
copies from lagging source partitions and a micro-batch run again after a restart included."""

from __future__ import annotations

from pathlib import Path

from changefeed.spark.produce import Survey, ddl_key
from changefeed.spark.transcode import ChangeWriter, WriterState


def _survey(*ddl: tuple[int, int, str]) -> Survey:
    """DDL rows (source partition, commit ts, statement) of table app.users, as `survey` groups them."""
    return Survey([{"topic": "t", "partition": p, "kind": "ddl", "database": "app", "table": "users",
                    "schema_version": None, "table_def": None, "pre_table_def": None, "ddl": q, "lo": ts, "hi": ts}
                   for p, ts, q in ddl])


def test_a_ddl_key_tells_copies_from_other_ddl() -> None:
    rename = "ALTER TABLE `app`.`users` RENAME COLUMN `note` TO `remark`"
    assert ddl_key(10, "app", "users", rename) == ddl_key(10, "app", "users", rename)
    assert len({ddl_key(10, "app", "users", rename), ddl_key(11, "app", "users", rename),
                ddl_key(10, "app", "orders", rename), ddl_key(10, "app", "users", rename + " ")}) == 4
    two = _survey((0, 10, rename), (1, 10, rename), (2, 12, "TRUNCATE TABLE `app`.`users`"))
    assert two.ddl_keys() == {ddl_key(10, "app", "users", rename), ddl_key(12, "app", "users",
                                                                           "TRUNCATE TABLE `app`.`users`")}


def test_the_ddl_sent_are_kept_while_a_copy_may_still_come(tmp_path: Path) -> None:
    w = ChangeWriter("file:///nowhere/t?protocol=canal-json", source_partitions=lambda: {"t": 2},
                     source_watermarks=False, state_folder=str(tmp_path))
    assert w.low_water() is None  # partition 1 sent nothing yet: its copies are all to come
    w.state.heads = {"t/0": 50, "t/1": 20}
    assert w.low_water() == 20
    keys = {ddl_key(ts, "app", "users", "q") for ts in (5, 20, 30)}
    kept = w.still_followed(keys, w.low_water())
    assert kept == [ddl_key(20, "app", "users", "q"), ddl_key(30, "app", "users", "q")]  # in commit order
    assert w.still_followed(keys, None) == sorted(kept + [ddl_key(5, "app", "users", "q")],
                                                  key=lambda k: int(k.split("/")[0]))
    assert w.still_followed(keys, None, cap=1) == [ddl_key(30, "app", "users", "q")]
    w.state.ddl = kept
    w.state.save(str(tmp_path))
    assert WriterState.load(str(tmp_path)).ddl == kept  # a restart skips what the run before it sent
    (tmp_path / "producer-state.json").write_bytes(b'{"batches": 3, "floor": 7}')  # a state file of before
    old = WriterState.load(str(tmp_path))
    assert old.batches == 3 and old.ddl == []
