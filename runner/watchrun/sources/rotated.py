"""Which files beside a followed path may be its generations: names of a rotation scheme
(`app.log.1`, `app.log.2.gz`, `app.log-20261201`, `app.log.2026-12-01_13`), a symlink's old
targets and their numbered kin, and files that are a generation the checkpoint knows (by inode,
whatever their name); never a file that merely begins with the log's name (`app.log.pos`)."""

from __future__ import annotations

import contextlib
import errno
import os
import re
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


def _named(name: str, base: str, masked: bool) -> bool:
    return name != base and (rotated_name(name, base) or (masked and _mask(name) == _mask(base)))


def scan(path: Path, known: list[Checkpoint], unlisted: dict[str, OSError] | None = None
         ) -> list[Entry]:
    """Regular files (symlinks are not followed) beside the path with a rotated generation's
    name (`rotated_name`), or, for a symlinked path, that are where a checkpointed generation
    was (its target then) or only differ from a target's name in their digits (`app-0001.log`
    → `app-0002.log`); and under any name, a checkpointed generation found by its inode (a
    rotated file renamed `app.log.old`). The path itself and its target now are not among
    them. A directory that cannot be listed (permissions) adds its error to `unlisted`."""
    rules: dict[str, set[tuple[str, bool]]] = {str(path.parent): {(path.name, False)}}
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
        if t != path:
            rules.setdefault(str(t.parent), set()).add((t.name, True))
    ids = {(cp.dev, cp.inode) for cp in known}
    inodes = {ino for _, ino in ids}
    found: list[Entry] = []
    for directory, bases in rules.items():
        try:
            entries = list(os.scandir(directory))
        except OSError as exc:
            if exc.errno in NO_FDS:
                raise
            if unlisted is not None:
                unlisted[directory] = exc
            continue
        for e in entries:
            if e.path in skip:
                continue
            named = e.path in own or any(_named(e.name, b, m) for b, m in bases)
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
