"""Counting the files that come to a watched file's name (inotify events of its directory), so
that its file source can say how many generations it never saw."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from watchrun.inotify_watches import IN_CREATE, IN_DELETE, IN_MOVED_FROM, IN_MOVED_TO

_HELD = 64
"""Renames in flight and names a file that was at the path was renamed to, at most this many
each (a rename out of the directory never pairs: the oldest are forgotten)."""


class Arrivals:
    """Files that came to `name` in the directory watched as `wd` (created there, or renamed to
    it), as the events read so far say. A file renamed away within the directory and back is
    not counted again: it is no new generation. `epoch` changes whenever `count` stops being
    comparable with what it was (another directory watched, events lost to a queue overflow,
    polling instead)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.wd: int | None = None
        """The directory's watch; None: not counted (a symlink on the way, polling)."""
        self.count = 0
        self.epoch = 0
        self._leaving: dict[int, str] = {}  # rename cookie -> name it leaves: one of ours
        self._parked: set[str] = set()  # names a file that was at the path was renamed to

    def watching(self, wd: int | None) -> None:
        """The directory holding the name is watched as `wd` now (None: not at all)."""
        if wd != self.wd:
            self.wd = wd
            self.lost()

    def lost(self) -> None:
        """Events were lost (or the watch changed): counts from here on are a new series."""
        self.epoch += 1
        self._leaving.clear()
        self._parked.clear()

    def event(self, mask: int, cookie: int, name: str) -> None:
        """One event of the directory (any name in it)."""
        if mask & IN_MOVED_FROM and (name == self.name or name in self._parked):
            if len(self._leaving) >= _HELD:
                self._leaving.pop(next(iter(self._leaving)))
            self._leaving[cookie] = name
        back = mask & IN_MOVED_TO and self._leaving.pop(cookie, None) is not None
        if name in self._parked and mask & (IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO):
            self._parked.discard(name)  # (moved on again, deleted, or replaced)
        if back and name != self.name and len(self._parked) < _HELD:
            self._parked.add(name)  # a file that was at the path now has this name
        if name == self.name and mask & (IN_CREATE | IN_MOVED_TO) and not back:
            self.count += 1


def leaf_watch(path: Path, targets: Iterable[tuple[str, str | None, int]],
               watches: Iterable[tuple[int, str | None]]) -> int | None:
    """The watch (of `watches`, as (wd, name)) of the directory holding the file's name, when
    that name is the only one `targets` watch (no symlink met, nothing missing on the way)."""
    named = [(d, name) for d, name, _ in targets if name]
    if named != [(os.path.dirname(os.path.abspath(path)), path.name)]:
        return None
    return next((wd for wd, name in watches if name == path.name), None)
