"""The runner's side of the guardian process (`guardian.py`): a tiny process that outlives a
SIGKILLed runner just long enough to end every process group the runner started
(PR_SET_PDEATHSIG reaches only each group's leader).

The runner holds the write end of a pipe that is the guardian's stdin and tells it
`+PGID START SPAWN_ID` / `-PGID` as groups come and go. A clean exit sends `.` first; end of
file without it means the runner died, and the guardian SIGKILLs what is left of each group
(verified in /proc, see `guardian.members`). It runs `command()`.

`guard_lazy.py` starts one when the first child is spawned and another when one ends.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import subprocess
import threading
from collections.abc import Iterable

from watchrun.process.helper_exit import KEEP_BYTES
from watchrun.process.helper_start import helper_command
from watchrun.process.tree import HELPERS, forking

__all__ = ["Guardian", "command", "forsake"]

_TOLD: set[int] = set()
"""The write ends of the live guardians' pipes (`forsake`); changed under `_TOLD_LOCK`."""
_TOLD_LOCK = threading.Lock()


def command() -> list[str]:
    """The guardian's argv: `guardian.main` in this interpreter, isolated and without site, on
    the standard library and watchrun's directory only (`helper_start.helper_command`): ~15 ms
    of CPU instead of ~60 (docs/decisions.md)."""
    return helper_command("watchrun.process.guardian")


class Guardian:
    """The runner's side: starts the guardian and feeds it (never blocking the loop)."""

    def __init__(self, told: Iterable[str] = ()) -> None:
        """`told`: the groups' lines, in its pipe before it exists (a runner SIGKILLed just
        after the start still has them ended)."""
        self.problem: str | None = None
        """Why it could not be started at all (fork or exec failed), if so."""
        self.up = False
        """It ran `guard_lazy.UP_S`: it started well (`LazyGuardian._check`)."""
        self._said = b""
        self._out = -1  # its stderr: the traceback of a failed start
        r, w = os.pipe()  # both O_CLOEXEC: no child of the runner inherits the write end
        fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
        ahead = "".join(told).encode()
        self.left = ahead[_put(w, ahead):].decode()
        """What the pipe could not hold before the start: to `tell` after it."""
        into = -1
        try:
            self._out, into = os.pipe()
            with forking():  # (until it is in HELPERS no sweep takes it for a stray)
                self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                    command(), stdin=r, stdout=subprocess.DEVNULL, stderr=into,
                    start_new_session=True)
                HELPERS.add(self._proc.pid)
        except OSError as exc:
            os.close(w)
            self._proc, self._w = None, -1
            self.release()
            self.problem = f"{exc.strerror} ({errno.errorcode.get(exc.errno or 0, 'EIO')})"
        else:
            with _TOLD_LOCK:
                self._w = w
                _TOLD.add(w)
            fcntl.fcntl(self._out, fcntl.F_SETFL,
                        fcntl.fcntl(self._out, fcntl.F_GETFL) | os.O_NONBLOCK)
        finally:
            os.close(r)
            if into >= 0:
                os.close(into)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def said(self) -> bytes:
        """What it wrote on its stderr (the end of it: KEEP_BYTES), read as far as there is."""
        while self._out >= 0:
            try:
                part = os.read(self._out, KEEP_BYTES)
            except OSError:  # (EAGAIN: nothing more for now)
                break
            if not part:
                break
            self._said = (self._said + part)[-KEEP_BYTES:]
        return self._said

    def tell(self, line: str) -> None:
        if self._w < 0:
            return
        try:
            os.write(self._w, line.encode())
        except OSError as exc:  # EAGAIN (64 KiB of backlog) or EPIPE (it died): say so once
            if self.problem is None:
                self.problem = f"the guardian process cannot be told: {os.strerror(exc.errno or 0)}"

    def wait(self) -> int | None:
        """Reap an ended guardian; its exit status (negative: the signal)."""
        if self._proc is None:
            return None
        HELPERS.discard(self._proc.pid)
        return self._proc.wait()

    def release(self) -> None:
        """Close the pipes of a guardian that ended (nothing is told to it any more)."""
        with _TOLD_LOCK:
            _TOLD.discard(self._w)
            for fd in (self._w, self._out):
                if fd >= 0:
                    os.close(fd)
            self._w = self._out = -1

    def close(self) -> None:
        """A clean exit: every group was ended by the runner itself."""
        if self._w >= 0:
            self.tell(".\n")
            with _TOLD_LOCK:
                _TOLD.discard(self._w)
                os.close(self._w)
                self._w = -1
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=2)
                HELPERS.discard(self._proc.pid)
        self.release()


def _put(fd: int, data: bytes) -> int:
    """Write as much of `data` as a non-blocking pipe takes now; how much it took."""
    done = 0
    with contextlib.suppress(BlockingIOError):
        while done < len(data):
            done += os.write(fd, data[done:])
    return done


def forsake() -> None:
    """From any thread, as a runner gives up its stop (a thread held in the kernel keeps the
    descriptors open): each guardian's pipe ends without the goodbye, so it ends its groups now;
    the write end becomes /dev/null, never closed (the loop may write to its number still)."""
    null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    try:
        with _TOLD_LOCK:
            for fd in _TOLD:
                with contextlib.suppress(OSError):
                    os.dup2(null, fd)
    finally:
        os.close(null)
