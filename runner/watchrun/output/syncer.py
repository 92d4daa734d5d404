"""A JSONL stream made durable off the event loop: the files rotated away (fsync, close, directory
fsync, in a thread), and what a checkpoint covers, before it is saved (fdatasync).

A sink rotates on the event loop's thread (a rename is quick), but the fsync of the file it
rotated away may take as long as the disk needs to write up to `output.maxBytes` of dirty
pages: tens of milliseconds on a local disk, seconds on a slow one, during which no other
watcher would be read. The sink hands the file's descriptor to a `Syncer`, which owns it from
then on; `wait` (the sink's close, itself run off the loop) joins every hand-over and raises the
first failure, so a rotated file that could not be made durable is reported, not forgotten.

A checkpoint says which lines were recorded: once it is on disk, those lines are never read
again. It must therefore never reach the disk before the records it covers (a power cut
would leave a checkpoint past the end of the stream: those lines lost with no record, and
their seqs given out again). `barrier` is the job a checkpoint's save runs first, in the same
worker thread: the live file's fdatasync, after the rotated files' fsyncs.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from pathlib import Path

from watchrun.output import safefs


class Syncer:
    """The fsyncs of one sink: its rotated files', each in a thread of its own, and its live
    file's before a checkpoint. `fsync`, `fdatasync`: the calls it makes (a test's seam)."""

    def __init__(self, *, fsync: Callable[[int], None] | None = None,
                 fdatasync: Callable[[int], None] | None = None) -> None:
        self.fsync = fsync or os.fsync  # (looked up now: a test may have replaced os.fsync)
        self.fdatasync = fdatasync or os.fdatasync
        self._threads: list[threading.Thread] = []
        self._failed: OSError | None = None
        self._lock = threading.Lock()
        self._synced: tuple[tuple[int, int], int] | None = None
        """The live file's (inode, size) when a barrier's job synced it (None: none yet)."""

    def hand_over(self, fd: int, directory: Path) -> None:
        """Own `fd` from now on: fsync it, close it, and fsync `directory` (renamed in)."""
        self._threads = [t for t in self._threads if t.is_alive()]
        thread = threading.Thread(target=self._sync, args=(fd, directory), daemon=True,
                                  name="watchrun-fsync")
        self._threads.append(thread)
        thread.start()

    def _sync(self, fd: int, directory: Path) -> None:
        try:
            self.fsync(fd)
            safefs.fsync_dir(directory)
        except OSError as exc:
            with self._lock:
                self._failed = self._failed or exc
        finally:
            os.close(fd)

    def barrier(self, fd: int, inode: tuple[int, int], size: int, path: Path
                ) -> Callable[[], None] | None:
        """On the loop: a job for a worker thread that makes every record written so far
        durable. It joins the rotated files' fsyncs handed over before, then fdatasyncs the live
        file `fd` (`inode`, `size`) through a duplicate of it (the sink may close or rotate it
        meanwhile; a job dropped unrun closes it when collected), and fsyncs its directory too
        when it is a file no barrier synced before (its name is new). It raises OSError, naming
        `path`, when a fsync of the stream failed. None when there is nothing to wait for: no
        record written since the last job that ran."""
        threads = [t for t in self._threads if t.is_alive()]
        live, synced = (inode, size), self._synced
        if live == synced and not threads and self._failed is None:
            return None
        new = synced is None or synced[0] != inode
        dup = os.dup(fd) if fd >= 0 and live != synced else -1

        def job() -> None:
            for thread in threads:
                thread.join()
            with self._lock:
                failed = self._failed
            try:
                if failed is not None:
                    raise OSError(failed.errno, f"a rotated file of {path} could not be made "
                                  f"durable: {failed.strerror}")
                if dup >= 0:
                    try:
                        self.fdatasync(dup)
                        if new:
                            safefs.fsync_dir(path.parent)
                    except OSError as exc:
                        raise OSError(exc.errno, f"cannot sync {path}: {exc.strerror}") from exc
                    self._synced = live  # (a job that ends later may set an older one: the
                    # next barrier then syncs once more than it needs, never less)
            finally:
                if closer is not None:
                    closer()

        closer = weakref.finalize(job, os.close, dup) if dup >= 0 else None
        return job

    def wait(self) -> None:
        """Join every hand-over (blocking: call it off the loop); raise the first failure."""
        for thread in self._threads:
            thread.join()
        self._threads = []
        with self._lock:
            failed, self._failed = self._failed, None
        if failed is not None:
            raise failed
