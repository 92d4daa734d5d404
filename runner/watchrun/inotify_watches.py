"""The kernel watches behind change notification: which ones a path needs (resolved one name at
a time, as the kernel does) and a notifier's table of them (one inotify descriptor, who is
subscribed to each watch)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import stat
from pathlib import Path
from typing import Any, Generic, TypeVar

from msgspec import Struct

from watchrun.inotify import INotify, MountTable

__all__ = [
    "FILE_MASK",
    "IN_CREATE",
    "IN_DELETE",
    "IN_DELETE_SELF",
    "IN_IGNORED",
    "IN_MOVED_FROM",
    "IN_MOVED_TO",
    "IN_MOVE_SELF",
    "IN_Q_OVERFLOW",
    "Sub",
    "WatchTable",
    "watched",
]

log = logging.getLogger("watchrun.notify")  # (its warnings: the runner log's `notify` events)

# inotify.h
IN_MODIFY, IN_ATTRIB, IN_MOVED_FROM, IN_MOVED_TO = 0x2, 0x4, 0x40, 0x80
IN_CREATE, IN_DELETE, IN_DELETE_SELF, IN_MOVE_SELF = 0x100, 0x200, 0x400, 0x800
IN_Q_OVERFLOW, IN_IGNORED, IN_MASK_ADD = 0x4000, 0x8000, 0x20000000
DIR_MASK = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB
DIR_MASK |= IN_DELETE_SELF | IN_MOVE_SELF
FILE_MASK = IN_MODIFY | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF
NAME_MASK = DIR_MASK & ~IN_ATTRIB  # a name on the way: only its coming and going
SELF_MASK = IN_DELETE_SELF | IN_MOVE_SELF  # a directory on the way: only itself
_MAX_LINKS = 40  # symlinks followed in one path, as the kernel's ELOOP

W = TypeVar("W")


def _open_inotify() -> Any:
    """A non-blocking inotify instance, or raise OSError where there is none."""
    return INotify()


def _mount_table() -> MountTable | None:
    """The mount table's changes; None where /proc is not mounted (a file system mounted or
    unmounted on a watched path's way then goes unseen with inotify)."""
    try:
        return MountTable()
    except OSError:
        return None


class Sub(Struct, Generic[W], eq=False):
    """One interest in a kernel watch: wake `watch` for events (with `name`, when set; "": only
    the watched object's own)."""

    wd: int
    watch: W
    name: str | None


class WatchTable(Generic[W]):
    """A notifier's inotify descriptor, counters and problems, and the subscriptions to its kernel
    watches by watch descriptor: one kernel watch serves every subscription to its inode
    (IN_MASK_ADD) and is removed with the last. `mode`: "inotify", "poll" (no inotify to be had,
    or polling asked for) or "none" (`enabled=False`). `counted`: the runner's, whose watches
    short of inotify are counted in `watchrun status` (a view's are not). `leave_remote`: a
    watch that finds its path on a remote file system raises `TurnedRemote` instead of polling
    it (the live runner's: such a file is read on a thread of its own)."""

    def __init__(self, poll_ms: int, *, force_poll: bool = False, enabled: bool = True,
                 counted: bool = False, leave_remote: bool = False) -> None:
        self.poll_s = poll_ms / 1000
        self._counted = counted
        self.leave_remote = leave_remote
        self.wakeups = 0  # how often any Watch.wait returned
        self.overflows = 0  # IN_Q_OVERFLOW seen (every watch was woken to reconcile)
        self.mount_changes = 0  # the mount table changed (every watch was woken to resolve)
        self.problems: list[str] = []
        self.starved: set[W] = set()
        """Watches that poll because the inotify watch limit is reached (until they close)."""
        self._ino: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._subs: dict[int, list[Sub[W]]] = {}
        self._watches: set[W] = set()
        self._warned = self._starved_said = False
        if enabled and not (force_poll or os.environ.get("WATCHRUN_FORCE_POLL") == "1"):
            try:
                self._ino = _open_inotify()
            except OSError as exc:
                self._warn(f"inotify unavailable ({exc.strerror}); polling every {poll_ms} ms")
        self.mode = "inotify" if self._ino is not None else "poll" if enabled else "none"
        self._mounts = _mount_table() if self._ino is not None else None

    def _warn(self, message: str) -> None:
        self.problems.append(message)
        if not self._warned:
            self._warned = True
            log.warning(message)
        else:
            log.debug(message)

    def _polls(self, watch: W, message: str, *, starved: bool) -> None:
        """`watch` polls from now on, as `message` says; `starved`: for want of inotify
        watches, counted while it lasts (`starving`): the first is a warning, the others are
        in the count."""
        if not starved:
            self._warn(message)
            return
        self.starved.add(watch)
        if self._starved_said:
            log.debug(message)
            return
        self._starved_said = True
        others = ("other watchers short of watches poll too, counted in `watchrun status`"
                  if self._counted else "other files short of watches are polled too")
        log.warning(f"{message}: the inotify watch limit is reached (raise "
                    f"fs.inotify.max_user_watches); {others}")

    def starving(self) -> str | None:
        """The standing problem while any watch polls for want of inotify watches."""
        n = len(self.starved)
        if not n:
            return None
        return (f"{n} watcher{'s' if n > 1 else ''} poll: the inotify watch limit is reached "
                "(fs.inotify.max_user_watches); raise it, then restart them (`watchrun restart "
                "ID`: a watcher polls until it starts again)")

    def _detach(self) -> None:
        """Its descriptors are no longer read on the loop they were added to."""
        if self._loop is not None and not self._loop.is_closed():
            for fd in (self._ino, self._mounts):
                if fd is not None:
                    self._loop.remove_reader(fd.fileno())

    def _shut(self) -> None:
        """Its descriptors taken off the loop and closed."""
        self._detach()
        for fd in (self._ino, self._mounts):
            if fd is not None:
                fd.close()
        self._ino = self._mounts = None

    def _add(self, path: str, mask: int) -> int:
        if self._ino is None:
            raise OSError(errno.EBADF, "notifier closed")
        return int(self._ino.add_watch(path, mask | IN_MASK_ADD))

    def _subscribe(self, wd: int, watch: W, name: str | None) -> Sub[W]:
        sub = Sub(wd, watch, name)
        self._subs.setdefault(wd, []).append(sub)
        return sub

    def _unsubscribe(self, sub: Sub[W]) -> None:
        subs = self._subs.get(sub.wd)
        if subs is None or sub not in subs:
            return
        subs.remove(sub)
        if not subs:
            del self._subs[sub.wd]
            if self._ino is not None:
                with contextlib.suppress(OSError):  # already gone (IN_IGNORED on its way)
                    self._ino.rm_watch(sub.wd)


def watched(path: Path) -> list[tuple[str, str | None, int]]:
    """What to watch for `path`, as (directory, name, mask), each once: name "" for a directory
    itself, None for the regular file the path leads to (`_walk`)."""
    met, real = _walk(path)
    named = {d for d, name, _ in met if name}  # (its name watch sees it go, too)
    out: list[tuple[str, str | None, int]] = [
        t for t in dict.fromkeys(met) if t[1] or t[0] not in named]  # (a loop: once)
    if real is not None:
        out.append((real, None, FILE_MASK))
    return out


def _walk(path: Path) -> tuple[list[tuple[str, str, int]], str | None]:
    """Resolve `path` one name at a time, as the kernel does: what to watch, as (directory, name,
    mask), and the real path of the regular file reached, or None. Each directory gone through
    is watched itself (name ""): renamed or deleted, it says so, while the names coming and
    going in it wake nobody. Names are watched in the directory holding them only where the
    path's meaning hangs on a name: a symlink met (swapped, it leads elsewhere), the first name
    missing, and the file's own name."""
    met: list[tuple[str, str, int]] = []
    todo, real, links = list(reversed(path.absolute().parts[1:])), "/", 0
    while todo:
        name = todo.pop()
        if name == "..":
            real = os.path.dirname(real)
            continue
        full, mask = os.path.join(real, name), NAME_MASK if todo else DIR_MASK
        try:
            mode = os.lstat(full).st_mode
            link = Path(os.readlink(full)) if stat.S_ISLNK(mode) else None
        except OSError:  # missing (looked for in its directory), or not for us to see
            return [*met, (real, name, mask)], None
        if link is not None:
            met.append((real, name, mask))
            links += 1
            if links > _MAX_LINKS:  # a loop (ELOOP)
                return met, None
            todo.extend(reversed(link.parts[1:] if link.is_absolute() else link.parts))
            real = "/" if link.is_absolute() else real
        elif not todo:
            return [*met, (real, name, mask)], full if stat.S_ISREG(mode) else None
        elif stat.S_ISDIR(mode):
            real = full
            met.append((real, "", SELF_MASK))
        else:  # not a directory: nothing further to watch
            return [*met, (real, name, mask)], None
    return met, None
