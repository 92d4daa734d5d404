"""The client's stdin and stdout taken off fds 0 and 1 for the session (a child or a stray
read or print never touches its messages): a pipe or a socket as it is (`claim_pipe`), any
other stdin (a file, a terminal) through a pipe that a thread fills (`feed`)."""

from __future__ import annotations

import fcntl
import os
import stat
import threading
from collections.abc import Callable

__all__ = ["claim_pipe", "feed"]

CHUNK = 64 << 10


def claim_pipe(fd: int, diversion: Callable[[], int]) -> int | None:
    """When `fd` (stdin or stdout) is a pipe or a socket: the client's end moved to a private
    close-on-exec descriptor (returned), and `fd` pointed at `diversion()` (which is closed
    then), so a child or a stray read or print never touches the client's messages. None for
    a terminal or a file (left as it is: a terminal's non-blocking flag would be shared)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return None
    return _moved(fd, diversion)


def feed(fd: int, diversion: Callable[[], int]) -> tuple[int, bool]:
    """For a stdin `fd` that is no pipe or socket (a file: `watchrun mcp < requests.jsonl`, a
    terminal): the read end of a pipe that a thread fills with what `fd` gives, to its end
    (blocking reads, so a terminal's flags are left as they are; the pipe holds what the
    session has not read yet), and whether `fd` is a regular file, whose messages have all
    come already. `fd` is pointed at `diversion()` as `claim_pipe` does; no `fd` at all (it is
    closed) gives an empty pipe."""
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    try:
        source = _moved(fd, diversion)
    except OSError:
        os.close(write_end)
        return read_end, True
    whole = stat.S_ISREG(os.fstat(source).st_mode)
    threading.Thread(target=_copy, args=(source, write_end), name="mcp-stdin",
                     daemon=True).start()
    return read_end, whole


def _moved(fd: int, diversion: Callable[[], int]) -> int:
    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    other = diversion()
    try:
        os.dup2(other, fd)
    finally:
        os.close(other)
    return private


def _copy(source: int, pipe: int) -> None:
    """`source` into `pipe` to its end (or until the session closed its end: EPIPE, as SIGPIPE
    is ignored), then both closed: the pipe's end is stdin's."""
    try:
        while data := os.read(source, CHUNK):
            view = memoryview(data)
            while view:
                view = view[os.write(pipe, view):]
    except OSError:
        pass  # (a read that fails ends stdin as its end does)
    finally:
        os.close(pipe)
        os.close(source)
