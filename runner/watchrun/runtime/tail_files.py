"""A board's `.tail` snapshots at a cost that tracks what was read: a watcher's new lines are
appended to its `state/<id>.tail`, which is rewritten whole (tmp + rename) only when the watcher
(re)starts, when the file would hold more than twice its `maxLogLines` lines, or when what it
holds is not known (a write failed, the file was removed)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import NamedTuple

from watchrun.match.redact import Redactor
from watchrun.output import safefs, tailfile
from watchrun.runtime.recent_lines import RecentLines
from watchrun.runtime.snapshot_text import TAIL_LINE_BYTES, tail_lines

COMPACT_AT = 2
"""A `.tail` is rewritten whole when appending would make it hold more than this many times
`maxLogLines` lines (its readers show the last `maxLogLines`, as its header says)."""
CONTEXT_LINES = 16
"""With `output.redact`, lines appended are redacted together with this many lines before them
(then dropped), so a secret spanning lines (a name on one, its value on the next) is found
whole, as in a rewrite of the whole tail."""


class Mark(NamedTuple):
    """What a `.tail` file holds: lines of which start of the watcher, redacted by which
    redactor, the line count its last line has, and how many `lines` it holds."""

    run: str
    redactor: Redactor | None
    end: int
    lines: int


class TailWrite(NamedTuple):
    """A `.tail` to write: `data` replaces the file (`base` None), or is appended to the file
    when it holds `base`; then it holds `mark`."""

    wid: str
    path: Path
    data: bytes
    base: Mark | None
    mark: Mark


class TailFiles:
    """What each `.tail` holds, as its last write left it (renders on the loop, writes in the
    board's writer thread, one at a time)."""

    def __init__(self) -> None:
        self._held: dict[Path, Mark] = {}
        self._redo: set[str] = set()
        self._lock = threading.Lock()

    def render(self, wid: str, path: Path, run: str, end: int, tail: RecentLines,
               redactor: Redactor | None, max_line_bytes: int, whole: bool = False
               ) -> TailWrite | None:
        """The write that brings the file to `end` (None: it is there already): the new lines
        appended when the file holds this run's lines up to fewer than `maxLogLines` before
        them, else (or `whole`) the whole tail, which replaces it."""
        keep = tail.keep
        with self._lock:
            held = self._held.get(path)
        if not whole and held is not None and held.run == run and held.redactor is redactor:
            new = end - held.end
            if new == 0:
                return None
            if 0 < new < keep and held.lines + new <= COMPACT_AT * keep:
                context = CONTEXT_LINES if redactor is not None else 0
                raw = tail.last(TAIL_LINE_BYTES, new + context)
                lines = tail_lines(raw, redactor, max_line_bytes)[-new:]
                return TailWrite(wid, path, tailfile.more(lines), held,
                                 Mark(run, redactor, end, held.lines + new))
        lines = tail_lines(tail.last(TAIL_LINE_BYTES), redactor, max_line_bytes)
        return TailWrite(wid, path, tailfile.render(run, end, lines, keep), None,
                         Mark(run, redactor, end, len(lines)))

    def write(self, item: TailWrite, dfd: int | None = None) -> None:
        """Write it (an OSError is the caller's to say; the file is then rewritten whole at its
        next snapshot). An append to a file not as the last write left it (removed meanwhile)
        is not made: the watcher is one `redo()` returns. `dfd`: its directory, held open."""
        with self._lock:
            held = self._held.pop(item.path, None)
        if item.base is None:
            safefs.write_atomic(item.path, item.data, sync=False, dfd=dfd)
        else:
            try:
                fd = safefs.open_write(item.path, os.O_WRONLY | os.O_APPEND, 0o640, dfd) \
                    if held == item.base else None
            except FileNotFoundError:
                fd = None
            if fd is None:
                with self._lock:
                    self._redo.add(item.wid)
                return
            try:
                safefs.write_all(fd, item.data)
            finally:
                os.close(fd)
        with self._lock:
            self._held[item.path] = item.mark

    def forget(self, path: Path) -> None:
        """The file was removed: its next snapshot is written whole."""
        with self._lock:
            self._held.pop(path, None)

    def redo(self) -> set[str]:
        """The watchers whose last append was not made: their next snapshot is written whole."""
        with self._lock:
            found, self._redo = self._redo, set()
        return found
