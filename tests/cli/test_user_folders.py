"""Every command that writes, given a folder or file of the user's: nothing of theirs removed or changed;
the command either works beside it or refuses in one line (no traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from changefeed.workdir import MARKER, ForeignPathError, open_folder, output_file
from tests.conftest import ROOT

EXAMPLE = ROOT / "src" / "changefeed" / "examples" / "events.jsonl"
PRECIOUS = b"precious notes\n"


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "changefeed.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def users_folder(base: Path) -> Path:
    d = base / "mine"
    d.mkdir()
    (d / "notes.txt").write_bytes(PRECIOUS)
    (d / "sub").mkdir()
    (d / "sub" / "data.bin").write_bytes(b"\x00\x01")
    return d


def untouched(d: Path) -> None:
    assert (d / "notes.txt").read_bytes() == PRECIOUS
    assert (d / "sub" / "data.bin").read_bytes() == b"\x00\x01"


def refused_in_one_line(r: subprocess.CompletedProcess[str], path: Path) -> None:
    assert r.returncode != 0, r.stdout
    assert "Traceback" not in r.stderr, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, r.stderr
    assert str(path) in errors[0], errors


def test_run_refuses_a_work_folder_with_the_users_files(tmp_path: Path) -> None:
    d = users_folder(tmp_path)
    for flag in ("--fresh", "--resume"):
        r = cli("run", "--work", str(d), "--transactions", "5", flag)
        refused_in_one_line(r, d)
        assert "did not create" in r.stderr
        untouched(d)
        assert not (d / "lake").exists() and not (d / MARKER).exists()


def test_consume_refuses_a_lake_or_checkpoint_with_the_users_files(tmp_path: Path) -> None:
    d = users_folder(tmp_path)
    (tmp_path / "topic").mkdir()
    (tmp_path / "topic" / "meta.json").write_bytes(b'{"partitions": 1}')  # a topic (a missing one is refused)
    src = f"file://{tmp_path}/topic?protocol=canal-json"
    refused_in_one_line(cli("consume", "--from", src, "--lake", str(d)), d)
    untouched(d)
    r = cli("consume", "--from", src, "--lake", str(tmp_path / "lake"), "--checkpoint", str(d))
    refused_in_one_line(r, d)
    untouched(d)


@pytest.mark.parametrize("command", ["encode", "decode", "workload"])
def test_the_output_file_named_is_replaced_and_nothing_else(tmp_path: Path, command: str) -> None:
    d = users_folder(tmp_path)
    target = d / "out.jsonl"
    target.write_bytes(PRECIOUS)
    msgs = tmp_path / "m.jsonl"
    assert cli("encode", "-i", str(EXAMPLE), "-o", str(msgs)).returncode == 0
    args = {"encode": ["encode", "-i", str(EXAMPLE), "-o", str(target)],
            "decode": ["decode", "-i", str(msgs), "-o", str(target)],
            "workload": ["workload", "--transactions", "3", "-o", str(target)]}[command]
    r = cli(*args)
    assert r.returncode == 0, r.stderr
    assert target.read_bytes() != PRECIOUS and target.read_bytes().startswith(b"{")
    untouched(d)
    assert sorted(p.name for p in d.iterdir()) == ["notes.txt", "out.jsonl", "sub"]  # no temporary file left
    # a folder named as the output is refused, and left as it was
    args[-1] = str(d / "sub")
    refused_in_one_line(cli(*args), d / "sub")
    untouched(d)


def test_a_failed_run_leaves_the_old_output_and_a_link_is_not_followed(tmp_path: Path) -> None:
    d = users_folder(tmp_path)
    target = d / "out.jsonl"
    target.write_bytes(PRECIOUS)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(EXAMPLE.read_bytes().splitlines(keepends=True)[0] + b"{not json\n")
    r = cli("encode", "-i", str(bad), "-o", str(target))
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert target.read_bytes() == PRECIOUS
    assert sorted(p.name for p in d.iterdir()) == ["notes.txt", "out.jsonl", "sub"]
    link = tmp_path / "link.jsonl"
    link.symlink_to(d / "notes.txt")
    assert cli("encode", "-i", str(EXAMPLE), "-o", str(link)).returncode == 0
    assert not link.is_symlink() and link.read_bytes().startswith(b"{")
    untouched(d)  # what the link pointed at is not the output


def test_workload_expected_file_is_replaced(tmp_path: Path) -> None:
    d = users_folder(tmp_path)
    (d / "state.jsonl").write_bytes(PRECIOUS)
    r = cli("workload", "--transactions", "3", "-o", str(d / "ev.jsonl"), "--expected", str(d / "state.jsonl"))
    assert r.returncode == 0, r.stderr
    assert (d / "state.jsonl").read_bytes() != PRECIOUS
    untouched(d)
    refused_in_one_line(cli("workload", "--transactions", "3", "-o", str(d / "ev.jsonl"), "--expected",
                            str(d / "sub")), d / "sub")


def test_roundtrip_writes_beside_the_users_files(tmp_path: Path) -> None:
    d = users_folder(tmp_path)
    r = cli("roundtrip", "--out", str(d))
    assert r.returncode == 0, r.stderr
    assert (d / "canal-json.messages.jsonl").exists()
    untouched(d)
    (d / "simple.messages.jsonl").write_bytes(PRECIOUS)  # the user's file with the name roundtrip would write
    refused_in_one_line(cli("roundtrip", "-p", "simple", "--out", str(d)), d / "simple.messages.jsonl")
    assert (d / "simple.messages.jsonl").read_bytes() == PRECIOUS


def test_fresh_removes_only_what_changefeed_made(tmp_path: Path) -> None:
    d = tmp_path / "work"
    f = open_folder(d, "--work")
    f.claim("lake").mkdir()
    (d / "lake" / "t").write_bytes(b"x")
    (d / "notes.txt").write_bytes(PRECIOUS)  # the user adds a file to changefeed's folder later
    open_folder(d, "--work").clear("--work")
    assert not (d / "lake").exists()
    assert (d / "notes.txt").read_bytes() == PRECIOUS
    with pytest.raises(ForeignPathError, match="notes.txt"):
        open_folder(d, "--work").claim("notes.txt")


def test_an_empty_folder_is_taken_and_a_file_is_not_a_folder(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert open_folder(tmp_path / "empty").owned
    (tmp_path / "f").write_bytes(PRECIOUS)
    with pytest.raises(ForeignPathError, match="is a file"):
        open_folder(tmp_path / "f")
    with pytest.raises(ForeignPathError, match="is a folder"):
        output_file(tmp_path / "empty")
    assert output_file(tmp_path / "new" / "x.jsonl").parent.is_dir()
