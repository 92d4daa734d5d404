"""Writing a status board's snapshot files (`runtime/status.py`) in its writer thread: each write
carries a generation, so an older one never replaces a newer one nor revives a removed file; the
run lock is made before the first; a file that cannot be written is a warning, once."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import TypeAlias

from watchrun.output import runlock, safefs
from watchrun.runtime.tail_files import TailFiles, TailWrite

log = logging.getLogger("watchrun.status")  # (the runner log's `status` events)

Batch: TypeAlias = tuple[int, list[tuple[Path, bytes]], list[TailWrite]]
"""Rendered snapshots: their generation, the files replaced whole, the `.tail` writes."""


class SnapshotFiles:
    """The board's files on disk: what generation of each was written (or removed) last."""

    def __init__(self, run: runlock.RunLock, ours: Callable[[], bool]) -> None:
        self._run = run
        self._ours = ours  # (whether state/ is still the board's own)
        self.tails = TailFiles()
        self._gen = 0
        self._stored: dict[Path, int] = {}  # path -> generation written (or removed) last
        self._failing: dict[Path, str] = {}  # path -> why its last write failed (said once)
        self._lock = threading.Lock()  # generations; held briefly, never across I/O
        self._io_lock = threading.Lock()  # one writer of snapshot files at a time

    def batch(self, files: list[tuple[Path, bytes]], tails: list[TailWrite]) -> Batch:
        """These rendered files under the next generation."""
        with self._lock:
            self._gen += 1
            return self._gen, files, tails

    def remove(self, paths: Callable[[], Iterable[Path]]) -> None:
        """Remove the files `paths()` names (when state/ is still ours): a write rendered
        before never makes them again."""
        with self._io_lock, self._lock:
            self._gen += 1
            if self._ours():  # (another runner's state/: its files are not ours to remove)
                for p in paths():
                    self._stored[p] = self._gen  # a queued older write must not revive it
                    self.tails.forget(p)
                    with contextlib.suppress(OSError):
                        safefs.unlink(p)

    def store(self, batch: Batch, last: bool = False) -> None:
        """Write rendered files unless a newer generation of them is already on disk, the run
        lock first (`last`: then let go of it, the runner ends)."""
        gen, files, tails = batch
        with self._io_lock:
            ours = bool(files or tails) and self._ours()
            if ours:
                self._hold_run()
            with _held_dir(self._run.path.parent if ours else None) as dfd:
                # no fsync: a snapshot is written again within a second of any change, and one
                # lost to a power cut is superseded; an fsync each held the journal
                for path, data in files if ours else ():
                    self._put(path, gen, partial(safefs.write_atomic, path, data, sync=False,
                                                 dfd=_within(dfd, path)))
                for tail in tails if ours else ():
                    self._put(tail.path, gen, partial(self.tails.write, tail,
                                                      _within(dfd, tail.path)))
            if last:
                self._run.release()

    def _put(self, path: Path, gen: int, write: Callable[[], None]) -> None:
        """One file's `write`, unless a newer generation of it is on disk already."""
        with self._lock:
            if self._stored.get(path, 0) >= gen:
                return
        try:
            write()
        except OSError as exc:  # best effort (records and checkpoints come first),
            self._said(path, exc.strerror or str(exc))  # but never silently
            return
        self._failing.pop(path, None)
        with self._lock:
            self._stored[path] = gen

    def _hold_run(self) -> None:
        """The run lock, made before the snapshots that name it."""
        try:
            self._run.hold()
        except OSError as exc:
            self._said(self._run.path, exc.strerror or str(exc), "without a runner's answer, "
                       "`watchrun list` and `status` take this runner's watchers for stopped")
        else:
            self._failing.pop(self._run.path, None)

    def _said(self, path: Path, why: str, meanwhile: str = "`watchrun list`, `status` and "
              "`logs` show what it held last, or nothing") -> None:
        """A file that cannot be written is a warning, once until it is written again."""
        if self._failing.get(path) != why:
            self._failing[path] = why
            log.warning("cannot write %s: %s; %s until it can be written", path, why, meanwhile)


@contextlib.contextmanager
def _held_dir(path: Path | None) -> Iterator[tuple[Path, int] | None]:
    """state/ opened once for a batch of snapshot files (None: not to be written, or it cannot
    be opened: each write then opens it, and says why it fails)."""
    fd = None
    if path is not None:
        with contextlib.suppress(OSError):
            fd = safefs.open_dir(path)
    try:
        yield None if fd is None or path is None else (path, fd)
    finally:
        if fd is not None:
            os.close(fd)


def _within(held: tuple[Path, int] | None, path: Path) -> int | None:
    """The held directory's descriptor when `path` is in it."""
    return held[1] if held is not None and path.parent == held[0] else None
