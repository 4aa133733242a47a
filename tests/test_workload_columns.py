"""The workload's compiled column generators draw exactly what `workload.value` draws."""

from __future__ import annotations

import random

import pytest

from changefeed.model import Column
from changefeed.workload import value
from changefeed.workload_columns import column_generator

TYPES = [
    "bigint", "int", "tinyint", "smallint unsigned", "bigint unsigned", "decimal(14,2)", "decimal(10,0)",
    "decimal(5,5)", "double", "float", "date", "datetime", "datetime(6)", "timestamp(3)", "time", "time(2)",
    "year", "varchar(64)", "varchar(8)", "text", "varbinary(16)", "binary(16)", "enum('basic','pro','team')",
    "set('x','y','z')", "bit(8)", "bit(1)", "json",
]


@pytest.mark.parametrize("mysql_type", TYPES)
def test_generator_equals_value_draw_for_draw(mysql_type):
    col = Column("c", mysql_type, nullable=True)
    for seed in range(3):
        ref, fast = random.Random(seed), random.Random(seed)
        gen = column_generator(fast, col)
        for _ in range(500):
            want = value(ref, col)
            got = gen()
            assert got == want and type(got) is type(want)
        assert fast.getstate() == ref.getstate()  # the same draws, none more, none fewer
