"""Change notification: one inotify instance (or polling), for the runner's file sources on its
asyncio loop and for the CLI's followers (`--follow`, `agent watch --until`) without a loop."""

from __future__ import annotations

import asyncio
import errno
import select
import time
from pathlib import Path

from watchrun.arrivals import Arrivals, leaf_watch
from watchrun.inotify import MountTable, TurnedRemote, remote_fs
from watchrun.inotify_watches import (
    FILE_MASK,
    IN_DELETE_SELF,
    IN_IGNORED,
    IN_MOVE_SELF,
    IN_Q_OVERFLOW,
    Sub,
    WatchTable,
    watched,
)

_RESOLVE = IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED  # the watched object itself went away
_EXHAUSTED = {errno.ENOSPC, errno.EMFILE, errno.ENFILE}
FAST_POLL_S = 0.01
"""Polling interval while a file grows (at most `pollMs`)."""
MAX_SELECT_S = 86400.0
"""The longest one select(2) of `wait_blocking` waits (a longer timeout overflows its time_t)."""


class Notifier(WatchTable["Watch"]):
    """Shares one inotify fd (registered with `loop.add_reader`) among all `Watch`es.

    Idle costs nothing: no timers, no wake-ups. Where inotify is missing, exhausted for a path,
    or disabled (`force_poll=True` or `WATCHRUN_FORCE_POLL=1`), a watch wakes every `poll_ms`.
    `enabled=False` (mode "none": for sources that never wait) opens no inotify and arms
    nothing; a watch waited on all the same polls.
    """

    @property
    def watches(self) -> tuple[Watch, ...]:
        return tuple(self._watches)

    def watch(self, path: Path) -> Watch:
        w = Watch(self, Path(path))
        w.rearm(first=True)  # (a `TurnedRemote` from it leaves nothing armed)
        self._watches.add(w)
        return w

    def close(self) -> None:
        self._shut()
        self._subs.clear()
        for w in list(self._watches):
            w.polling = True
            w._wake()

    def drain(self) -> None:
        """Read the events queued now (without waiting): the watches they concern are woken."""
        self._on_readable()

    # -- internals used by Watch ----------------------------------------------------------
    def _attach(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._ino is None or self._loop is loop:
            return
        self._detach()
        loop.add_reader(self._ino.fileno(), self._on_readable)
        if self._mounts is not None:
            loop.add_reader(self._mounts.fileno(), self._on_mounts, self._mounts)
        self._loop = loop

    def _on_mounts(self, mounts: MountTable) -> None:
        """A file system was mounted or unmounted: every path is resolved again and looked at
        (one that leads elsewhere now is a rotation; inotify says nothing of it)."""
        mounts.seen()
        self.mount_changes += 1
        for w in self._watches:
            w._wake(resolve=True)

    def _on_readable(self) -> None:
        try:
            events = self._ino.read() if self._ino is not None else []
        except OSError:
            return
        for ev in events:
            if ev.mask & IN_Q_OVERFLOW:
                self.overflows += 1
                for w in self._watches:
                    w.arrivals.lost()
                    w._wake(resolve=True)
                continue
            subs = self._subs.get(ev.wd)
            if not subs:
                continue
            if ev.mask & IN_IGNORED:  # the kernel dropped the watch (object deleted)
                del self._subs[ev.wd]
                for sub in subs:
                    sub.watch._forget(sub)
            for sub in list(subs):
                if sub.name == sub.watch.arrivals.name and sub.wd == sub.watch.arrivals.wd:
                    sub.watch.arrivals.event(ev.mask, ev.cookie, ev.name)
                if sub.name is None or not ev.name or ev.name == sub.name:
                    resolve = sub.name is not None or bool(ev.mask & _RESOLVE)
                    sub.watch._wake(resolve=resolve)


class Watch:
    """Wakes its file source when something about `path` may have changed.

    Watches every directory the path goes through (a symlink's target too) for its own rename
    or deletion, each symlink met and the file's name (or the first missing one) in the
    directory holding it, the file at the path, and every descriptor passed to `track` (an old
    generation still being drained). A change on the way marks the watch `stale`. Spurious
    wake-ups happen; missed ones do not: a wake-up that arrives while nobody waits is
    remembered.
    """

    def __init__(self, notifier: Notifier, path: Path) -> None:
        self.notifier, self.path = notifier, path
        self.polling = notifier.mode != "inotify"
        self.stale = False
        """Set when the directory layout may have changed: call `rearm()` to re-resolve."""
        self._flag = self._hurry = False
        self._waiter: asyncio.Future[None] | None = None
        self._path_subs: dict[tuple[int, str | None], Sub[Watch]] = {}
        self._fd_subs: dict[int, Sub[Watch]] = {}
        self.arrivals = Arrivals(self.path.name)
        """Files that came to the path: how a file source counts generations it never saw;
        counted only where no symlink is on the way (a swapped link brings no file)."""

    @property
    def waiting(self) -> bool:
        """True while a task is parked in `wait()`."""
        return self._waiter is not None and not self._waiter.done()

    async def wait(self) -> None:
        """Return when something relevant may have changed (every poll interval when polling)."""
        if not self._flag:
            loop = asyncio.get_running_loop()
            self.notifier._attach(loop)
            fut: asyncio.Future[None] = loop.create_future()
            self._waiter = fut
            timer = None
            if self.polling or self.notifier._ino is None:
                delay = min(FAST_POLL_S, self.notifier.poll_s) if self._hurry else \
                    self.notifier.poll_s
                timer = loop.call_later(delay, _resolve, fut)
            try:
                await fut
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()
        self._flag = self._hurry = False
        self.notifier.wakeups += 1

    def looking(self) -> None:
        """The owner is about to look at everything: a wake-up noted so far is answered by that
        look (a change from now on wakes it again)."""
        self._flag = False

    def wait_blocking(self, timeout_s: float, gone: int | None = None) -> None:
        """`wait()` without an event loop: until something may have changed, or `timeout_s` (one
        poll interval when polling). The caller re-arms a `stale` watch, as after `wait()`.
        `gone`: the write-only end of a pipe whose reader may go away (a follower's stdout):
        select reports it readable only then, and that ends the wait too."""
        end = time.monotonic() + max(0.0, timeout_s)
        extra = [] if gone is None else [gone]
        while not self._flag and (left := end - time.monotonic()) > 0:
            ino = self.notifier._ino
            if self.polling or ino is None:
                select.select(extra, [], [], min(left, self.notifier.poll_s))  # (a sleep)
                break
            # (at most a day per select: a longer wait, `agent watch --timeout 100000000d`,
            # overflows select's time_t; the loop waits again for the rest)
            ready = select.select([ino.fileno(), *extra], [], [], min(left, MAX_SELECT_S))[0]
            if gone is not None and gone in ready:
                break
            if ready:
                self.notifier._on_readable()
        self._flag = False
        self.notifier.wakeups += 1

    def hurry(self) -> None:
        """Polling: the next look comes after FAST_POLL_S, not pollMs (the file is growing, so
        a truncation or rotation is seen before much more is written)."""
        self._hurry = True

    def poke(self) -> None:
        """Wake the waiter now (a source's own timer, e.g. the end of a rotate-wait)."""
        self._wake()

    def rearm(self, *, first: bool = False) -> None:
        """Re-resolve the directories and the file at the path (after rotation, appearance, or
        a change of a directory on the way). A new watch wakes the owner to look again, and to
        re-resolve: the path may have changed before the watch existed. Not after a `first`
        arm that found the file: the owner looks after arming anyway, the file is watched, and
        a change to the path since is an event in one of its directories, which marks the
        watch stale (a file source's start saves a second arm). `TurnedRemote` for a path on a
        remote file system when the notifier is to `leave_remote`, polling too."""
        self.stale = False
        polls, leave = self.polling or self.notifier._ino is None, self.notifier.leave_remote
        remote = remote_fs(self.path) if leave or not polls else None
        if remote is not None and leave:
            raise TurnedRemote(remote)
        if polls:
            return
        if remote is not None:  # (what other hosts write there never wakes inotify)
            self._poll_instead(f"{self.path} is on {remote}, where inotify does not see what "
                               "other hosts write")
            return
        new: dict[tuple[int, str | None], Sub[Watch]] = {}
        added = False
        targets = watched(self.path)
        for target, name, mask in targets:
            try:
                wd = self.notifier._add(target, mask)
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                    self.stale = added = True  # it changed under us: look again
                    continue
                for held in [*new.values(), *self._path_subs.values()]:  # (free what this
                    self.notifier._unsubscribe(held)  # path alone held, for other paths)
                self._path_subs = {}
                self._fall_back(exc, target)
                return
            key = (wd, name)
            if key not in new:
                sub = self._path_subs.pop(key, None)
                if sub is None:
                    sub, added = self.notifier._subscribe(wd, self, name), True
                new[key] = sub
        for sub in self._path_subs.values():
            self.notifier._unsubscribe(sub)
        self._path_subs = new
        self.arrivals.watching(leaf_watch(self.path, targets, new))
        if added:
            found = first and any(name is None for _, name, _ in targets)
            self._wake(resolve=not found)

    def track(self, fd: int) -> None:
        """Also wake on changes to the file open as `fd` (wherever it is renamed to)."""
        if self.polling or self.notifier._ino is None or fd in self._fd_subs:
            return
        try:
            wd = self.notifier._add(f"/proc/self/fd/{fd}", FILE_MASK)
        except OSError as exc:
            if exc.errno in _EXHAUSTED:
                self._fall_back(exc, str(self.path))
            return  # no /proc: the path watch still covers the current file
        self._fd_subs[fd] = self.notifier._subscribe(wd, self, None)
        self._wake()

    def untrack(self, fd: int) -> None:
        sub = self._fd_subs.pop(fd, None)
        if sub is not None:
            self.notifier._unsubscribe(sub)

    def close(self) -> None:
        for sub in [*self._path_subs.values(), *self._fd_subs.values()]:
            self.notifier._unsubscribe(sub)
        self._path_subs, self._fd_subs = {}, {}
        self.notifier._watches.discard(self)
        self.notifier.starved.discard(self)
        self._wake()

    # -- internals --------------------------------------------------------------------------
    def _fall_back(self, exc: OSError, target: str) -> None:
        code = errno.errorcode.get(exc.errno or 0, "OSError")
        self._poll_instead(f"cannot watch {target} with inotify ({code}: {exc.strerror})",
                           starved=exc.errno in _EXHAUSTED)

    def _poll_instead(self, why: str, *, starved: bool = False) -> None:
        """From now on this watch polls (its inotify watches are left to `close`); `starved`:
        for want of inotify watches."""
        self.notifier._polls(self, f"{why}; polling {self.path} every "
                             f"{round(self.notifier.poll_s * 1000)} ms", starved=starved)
        self.polling = True
        self.arrivals.watching(None)
        self._wake()

    def _forget(self, sub: Sub[Watch]) -> None:
        self._path_subs = {k: s for k, s in self._path_subs.items() if s is not sub}
        self._fd_subs = {k: s for k, s in self._fd_subs.items() if s is not sub}
        self.stale = True
        if sub.wd == self.arrivals.wd and sub.name == self.arrivals.name:
            self.arrivals.watching(None)

    def _wake(self, *, resolve: bool = False) -> None:
        if resolve:
            self.stale = True
        self._flag = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
