"""The files of a JSONL stream on disk: opened where the last run left them, checked, rotated."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from msgspec import Struct

from watchrun.output import safefs
from watchrun.output.backward import complete_tail, last_records
from watchrun.output.records import ReadStats, parse_record, retained_files

__all__ = ["FILE_MODE", "LiveFile", "last_record", "let_go", "open_live", "rotate", "size_if_same",
           "writing"]

FILE_MODE = 0o640
_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC  # (read: its own last record)


class LiveFile(Struct, frozen=True):
    fd: int
    size: int
    inode: tuple[int, int]
    """(st_ino, st_dev): the file at the path is still this one."""
    cut: int
    """Bytes of a torn last record cut off (a crash mid-write); 0 normally."""
    last_line: bytes
    """Its last line (b"" when there is none at hand)."""


_OPEN: dict[tuple[int, int], Path] = {}
"""The live files this process has open, by (st_ino, st_dev): see `writing`."""


def writing(inode: tuple[int, int]) -> Path | None:
    """The live file of this process that `inode` (st_ino, st_dev) is, if it is one: a file
    watcher refuses it, whatever path (a symlink, a hard link) it came by, since a watcher of
    its own records would record each match again, without end."""
    return _OPEN.get(inode)


def let_go(inode: tuple[int, int]) -> None:
    """The live file `inode` is no longer written (closed, or rotated away)."""
    _OPEN.pop(inode, None)


def open_live(path: Path) -> LiveFile:
    """Open (creating, mode 0640) the live file and cut a torn last record off it. A symlink, a
    hard link, another user's file or a non-file there is refused (OSError)."""
    fd = safefs.open_write(path, _FLAGS, FILE_MODE)
    try:
        with contextlib.suppress(PermissionError):  # someone else's file: keep its mode
            os.fchmod(fd, FILE_MODE)
        st = os.fstat(fd)
        good, last = complete_tail(fd, st.st_size)
        if good < st.st_size:
            os.ftruncate(fd, good)
    except BaseException:
        os.close(fd)
        raise
    _OPEN[st.st_ino, st.st_dev] = path
    return LiveFile(fd, good, (st.st_ino, st.st_dev), st.st_size - good, last)


def last_record(path: Path, line: bytes, keep: int) -> dict[str, Any] | None:
    """The last record of the stream (None for a new one): `line`, the live file's last line,
    when it is one; else every retained file is read back (and checked). The older files are
    refused as readers refuse them (OSError)."""
    last = parse_record(line, ReadStats()) if line else None
    if last is None:  # not at hand
        tail = last_records(path, 1, keep=keep)
        return tail[0] if tail else None
    for old in retained_files(path, keep)[:-1]:
        with contextlib.suppress(FileNotFoundError):
            safefs.check_regular(old)
    return last


def size_if_same(path: Path, inode: tuple[int, int]) -> int | None:
    """The size of the file at `path` when it is still the one opened (`inode`: so linked, and
    ours); None when it was removed or replaced (an operator's `rm` or `mv`). One stat."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return st.st_size if (st.st_ino, st.st_dev) == inode else None


def rotate(path: Path, keep: int) -> None:
    """`<id>.jsonl` → `.1` → `.2` … `.keep` (the oldest is replaced); keep=0 keeps none. The
    rotated files numbered past `keep` (a keep lowered since they were made) go first: kept,
    they would join the live file across the records rotated away in between."""
    for old in retained_files(path):
        if old != path and int(old.name.rsplit(".", 1)[1]) > keep:
            safefs.unlink(old)
    if keep == 0:
        safefs.unlink(path)
        return
    for n in range(keep - 1, 0, -1):
        with contextlib.suppress(FileNotFoundError):
            safefs.replace(Path(f"{path}.{n}"), Path(f"{path}.{n + 1}"))
    safefs.replace(path, Path(f"{path}.1"))
