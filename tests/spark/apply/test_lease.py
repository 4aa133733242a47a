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
