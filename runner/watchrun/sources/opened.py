"""A generation of a followed file opened for reading (at the path or among its siblings, as
a regular file only), where reading it starts, and the plan of what to read."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import Any

from msgspec import Struct, field

from watchrun.sources.identity import Archive, Checkpoint, birth_ns, inode_generation
from watchrun.sources.regular import open_regular
from watchrun.sources.rotated import NO_FDS, Entry

_MISSING = (errno.ENOENT, errno.ENOTDIR)


class Opened(Struct):
    """A generation opened for reading, and where reading it starts."""

    fd: int
    st: os.stat_result
    path: str
    start: int = 0
    line_no: int = 1
    origin: Checkpoint | None = None
    """The checkpoint it continues (the generation itself, or a copy of it)."""
    announce: dict[str, Any] | None = None
    """The `rotate` record written before its first line."""
    gen: int | None = None
    """Its inode's generation number once asked (`generation()`), None: not known."""
    asked: bool = False

    def generation(self) -> int | None:
        """Its inode's generation number: one ioctl, the first time it is asked."""
        if not self.asked:
            self.gen, self.asked = inode_generation(self.fd), True
        return self.gen

    def born(self) -> int | None:
        """When its inode was made (`birth_ns`: one statx)."""
        return birth_ns(self.fd)


class Plan(Struct):
    """What to read of a followed file's generations, and what to record about them."""

    steps: list[Opened] = field(default_factory=list)
    """Generations to read, oldest first; with `at_path`, the last one is the file at the path."""
    gaps: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    """`error` records (after the gaps): a checkpointed generation that could not be looked at."""
    kept: list[Checkpoint] = field(default_factory=list)
    """Those generations: kept in the checkpoint, looked for again at the next start. At a
    first look (no checkpoint): the files beside the file, known from then on, never read
    (`sources/first_look.py`)."""
    at_path: bool = False
    renumbered: bool = False
    """At a start: the file at the path is the checkpointed generation under another device or
    inode number (a remount), read on from its checkpoint (`siblings.renumbered_at`)."""
    copy: Opened | None = None
    """After a truncation: a copy holding the truncated generation (copytruncate)."""
    cut: Checkpoint | None = None
    """After a truncation: the copy cut short of what was read (all it holds was read)."""
    waiting: list[Entry] = field(default_factory=list)
    """After a truncation: archives that may be the copy's, cut short (being written): judged
    once they have not changed for rotateWait (`sources/unsettled.py`)."""
    lost: str | None = None
    """After a truncation with no copy found: a generation made since that is no copy of it
    (another copy made later): the copy that went on from what was read is gone."""
    grown: list[tuple[Checkpoint, int]] = field(default_factory=list)
    """Generations released early found grown (their `gap` is in `gaps`), and their size now."""
    arrived: int = 0
    """After a rotation: the generations it found that came to the path after the one followed
    (read, or a `gap`), as a file source counts those it never saw (`Watch.arrivals`)."""
    archives: list[Archive] | None = None
    """The siblings judged (`identity.Archive`), by earlier looks or this one, still there (to
    keep in the checkpoint, `judged_kept`); None: the siblings were not listed (those known
    stay)."""

    def close(self) -> None:
        """Close what it opened (the copy once: a truncation reads it first, among `steps`)."""
        for o in [*self.steps, *([self.copy] if self.copy and self.copy not in self.steps else [])]:
            with contextlib.suppress(OSError):
                os.close(o.fd)


def open_at_path(path: Path) -> Opened | None:
    """The file at the path, or None when it is missing. Through a symlink (the path's, or a
    directory's on the way: a Capistrano `current`), the path it is opened as is its real one
    (where its checkpoint says it was last seen: after the link is swapped, it is found
    there)."""
    try:
        fd, st = open_regular(path)
    except OSError as exc:
        if exc.errno in _MISSING:
            return None
        raise
    return Opened(fd, st, _target(path, fd))


def _target(path: Path, fd: int) -> str:
    """Where the file opened at `path` really is (its symlinks resolved as they were at the
    open, not as they are now): one readlink of its descriptor, not realpath's lstat of each
    component (~0.05 ms a watcher at every start)."""
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # (no /proc)
        return os.path.realpath(path)
    return str(path) if real.endswith(" (deleted)") else real


def open_entry(e: Entry) -> Opened | None:
    try:
        fd, st = open_regular(e.path)
    except OSError as exc:
        if exc.errno in NO_FDS:
            raise
        return None
    if (st.st_dev, st.st_ino) != (e.st.st_dev, e.st.st_ino):
        os.close(fd)  # renamed again meanwhile: the next look finds it
        return None
    return Opened(fd, st, e.path)
