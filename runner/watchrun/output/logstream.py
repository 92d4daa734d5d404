"""The runner's log lines to a file descriptor without ever blocking the caller: written at once
when the descriptor can take them, else queued for a writer thread; what does not fit is counted
and said."""

from __future__ import annotations

import atexit
import collections
import os
import select
import threading
from collections.abc import Callable

BACKLOG_BYTES = 1 << 20
"""Log bytes held while stderr is not read (a stopped pager, a stalled log collector); lines past
this are dropped, counted, and said in one line once it is read again (the JSONL has them all)."""
EXIT_WAIT_S = 2.0
"""At exit, how long queued lines may take to be written before they are given up."""
_STRAIGHT = select.PIPE_BUF
"""A line no longer than this is written at once when poll says the descriptor has room: a
pipe with room takes it whole, without blocking."""


class LogStream:
    """Lines to `fd`, in order. A line is written in the caller's thread when nothing waits before
    it and the descriptor has room; otherwise it is queued and a writer thread (started then)
    writes it, blocking there and not in the caller."""

    def __init__(self, fd: int, note: Callable[[int], str]) -> None:
        """`note(n)`: the line that says `n` lines were dropped."""
        self._fd, self._note = fd, note
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._backlog: collections.deque[bytes] = collections.deque()
        self._held = 0  # bytes in the backlog
        self._busy = False  # the writer has taken a line off the backlog and is writing it
        self._dropped = 0  # lines that did not fit, not said yet
        self._writer: threading.Thread | None = None
        self._poll = select.poll()
        self._poll.register(fd, select.POLLOUT)

    def write(self, line: str) -> None:
        data = line.encode("utf-8", "backslashreplace")
        with self._lock:
            if (not self._backlog and not self._busy and not self._dropped
                    and len(data) <= _STRAIGHT and self._room()):
                try:
                    data = data[os.write(self._fd, data):]
                except BlockingIOError:  # the descriptor is non-blocking, and full
                    pass
                except OSError:  # closed or broken: there is nowhere to write
                    return
                if not data:
                    return
            self._queue(data)

    def drain(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for every queued line to be written; whether it was."""
        with self._changed:
            return self._changed.wait_for(self._idle, timeout)

    @property
    def dropped(self) -> int:
        """Lines dropped and not yet said."""
        return self._dropped

    def _idle(self) -> bool:
        return not self._backlog and not self._busy and not self._dropped

    def _room(self) -> bool:
        try:
            return bool(self._poll.poll(0))  # POLLOUT; or POLLERR/HUP: the write fails at once
        except OSError:
            return True

    def _queue(self, data: bytes) -> None:
        if self._dropped:  # said before the next line that fits
            note = self._note(self._dropped).encode("utf-8", "backslashreplace")
            if self._held + len(note) + len(data) > BACKLOG_BYTES:
                self._dropped += 1
                return
            self._put(note)
            self._dropped = 0
        elif self._held + len(data) > BACKLOG_BYTES:
            self._dropped += 1
            return
        self._put(data)
        if self._writer is None:
            self._writer = threading.Thread(target=self._run, name="watchrun-log", daemon=True)
            self._writer.start()
            atexit.register(self.drain, EXIT_WAIT_S)

    def _put(self, data: bytes) -> None:
        self._backlog.append(data)
        self._held += len(data)
        self._changed.notify_all()

    def _run(self) -> None:
        """The writer thread: writes what is queued, blocking as long as the reader makes it."""
        while True:
            with self._changed:
                while not self._backlog:
                    if self._dropped:  # all that fitted is out: now what did not
                        self._put(self._note(self._dropped).encode("utf-8", "backslashreplace"))
                        self._dropped = 0
                        break
                    self._busy = False
                    self._changed.notify_all()
                    self._changed.wait()
                data = self._backlog.popleft()
                self._held -= len(data)
                self._busy = True
            if not self._write_all(data):
                with self._lock:  # nowhere to write: what waits is given up
                    self._backlog.clear()
                    self._held = self._dropped = 0

    def _write_all(self, data: bytes) -> bool:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._fd, view):]
            except BlockingIOError:
                select.select([], [self._fd], [], 1.0)
            except OSError:
                return False
        return True
