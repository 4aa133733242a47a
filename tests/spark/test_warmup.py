"""The warm-up before a stream (spark/warmup.py) and the class-data archive (spark/classcache.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from changefeed.spark import classcache
from changefeed.spark.warmup import PREFIX, default_on, should_warm_up, warm_up


def test_the_warm_up_runs_only_in_a_jvm_the_command_launched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHANGEFEED_WARM_UP", raising=False)
    assert default_on()
    assert should_warm_up(None, launched=True, live=True)
    assert not should_warm_up(None, launched=True, live=False)  # a drain (available-now): not by default
    assert should_warm_up(True, launched=True, live=False)
    assert not should_warm_up(False, launched=True, live=True)
    assert not should_warm_up(True, launched=False, live=True)  # an active session: no new JVM to warm
    for off in ("0", "false", "off"):
        monkeypatch.setenv("CHANGEFEED_WARM_UP", off)
        assert not default_on() and not should_warm_up(None, launched=True, live=True)
        assert should_warm_up(True, launched=True, live=True)  # asked for on the command line


def test_the_class_archive_is_used_only_for_the_jars_it_was_made_with(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A new or changed jar (or JVM) changes the key: the old archive is not passed to the JVM."""
    jar = tmp_path / "a.jar"
    jar.write_bytes(b"one")
    monkeypatch.setattr(classcache, "class_path", lambda: [jar])
    monkeypatch.delenv("CHANGEFEED_CDS", raising=False)
    key = classcache.key()
    assert key is not None and classcache.archive(tmp_path) is None and classcache.java_options(tmp_path) == ""
    (tmp_path / f"classes-{key}.jsa").write_bytes(b"x")
    assert classcache.archive(tmp_path) == tmp_path / f"classes-{key}.jsa"
    assert f"-XX:SharedArchiveFile={tmp_path / f'classes-{key}.jsa'}" in classcache.java_options(tmp_path)
    monkeypatch.setenv("CHANGEFEED_CDS", "0")
    assert classcache.archive(tmp_path) is None
    monkeypatch.delenv("CHANGEFEED_CDS")
    jar.write_bytes(b"changed")
    os.utime(jar, ns=(1, 1))
    assert classcache.key() != key and classcache.archive(tmp_path) is None


def test_a_warm_up_applies_its_stream_in_a_scratch_lake_it_removes(spark, tmp_path: Path) -> None:
    """The warm-up's query runs the decode and apply path on its own stream, in a folder it makes and removes; what
    was in the folder it was given stays."""
    from changefeed.model import ROW_KINDS
    from changefeed.workload import Workload

    mine = tmp_path / "spark" / "keep.txt"
    mine.parent.mkdir()
    mine.write_text("the user's")
    events = list(Workload(3, 400))[:40]  # the CREATE TABLEs and a few transactions (the first ALTER: at 15%)
    rows = sum(1 for e in events if e.kind in ROW_KINDS)
    done = warm_up(spark, tmp_path / "spark", batches=1, events=events)
    assert done.batches >= 1 and done.changes >= rows > 0
    assert mine.read_text() == "the user's"
    assert [p.name for p in (tmp_path / "spark").iterdir()] == ["keep.txt"]
    assert not any(p.name.startswith(PREFIX) for p in tmp_path.rglob("*"))
    # a stop asked for during the warm-up (SIGTERM): it ends without waiting for its stream, and leaves nothing
    cut = warm_up(spark, tmp_path / "spark", batches=4, events=events, cancelled=lambda: True)
    assert cut.batches < 4, cut
    assert [p.name for p in (tmp_path / "spark").iterdir()] == ["keep.txt"]


def test_a_warm_up_that_fails_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    """No session to run on: the warm-up's stream was written, its query cannot start; the folder goes all the
    same, and the command hears one line and goes on."""
    from changefeed.spark.warmup import announce_and_warm

    lines: list[str] = []
    assert announce_and_warm(None, tmp_path / "spark", lines.append) is None  # type: ignore[arg-type]
    assert len(lines) == 2 and lines[1].startswith("the warm-up failed (") and "starts without it" in lines[1]
    assert list((tmp_path / "spark").iterdir()) == []
