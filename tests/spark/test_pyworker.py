"""A reused Python worker's zip importers: an archive's directory read again only when its file changed."""

from __future__ import annotations

import os
import zipfile
import zipimport
from pathlib import Path
from typing import Any

import pytest

from changefeed.spark.pyworker import _cheap, cheap_zip_invalidation


def _zip(path: Path, names: list[str]) -> None:
    with zipfile.ZipFile(path, "w") as z:
        for n in names:
            z.writestr(n, "x = 1\n")


def test_an_archive_is_read_again_only_when_its_file_changed(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "lib.zip"
    _zip(archive, ["pkg/__init__.py", "pkg/a.py"])
    reads: list[str] = []
    real = zipimport._read_directory  # type: ignore[attr-defined]

    def counted(path: str) -> Any:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(zipimport, "_read_directory", counted)
    # two importers of one archive, as a worker has one per package folder of pyspark.zip
    top, sub = zipimport.zipimporter(str(archive)), zipimport.zipimporter(str(archive / "pkg"))
    invalidate = _cheap(zipimport.zipimporter.invalidate_caches, zipimport._zip_directory_cache)  # type: ignore
    reads.clear()
    invalidate(top)
    invalidate(sub)
    assert reads == [str(archive)]  # the first call after start reads it once, for both importers
    for _ in range(3):  # a task each: nothing read
        invalidate(top)
        invalidate(sub)
    assert reads == [str(archive)]
    _zip(archive, ["pkg/__init__.py", "pkg/a.py", "pkg/b.py"])  # the file replaced (another size)
    st = archive.stat()
    os.utime(archive, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    invalidate(sub)
    invalidate(top)
    assert reads == [str(archive)] * 2
    assert sub.find_spec("pkg.b") is not None and top.find_spec("pkg") is not None  # the new file is seen by both


def test_installed_once_and_only_where_the_read_is_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    # the unwrapped one (a test of this process may have run a decoder task here, which installs it)
    original = getattr(zipimport.zipimporter.invalidate_caches, "__wrapped__", zipimport.zipimporter.invalidate_caches)
    monkeypatch.setattr(zipimport.zipimporter, "invalidate_caches", original)  # put back after the test
    assert cheap_zip_invalidation((3, 12)) is False
    assert zipimport.zipimporter.invalidate_caches is original
    assert cheap_zip_invalidation((3, 11)) is True
    installed = zipimport.zipimporter.invalidate_caches
    assert installed is not original
    assert cheap_zip_invalidation((3, 11)) is True
    assert zipimport.zipimporter.invalidate_caches is installed  # not wrapped twice
