"""The order of one runner's checkpoint saves: a lock per watcher, tickets, and the ticket of
each watcher's last save written, all let go when a forgotten watcher has no save in flight."""

from __future__ import annotations

import itertools
import threading


class SaveOrder:
    """Each watcher's saves run in worker threads, in parallel with other watchers', under the
    watcher's lock. A save is asked for with a ticket (later asks get larger numbers); one
    older than a save written already is dropped, so a slow thread never puts an old position
    back. What orders a watcher's saves is held per watcher id while the runner knows it: a
    watcher forgotten for good (`forgotten`) lets it go, or on a node where pods come and go
    every pod ever seen would keep its share."""

    def __init__(self) -> None:
        self._locks: dict[str, threading.Lock] = {}
        self._written: dict[str, int] = {}  # watcher id → ticket of the last save written
        self._pending: dict[str, int] = {}  # watcher id → its tickets not settled yet
        self._guard = threading.Lock()  # (for the three: tickets are taken on the loop)
        self._tickets = itertools.count(1)

    def ticket(self, watcher_id: str) -> int:
        """A number for a save about to be asked for, in flight until `settled` (without the
        watcher's lock, which a save in a worker thread may hold while it fsyncs)."""
        with self._guard:
            self._pending[watcher_id] = self._pending.get(watcher_id, 0) + 1
            return next(self._tickets)

    def settled(self, watcher_id: str) -> None:
        """A save `ticket` was taken for was written, dropped or failed."""
        with self._guard:
            left = self._pending.pop(watcher_id, 0) - 1
            if left > 0:
                self._pending[watcher_id] = left

    def lock(self, watcher_id: str) -> threading.Lock:
        """The lock of one watcher's file: watchers save (and fsync) in parallel."""
        with self._guard:
            return self._locks.setdefault(watcher_id, threading.Lock())

    def newer(self, watcher_id: str, ticket: int) -> bool:
        """Under the watcher's lock: True, and `ticket` is the last written from now on, when
        no newer save was written."""
        if ticket <= self._written.get(watcher_id, 0):
            return False
        self._written[watcher_id] = ticket
        return True

    def forgotten(self, watcher_id: str) -> None:
        """Under the watcher's lock, its checkpoint deleted: a save asked for before this is not
        written after it. With none in flight nothing is left to order: all is let go (a
        watcher added again under that id starts afresh, its tickets newer than any)."""
        with self._guard:
            if self._pending.get(watcher_id):
                self._written[watcher_id] = next(self._tickets)
            else:
                self._written.pop(watcher_id, None)
                self._locks.pop(watcher_id, None)
