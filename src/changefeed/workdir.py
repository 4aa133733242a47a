"""Folders and files changefeed writes: it never deletes or overwrites what it did not create.

A folder changefeed makes (or finds empty) gets a marker file, `.changefeed`, listing the entries it created
there. Starting fresh removes only those entries; a folder that holds anything else without the marker is
refused in one line. An output file the user names (`-o`) is the one thing replaced, as every tool beside
changefeed replaces it; a folder named as the output never is. Every command that writes goes through here,
so the rule is in one place.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import orjson

from .errors import ForeignPathError

MARKER = ".changefeed"
# what changefeed (before markers) and Spark leave in a lake (`lake_legacy`) and a checkpoint: such a folder is
# theirs (shutil, tempfile and the lake's layout are loaded where they are used: `encode` and `decode` write a file
# only, and start in a fraction of a second)
CHECKPOINT_LEGACY = ("offsets", "commits", "metadata")


class WorkFolder:
    """A folder changefeed may write into: entries it created are listed in the marker file."""

    def __init__(self, path: Path, entries: set[str], owned: bool) -> None:
        self.path = path
        self.entries = entries
        self.owned = owned  # True: the marker is ours (we made the folder, or found it empty)

    def _save(self) -> None:
        tmp = self.path / f"{MARKER}.tmp"
        tmp.write_bytes(orjson.dumps({"created_by": "changefeed", "entries": sorted(self.entries)}))
        os.replace(tmp, self.path / MARKER)

    def claim(self, name: str, option: str = "") -> Path:
        """`path/name`, to be written by changefeed: refused if it exists and changefeed did not create it."""
        target = self.path / name
        if name not in self.entries and (target.exists() or target.is_symlink()):
            raise ForeignPathError(f"{target} exists and was not created by changefeed{_opt(option)}: "
                                   "move it away or choose another folder")
        if self.owned and name not in self.entries:
            self.entries.add(name)
            self._save()
        return target

    def clear(self, option: str = "") -> None:
        """Start fresh: remove what changefeed created here, nothing else."""
        if not self.owned:
            raise ForeignPathError(_foreign_message(self.path, option))
        for name in sorted(self.entries):
            p = self.path / name
            if p.is_dir() and not p.is_symlink():
                import shutil

                shutil.rmtree(p)
            elif p.exists() or p.is_symlink():
                p.unlink()
        self.entries = set()
        self._save()


def open_folder(path: Path, option: str = "", *, shared: bool = False, legacy: tuple[str, ...] = ()) -> WorkFolder:
    """A folder to write into. Made (and marked) when missing, marked when empty; a folder with the marker
    is changefeed's. Any other folder is refused, unless `shared`: then changefeed may add new entries
    beside the user's files (never replace one), but not clear it. A folder holding one of `legacy` (what
    changefeed or Spark wrote there before markers existed) is written on as it is, never cleared."""
    if path.exists() and not path.is_dir():
        raise ForeignPathError(f"{path} is a file, not a folder{_opt(option)}: choose a folder")
    if not path.exists():
        path.mkdir(parents=True)
        return _mark(path)
    marker = path / MARKER
    if marker.is_file():
        try:
            data = orjson.loads(marker.read_bytes())
            entries = {str(e) for e in data.get("entries", [])} if isinstance(data, dict) else set()
        except orjson.JSONDecodeError:
            entries = set()
        return WorkFolder(path, entries, owned=True)
    present = [p.name for p in path.iterdir()]
    if not present:
        return _mark(path)
    if shared or any(name in present for name in legacy):
        return WorkFolder(path, set(), owned=False)
    raise ForeignPathError(_foreign_message(path, option, present))


def open_local(uri: str, option: str, legacy: tuple[str, ...]) -> WorkFolder | None:
    """`open_folder` for a path or file: URI (a lake, a checkpoint); None for remote storage (s3a://...)."""
    if uri.startswith("file:"):
        uri = "/" + uri[len("file:"):].lstrip("/")
    elif "://" in uri:
        return None
    return open_folder(Path(uri), option, legacy=legacy)


def open_lake(uri: str, option: str = "--lake") -> WorkFolder | None:
    """A lake folder: new, empty, marked, or one an earlier changefeed wrote (its `_changefeed` is there)."""
    from .spark.layout import META

    return open_local(uri, option, (META,))


def open_checkpoint(uri: str, option: str = "--checkpoint") -> WorkFolder | None:
    """A Spark checkpoint folder: new, empty, marked, or one Spark already wrote (its `offsets` are there)."""
    return open_local(uri, option, CHECKPOINT_LEGACY)


def output_file(path: Path, option: str = "-o") -> Path:
    """A file the user named as the output: a folder there is refused; its own folder is made when missing."""
    if path.is_dir():
        raise ForeignPathError(f"{path} is a folder{_opt(option)}: give a file path")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def replacing(path: Path, option: str = "-o") -> Iterator[IO[bytes]]:
    """The output file the user named, open for writing. A file there is replaced, as `sort -o` or `curl -o`
    replace theirs: the new content is written beside it and moved into place only when the command succeeds,
    so a failed run leaves the old file as it was, and a symbolic link is replaced, never followed. A device or
    a pipe (`/dev/null`, a FIFO) is written to as it is; a folder is refused."""
    target = output_file(path, option)
    if target.exists() and not target.is_file():  # /dev/null, a FIFO: a stream, not a file to replace
        with open(target, "wb") as f:
            yield f
        return
    mode = target.stat().st_mode & 0o7777 if target.is_file() and not target.is_symlink() else _default_mode()
    fd, tmp = _new_part(target)
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as f:
            yield f
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _new_part(target: Path) -> tuple[int, str]:
    """A new file beside the target, open for writing, as `tempfile.mkstemp` makes one (mode 0o600, a name no
    other file has), without loading tempfile."""
    for _ in range(100):
        tmp = os.path.join(target.parent, f".{target.name}.{os.urandom(6).hex()}.part")
        try:
            return os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free name for a temporary file beside {target}")


def _default_mode() -> int:
    """The mode `open(path, "w")` would give a new file: 0o666 less the umask."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _mark(path: Path) -> WorkFolder:
    f = WorkFolder(path, set(), owned=True)
    f._save()
    return f


def _opt(option: str) -> str:
    return f" (given as {option})" if option else ""


def _foreign_message(path: Path, option: str, present: list[str] | None = None) -> str:
    seen = present if present is not None else [p.name for p in path.iterdir() if p.name != MARKER]
    shown = ", ".join(sorted(seen)[:3]) + (", ..." if len(seen) > 3 else "")
    return (f"{path} holds files changefeed did not create ({shown}){_opt(option)}: choose an empty or new "
            "folder; changefeed never deletes what it did not make")
