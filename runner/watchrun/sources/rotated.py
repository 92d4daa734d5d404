"""Which files beside a followed path may be its generations: names of a rotation scheme
(`app.log.1`, `app.log.2.gz`, `app.log-20261201`, `app.log.2026-12-01_13`), a symlink's old
targets and their numbered kin, and files that are a generation the checkpoint knows (by inode,
whatever their name); never a file that merely begins with the log's name (`app.log.pos`), nor
another log's named alike but for its digits (`worker-2.log.1` beside `worker-1.log`)."""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Collection
from pathlib import Path

from msgspec import Struct

from watchrun.sources.identity import Checkpoint

COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".lz4", ".lzma", ".z", ".zip", ".br", ".7z")
"""Names of compressed files: not read, but named by a `gap` when they may hold unread lines."""
NO_FDS = (errno.EMFILE, errno.ENFILE)
"""Out of descriptors: raised, never taken for a sibling that is not there (the source
records an error and looks again)."""
_DIGITS = re.compile(r"[0-9]+")
_SUFFIX = re.compile(r"(?:[.\-_][0-9]+(?:[.\-_:T][0-9]+)*)?")
"""What a rotation scheme puts after the log's name: nothing (then compressed: `gzip app.log`),
`.N` (logrotate, savelog, RotatingFileHandler), `-YYYYMMDD[HH][-epoch]` (logrotate's dateext),
`.YYYY-MM-DD[_HH[-MM[-SS]]]` (TimedRotatingFileHandler); then maybe a compressed suffix."""


class Entry(Struct, frozen=True):
    path: str
    st: os.stat_result
    compressed: bool
    named: bool = True
    """Its name is a rotated generation's; False: admitted only as a checkpointed generation
    found by inode (renamed to another name), never read as a newer generation or a copy."""


def rotated_name(name: str, base: str) -> bool:
    """`name` is what a rotation scheme makes of `base` (see `_SUFFIX`)."""
    if not name.startswith(base) or name == base:
        return False
    rest = name[len(base):]
    ext = next((c for c in COMPRESSED if rest.lower().endswith(c)), "")
    rest = rest[: len(rest) - len(ext)]
    return bool(rest or ext) and _SUFFIX.fullmatch(rest) is not None


def _mask(name: str) -> str:
    return _DIGITS.sub("#", name)


def _numbers(name: str) -> tuple[int, ...]:
    return tuple(int(d) for d in _DIGITS.findall(name))


def kin(name: str, targets: Collection[str]) -> bool:
    """`name` is in the series of a symlinked path's `targets` (the names its link pointed at
    in one directory): the same name but for its digits, numbered between two targets of that
    shape (`app-0002.log` after `app-0001.log` and before `app-0003.log`). Never with one
    target (nothing tells which digits count), nor outside them: `worker-2-0002.log` beside
    the targets `worker-1-0001.log` and `worker-1-0003.log` is another series."""
    if len(targets) < 2:  # (most paths: no symlink; each name of a directory comes here)
        return False
    shape = _mask(name)
    numbers = [_numbers(t) for t in targets if _mask(t) == shape]
    return len(set(numbers)) > 1 and min(numbers) < _numbers(name) < max(numbers)


def sibling_name(name: str, bases: Collection[str], targets: Collection[str] = ()) -> bool:
    """`name`, in a directory where the watcher's path or its checkpointed generations were
    named `bases`, is a generation's: what a rotation scheme makes of one of them
    (`rotated_name`), or, for a symlinked path, `kin` of its link's `targets` there. Another
    log whose name differs only in digits (`worker-2.log.1` beside `worker-1.log.1`) is not."""
    return any(rotated_name(name, b) for b in bases) or kin(name, targets)


def scan(path: Path, known: list[Checkpoint], unlisted: dict[str, OSError] | None = None
         ) -> list[Entry]:
    """Regular files (symlinks are not followed) beside the path or a checkpointed generation
    with a rotated generation's name (`sibling_name`), or, for a symlinked path, that are where
    a checkpointed generation was (its target then) or numbered between two of its targets
    (`kin`); and under any name, a checkpointed generation found by its inode (a rotated file
    renamed `app.log.old`). The path itself and its target now are not among them. A directory
    that cannot be listed (permissions) adds its error to `unlisted`."""
    bases: dict[str, set[str]] = {str(path.parent): {path.name}}
    series: dict[str, set[str]] = {}  # a symlinked path's targets, by directory
    targets = [Path(cp.path) for cp in known]
    own: set[str] = set()  # a symlink's targets themselves (`a.log` when it was `b.log`)
    real = os.path.realpath(path)
    skip = {str(path), real}  # (through a symlinked directory on the way)
    with contextlib.suppress(OSError):
        if path.is_symlink():
            now = Path(real)
            own = {str(t) for t in targets if t not in (path, now)}
            targets.append(now)
            skip.add(str(now))
            for t in targets:
                series.setdefault(str(t.parent), set()).add(t.name)
    for t in targets:
        if t != path:
            bases.setdefault(str(t.parent), set()).add(t.name)
    ids = {(cp.dev, cp.inode) for cp in known}
    inodes = {ino for _, ino in ids}
    found: list[Entry] = []
    for directory, names in bases.items():
        try:
            entries = list(os.scandir(directory))
        except OSError as exc:
            if exc.errno in NO_FDS:
                raise
            if unlisted is not None:
                unlisted[directory] = exc
            continue
        kin_of = series.get(directory, ())
        if not own and len(kin_of) < 2:  # no symlink's series: only a name that begins with
            prefixes = tuple(names)  # a base's, or a known inode, can be one (judging each
            entries = [e for e in entries  # name of a folder of 450 logs took ~1 ms a scan)
                       if e.name.startswith(prefixes) or e.inode() in inodes]
        for e in entries:
            if e.path in skip:
                continue
            named = e.path in own or sibling_name(e.name, names, kin_of)
            if not named and e.inode() not in inodes:  # (the directory's, no stat)
                continue
            try:
                if not e.is_file(follow_symlinks=False):
                    continue
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if named or (st.st_dev, st.st_ino) in ids:
                found.append(Entry(e.path, st, e.name.lower().endswith(COMPRESSED), named))
    return found
