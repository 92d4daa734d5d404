"""Rotated JSONL files made durable off the event loop: fsync, close, directory fsync, in a thread.

A sink rotates on the event loop's thread (a rename is quick), but the fsync of the file it
rotated away may take as long as the disk needs to write up to `output.maxBytes` of dirty
pages: tens of milliseconds on a local disk, seconds on a slow one, during which no other
watcher would be read. The sink hands the file's descriptor to a `Syncer`, which owns it from
then on; `wait` (the sink's close, itself run off the loop) joins every hand-over and raises the
first failure, so a rotated file that could not be made durable is reported, not forgotten.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from watchrun.output import safefs


class Syncer:
    """The fsyncs of one sink's rotated files, each in a thread of its own."""

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []
        self._failed: OSError | None = None
        self._lock = threading.Lock()

    def hand_over(self, fd: int, directory: Path) -> None:
        """Own `fd` from now on: fsync it, close it, and fsync `directory` (renamed in)."""
        self._threads = [t for t in self._threads if t.is_alive()]
        thread = threading.Thread(target=self._sync, args=(fd, directory), daemon=True,
                                  name="watchrun-fsync")
        self._threads.append(thread)
        thread.start()

    def _sync(self, fd: int, directory: Path) -> None:
        try:
            os.fsync(fd)
            safefs.fsync_dir(directory)
        except OSError as exc:
            with self._lock:
                self._failed = self._failed or exc
        finally:
            os.close(fd)

    def wait(self) -> None:
        """Join every hand-over (blocking: call it off the loop); raise the first failure."""
        for thread in self._threads:
            thread.join()
        self._threads = []
        with self._lock:
            failed, self._failed = self._failed, None
        if failed is not None:
            raise failed
