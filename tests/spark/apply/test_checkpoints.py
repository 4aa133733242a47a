"""When a table's Delta checkpoint is due (checkpoints.py); the checkpoints themselves: test_logfile.py,
test_maintenance.py."""

from __future__ import annotations

from changefeed.spark.apply.checkpoints import due


def test_tables_created_together_take_their_first_checkpoints_in_different_batches() -> None:
    """1,000 tables committed once a batch would otherwise all be checkpointed in their 10th batch."""
    first: dict[int, int] = {}
    for i in range(1000):
        p = f"/lake/db/t{i}"
        v = next(v for v in range(1, 11) if due(p, v, 0, 10))
        first[v] = first.get(v, 0) + 1
        assert not due(p, v + 9, v, 10) and due(p, v + 10, v, 10)  # then every interval
    assert sorted(first) == list(range(1, 11)) and max(first.values()) < 150, first
