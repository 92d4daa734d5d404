"""Lines to a file descriptor (the runner's log on stderr, a once run's output on stdout) without
ever blocking the caller: written at once when the descriptor can take them, else queued for a
writer thread; what does not fit is counted and said, or waited for. Also what the stream is:
the journal (`on_journal`), a terminal (`is_tty`)."""

from __future__ import annotations

import atexit
import collections
import contextlib
import os
import select
import stat
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

BACKLOG_BYTES = 1 << 20
"""Bytes held while the descriptor is not read (a stopped pager, a stalled log collector). Log
lines past this are dropped, counted, and said in one line once it is read again (the JSONL has
them all); a stream that must not drop (stdout) makes its writer wait in `room()` instead."""
EXIT_WAIT_S = 2.0
"""At exit, queued lines are written for as long as the reader takes some at least this often;
a reader that takes nothing for this long is given up on, and the process ends."""
HURRY_S = 0.1
"""How often a drain looks whether it is to wait no longer (`LogStream.hurried`)."""
_PIECE = select.PIPE_BUF
"""The writer thread writes at most this much at a time: a blocking write returns only once all
of it is taken, so a slow reader's progress is seen every PIPE_BUF bytes (down to ~2 KB/s
within EXIT_WAIT_S)."""
_STRAIGHT = select.PIPE_BUF
"""A line no longer than this is written at once when poll says the descriptor has room: a
pipe with room takes it whole, without blocking."""


def on_journal(stream: TextIO, environ: Mapping[str, str]) -> bool:
    """True when `stream` is connected to the journal: systemd sets JOURNAL_STREAM to the
    `device:inode` of the stream it connected (systemd.exec(5)); a redirected stderr differs."""
    dev, sep, ino = environ.get("JOURNAL_STREAM", "").partition(":")
    if not sep or not dev.isdigit() or not ino.isdigit():
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):  # StringIO & co. raise UnsupportedOperation
        return False
    return (st.st_dev, st.st_ino) == (int(dev), int(ino))


def is_tty(stream: TextIO) -> bool:
    """Whether `stream` is a terminal (a closed or odd stream: not one)."""
    try:
        return stream.isatty()
    except (OSError, ValueError):
        return False


class LogStream:
    """Lines to `fd`, in order. A line is written in the caller's thread when nothing waits before
    it and the descriptor has room; otherwise it is queued and a writer thread (started then)
    writes it, blocking there and not in the caller."""

    hurried = False
    """A stop came once the process's exit status was known (`cli.stops`): drains wait no
    longer (a reader that keeps taking the log held the exit for as long as it did)."""

    def __init__(self, fd: int, note: Callable[[int], str] | None = None) -> None:
        """`note(n)`: the line that says `n` lines were dropped; None: nothing is dropped (the
        caller waits for `room()` before it writes more)."""
        self._fd, self._note = fd, note
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._backlog: collections.deque[bytes] = collections.deque()
        self._held = 0  # bytes in the backlog
        self._busy = False  # the writer has taken a line off the backlog and is writing it
        self._dropped = 0  # lines that did not fit, not said yet
        self._writer: threading.Thread | None = None
        self._waiters: list[tuple[Any, Any]] = []  # (loop, future) of each `room()` waiting
        self._wrote_at = 0.0  # monotonic time of the writer thread's last write
        self._gave_up = False  # `abandon()` was called, and nothing was put since
        self.failed: str | None = None
        """Why the descriptor refused a write (not a reader that went away): from then on
        nothing more is written, so what was written is a beginning, never one with holes."""
        try:  # a regular file takes any write whole, without waiting for a reader
            self._file = stat.S_ISREG(os.fstat(fd).st_mode)
        except OSError:
            self._file = False
        self._poll = select.poll()
        self._poll.register(fd, select.POLLOUT)

    def write(self, line: str) -> None:
        self.put(line.encode("utf-8", "backslashreplace"))

    def put(self, data: bytes) -> None:
        """Write `data` (whole lines) or queue it."""
        with self._lock:
            if self.failed is not None:
                return
            self._gave_up = False
            if (not self._backlog and not self._busy and not self._dropped
                    and (self._file or (len(data) <= _STRAIGHT and self._room()))):
                try:
                    data = data[os.write(self._fd, data):]
                except BlockingIOError:  # the descriptor is non-blocking, and full
                    pass
                except OSError as exc:  # closed or broken: there is nowhere to write
                    self._refused(exc)
                    return
                if not data:
                    return
            self._queue(data)

    async def room(self) -> None:
        """Return once at most BACKLOG_BYTES wait to be written (at once when they do): a writer
        that must not lose lines waits here, on its event loop, and not in `write(2)`."""
        import asyncio  # (the log of a command without a loop never imports it)

        with self._lock:
            if self._held <= BACKLOG_BYTES:
                return
            loop = asyncio.get_running_loop()
            waiter = loop.create_future()
            self._waiters.append((loop, waiter))
        await waiter

    def drain(self, stall: float) -> bool:
        """Wait until every queued line is written, as long as the reader takes some at least
        every `stall` seconds; whether all were."""
        with self._changed:
            since = time.monotonic()
            while not self._idle():
                if self._gave_up or LogStream.hurried:  # (`_gave_up`: the write under way when
                    return False  # it was is not waited for)
                left = max(since, self._wrote_at) + stall - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, HURRY_S))
            return True

    def abandon(self) -> int:
        """Give up what waits (a reader that took nothing for EXIT_WAIT_S): the lines queued,
        and the one being written, are not written; how many. Drains wait for nothing until
        more is put."""
        with self._lock:
            self._gave_up = True
            left = sum(data.count(b"\n") for data in self._backlog) + (1 if self._busy else 0)
            self._backlog.clear()
            self._held = self._dropped = 0
            self._wake()
            return left

    @property
    def full(self) -> bool:
        """More than BACKLOG_BYTES wait to be written."""
        with self._lock:
            return self._held > BACKLOG_BYTES

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
        if self._note is not None and not self._fits(data):  # (no note: the caller waits in
            self._dropped += 1  # `room()` instead, and nothing is dropped)
            return
        self._put(data)
        if self._writer is None:
            self._writer = threading.Thread(target=self._run, name="watchrun-log", daemon=True)
            self._writer.start()
            atexit.register(self.drain, EXIT_WAIT_S)

    def _fits(self, data: bytes) -> bool:
        """Whether `data` fits in the backlog, after the line that says how many were dropped
        before it (queued here when both fit)."""
        if not self._dropped:
            return self._held + len(data) <= BACKLOG_BYTES
        note = self._said()
        if self._held + len(note) + len(data) > BACKLOG_BYTES:
            return False
        self._put(note)
        self._dropped = 0
        return True

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
                        self._put(self._said())
                        self._dropped = 0
                        break
                    self._busy = False
                    self._changed.notify_all()
                    self._changed.wait()
                data = self._backlog.popleft()
                self._held -= len(data)
                self._busy = True
                self._wake()
            if not self._write_all(data):
                with self._lock:  # nowhere to write: what waits is given up
                    self._backlog.clear()
                    self._held = self._dropped = 0
                    self._wake()

    def _said(self) -> bytes:
        """The line that says how many lines were dropped (only a stream with a note drops)."""
        assert self._note is not None
        return self._note(self._dropped).encode("utf-8", "backslashreplace")

    def _wake(self) -> None:
        """Under the lock: the backlog is within bounds again, so every `room()` returns."""
        if self._held <= BACKLOG_BYTES:
            for loop, waiter in self._waiters:
                with contextlib.suppress(RuntimeError):  # its loop is closed: none waits
                    loop.call_soon_threadsafe(_resolve, waiter)
            self._waiters.clear()

    def _write_all(self, data: bytes) -> bool:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._fd, view[:_PIECE]):]
                self._wrote_at = time.monotonic()
            except BlockingIOError:
                select.select([], [self._fd], [], 1.0)
            except OSError as exc:
                with self._lock:
                    self._refused(exc)
                return False
        return True

    def _refused(self, exc: OSError) -> None:
        """Under the lock: a write failed; say why in `failed`, unless the reader went away."""
        if not isinstance(exc, BrokenPipeError) and self.failed is None:
            self.failed = exc.strerror or str(exc)


def _resolve(waiter: Any) -> None:
    if not waiter.done():  # (cancelled: its `room()` was)
        waiter.set_result(None)
