"""One consumer per lake (`lease`): a second one is refused in one line while the first is alive (its process on
this host, its renewals from another), and a consumer that is gone (killed) does not hold the lake."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest

from changefeed.errors import ApplyError
from changefeed.spark.apply import lease as lease_mod
from changefeed.spark.apply.lease import Lease


def _store() -> tuple[dict[str, Any], Any, Any]:
    box: dict[str, Any] = {}
    return box, (lambda: box.get("rec")), (lambda rec: box.__setitem__("rec", rec))


def test_a_second_consumer_is_refused_while_the_first_runs_and_not_after() -> None:
    box, read, write = _store()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        first = Lease("/lake", "cf", read, write)
        first.me["pid"] = other.pid  # the first consumer: another live process on this host
        first.claim()
        second = Lease("/lake", "cf", read, write)
        with pytest.raises(ApplyError, match=rf"the lake /lake is in use by another consumer \(pid {other.pid}"):
            second.claim()
        assert box["rec"]["token"] == first.me["token"]  # the holder's record is left as it was
        first.claim()  # its own record: claimed again (a restart of the same consumer object)
    finally:
        other.kill()
        other.wait()
    second.claim()  # the first one is gone (killed): the lake is free
    assert box["rec"]["token"] == second.me["token"] and box["rec"]["pid"] == second.me["pid"]


def test_a_consumer_on_another_host_holds_the_lake_while_it_renews() -> None:
    box, read, write = _store()
    far = Lease("/lake", "cf", read, write)
    far.me["host"] = "elsewhere"
    far.claim()
    with pytest.raises(ApplyError, match="on elsewhere"):
        Lease("/lake", "cf", read, write).claim()
    box["rec"]["renewed"] = int((time.time() - lease_mod.LEASE_S - 1) * 1000)  # silent for longer than the lease
    Lease("/lake", "cf", read, write).claim()


def _claims() -> tuple[dict[int, Any], Any, Any, Any]:
    """Numbered claims in a store with conditional writes: `create` makes a claim only if its number is free."""
    box: dict[int, Any] = {}

    def create(rec: dict[str, Any]) -> bool:
        if rec["claim"] in box:
            return False
        box[rec["claim"]] = rec
        return True

    return box, (lambda: box[max(box)] if box else None), (lambda rec: box.__setitem__(rec["claim"], rec)), create


def test_two_consumers_deciding_at_once_that_the_lake_is_free_one_is_refused_by_the_store() -> None:
    """Both read the lake as free; the store creates claim 0 for the first and refuses it to the second, which
    then reads the first's claim and is refused in one line: the record stays the first's."""
    box, read, write, create = _claims()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        first = Lease("s3a://b/lake", "cf", read, write, create)
        first.me["pid"] = other.pid
        stale = iter([None])  # the second read the lake before the first's claim landed

        second = Lease("s3a://b/lake", "cf", lambda: next(stale, None) or read(), write, create)
        first.claim()
        with pytest.raises(ApplyError, match=rf"s3a://b/lake is in use by another consumer \(pid {other.pid}"):
            second.claim()
        assert list(box) == [0] and box[0]["token"] == first.me["token"]
        first.renew()
        assert box[0]["renewed"] >= box[0]["since"] and list(box) == [0]
    finally:
        other.kill()
        other.wait()


def test_a_consumer_whose_lake_was_claimed_after_it_stops_at_its_next_renewal() -> None:
    box, read, write, create = _claims()
    old = Lease("s3a://b/lake", "cf", read, write, create)
    old.me["host"] = "elsewhere"
    old.claim()
    box[0]["renewed"] = int((time.time() - lease_mod.LEASE_S - 1) * 1000)  # silent past the lease: taken for gone
    new = Lease("s3a://b/lake", "cf", read, write, create)
    new.claim()
    assert sorted(box) == [0, 1] and box[1]["token"] == new.me["token"]
    with pytest.raises(ApplyError, match="was claimed by another consumer .* this one stops"):
        old.renew()
    assert box[1]["token"] == new.me["token"]  # the new owner's claim is left as it was
    new.renew()
