"""A DDL applied beside another writer: Delta's conflict with a commit that came first is not a failure."""

from __future__ import annotations

import pytest

from changefeed.errors import ApplyError
from changefeed.spark.apply import ApplyOptions
from changefeed.spark.apply.ddl import DdlApplier
from changefeed.spark.apply.ddlplan import Ddl
from changefeed.spark.apply.options import WRITE_ATTEMPTS


class _Applier(DdlApplier):
    """The applier's own `apply`, over a `_ddl` that is refused `refusals` times with `error` first."""

    def __init__(self, error: str, refusals: int) -> None:  # (no lake: `_ddl` is replaced)
        self.o = ApplyOptions()
        self.error, self.refusals, self.calls = error, refusals, 0

    def _ddl(self, d: Ddl, version: int) -> None:
        self.calls += 1
        if self.calls <= self.refusals:
            raise RuntimeError(self.error)


DDL = Ddl(commit_ts=5, query="TRUNCATE TABLE `app`.`orders`", ddl_type="ActionTruncateTable", database="app",
          table="orders", after=None, before=None)
CONFLICT = ("An error occurred while calling o84.sql.: io.delta.exceptions.ConcurrentAppendException: "
            "[DELTA_CONCURRENT_APPEND] ConcurrentAppendException: Files were added to the root of the table")


def test_a_ddl_refused_for_another_writers_commit_is_applied_again():
    """A user's OPTIMIZE or DELETE committed between the DDL's read and its commit (the maintenance test's
    TRUNCATE of an SCD2 table met it): applied again on the new version, as a MERGE is; the consumer goes on."""
    a = _Applier(CONFLICT, 2)
    a.apply(DDL, 5)
    assert a.calls == 3


def test_conflicts_without_end_or_another_error_stop_the_consumer():
    a = _Applier(CONFLICT, WRITE_ATTEMPTS)
    with pytest.raises(ApplyError, match="TRUNCATE TABLE"):
        a.apply(DDL, 5)
    assert a.calls == WRITE_ATTEMPTS
    b = _Applier("DELTA_UNSUPPORTED_TYPE_CHANGE", 1)
    with pytest.raises(ApplyError, match="cannot apply DDL"):
        b.apply(DDL, 5)
    assert b.calls == 1
