"""Whether a watcher's JSONL got new `match` records, told without parsing them (a subscription's
wake-up): the new bytes are searched for the marker the runner writes in every match record."""

from __future__ import annotations

import os
from pathlib import Path

from watchrun.preads import pread_full
from watchrun.views.follow import ROUNDS, Generations

__all__ = ["BUDGET", "MARK", "SLICE", "MatchSkimmer"]

MARK = b'"kind":"match"'
"""In every match record as the runner writes it (compact JSON, `output/jsonl.dumps` and the
sink's match template), and nowhere else: inside a JSON string a `"` is always escaped."""
SLICE = 1 << 20
"""Bytes read per step."""
BUDGET = 16 << 20
"""Bytes one `look()` reads at most (the rest waits for the next call)."""


class MatchSkimmer(Generations):
    """Looks at what is appended to `<id>.jsonl`, across rotation (the old generation is looked
    at to its end, then the new one from its start), a line at a time but without decoding
    one: a complete line that holds `MARK` is a new match. Once one is found the rest written
    so far is passed over (one update covers them all: the client reads the resource again),
    so a flood costs a search up to its first match per look, and memory is one slice."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._pending = False  # the line being passed over (longer than a slice) is a match

    def start(self) -> None:
        """From now on: what the path holds now is passed over (a record still being written
        is not: it counts once whole)."""
        self.close()
        if self._open_path():
            self._pos = self._last_line_end()

    def look(self, budget: int = BUDGET) -> tuple[bool, bool]:
        """(a match was recorded since the last look, more is left to look at: call again
        without waiting). Reads about `budget` bytes at most."""
        for _ in range(ROUNDS):
            if self._fd < 0 and not self._open_path():
                return False, False
            found, left = self._scan(budget)
            if not found and left is not None:
                moved = self._moved()
                if not moved:  # the same file, or it was deleted (read to its end: closed)
                    if moved is None:
                        self.close()
                    return False, False
                found, left = self._scan(left)  # what was written to it before it went
                if not found and left is not None:
                    found = not self._successor()  # generations never looked at came
                    self.close()  # between: they may hold one
                    budget = left
                    if not found:
                        continue
            if found:
                self.start()  # the rest is passed over, rotated or not
                return True, False
            return False, True
        return False, True

    def close(self) -> None:
        super().close()
        self._pending = False

    def _scan(self, budget: int) -> tuple[bool, int | None]:
        """Look from `_pos` on: (a whole line with MARK was met, the budget left or None when
        it ran out first). `_pos` stays at the start of a line not yet whole."""
        if os.fstat(self._fd).st_size < self._pos:  # cut short in place: from its start
            self._pos, self._pending = 0, False
        while budget > 0:
            data = pread_full(self._fd, SLICE, self._pos)
            budget -= len(data)
            end = data.rfind(b"\n") + 1
            if end:
                if self._pending or data.find(MARK, 0, end) >= 0:
                    self._pos += end
                    self._pending = False
                    return True, budget
                self._pos += end
            elif len(data) == SLICE:  # one line longer than a slice: passed over, its
                self._pending |= MARK in data  # marker remembered (a marker cut in two is
                self._pos += SLICE - len(MARK) + 1  # whole in the next slice)
            if len(data) < SLICE:
                return False, budget
        return False, None

    def _last_line_end(self) -> int:
        """Where the last whole line of the open file ends (or, for a line longer than a slice
        still being written, a slice before the end)."""
        size = os.fstat(self._fd).st_size
        start = max(0, size - SLICE)
        return start + pread_full(self._fd, size - start, start).rfind(b"\n") + 1

    def _successor(self) -> bool:
        """Whether the open file is now `<id>.jsonl.1`: the path's new file came right after
        it (one rotation), not after generations never looked at."""
        try:
            st = os.stat(f"{self.path}.1", follow_symlinks=False)
        except FileNotFoundError:
            return False
        return (st.st_dev, st.st_ino) == self._id
