"""The account of a followed path's generations: files that came to the path (`Watch.arrivals`)
against those its rotations found, so that the ones gone before any look are counted."""

from __future__ import annotations

from watchrun.notify import Watch


class Unseen:
    """What the file source has accounted for: `arrived` generations found by rotations since
    the last account, and the arrivals (`epoch`, `count`) counted then."""

    def __init__(self) -> None:
        self.arrived = 0
        self._counted: tuple[int, int] | None = None
        self._other: tuple[int, int] | None = None

    def other(self, ident: tuple[int, int]) -> None:
        """What is at the path is no regular file (a directory, a FIFO: the runner said so in
        an `error` record): it came to the path and was seen, as a generation found is (once
        for each: it is looked at on every wake-up while it is there)."""
        if ident != self._other:
            self._other = ident
            self.arrived += 1

    def before_look(self, watch: Watch) -> None:
        """Before the path is looked at: after a rotation (or with no account yet), the events
        queued now are read, so that the arrival of the file followed and of every file before
        it is counted; an arrival after this read is after that file's (the look then finds
        another at the path) and is counted at a later look. While nothing rotates: nothing."""
        came = watch.arrivals
        if came.wd is not None and not watch.polling and (
                self.arrived or self._counted is None or self._counted[0] != came.epoch):
            watch.notifier.drain()

    def gone(self, watch: Watch) -> int:
        """The look found the file followed at the path: how many files came to the path since
        the last account that no rotation found (created and gone again between two looks),
        said once. No arrival counted is of a file that came after the one followed: that file
        would have replaced it at the path."""
        came = watch.arrivals
        if came.wd is None or watch.polling:
            self._counted = None
            return 0
        base = self._counted[1] if self._counted and self._counted[0] == came.epoch else None
        unseen = 0 if base is None else came.count - base - self.arrived
        self._counted, self.arrived = (came.epoch, came.count), 0
        return max(0, unseen)
