"""The runner's side of the guardian process (`guardian.py`): a tiny process that outlives a
SIGKILLed runner just long enough to end every process group the runner started
(PR_SET_PDEATHSIG reaches only each group's leader).

The runner holds the write end of a pipe that is the guardian's stdin and tells it
`+PGID START SPAWN_ID` / `-PGID` as groups come and go. A clean exit sends `.` first; end of
file without it means the runner died, and the guardian SIGKILLs what is left of each group
(verified in /proc, see `guardian.members`). It runs `command()`.

One that ends while the runner runs is replaced at once. One that cannot start (it exits within
UP_S of its start: its files replaced under a running runner by `pip install -U`, a broken
install, no memory) is started again after RETRY_S, then twice as long each time up to
RETRY_CAP_S: said once, with its exit status and the last line of its stderr, listed in
`status` while it lasts, and said again when one runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import subprocess
import threading
from collections.abc import Callable, Iterable

from watchrun.process.groups import Group
from watchrun.process.helper_exit import KEEP_BYTES, ended, returncode_ended
from watchrun.process.helper_start import helper_command
from watchrun.process.tree import HELPERS, forking

__all__ = ["RETRY_CAP_S", "RETRY_S", "UP_S", "Guardian", "LazyGuardian", "command", "forsake"]

UP_S = 1.0
"""A guardian still running this long after its start started well: one that ends later is
replaced at once. One that exits by itself sooner could not start (an import that fails takes
milliseconds); one killed sooner is replaced at once the first time (an operator's `kill`)."""
RETRY_S, RETRY_CAP_S = 1.0, 60.0
"""The wait before the next start once a guardian cannot start, doubled each time up to the cap
(as a command watcher's restart delays, `sources/restarts.py`)."""
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
        """It ran UP_S: it started well (`LazyGuardian._check`)."""
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


_UNPROTECTED = ("if the runner is SIGKILLed, the processes its children started are left "
                "running (each child still dies with it; the next runner of this output dir "
                "ends the rest)")


class LazyGuardian:
    """A guardian started just before the first child is spawned (`GroupRegistry.prepare`):
    a runner that only follows files never starts one (an interpreter start saved). One that
    ends while the runner runs (an operator's `kill`, the OOM killer) is noticed on the loop (a
    pidfd) and replaced, told every group `known` lists, so a later SIGKILL of the runner still
    ends them; one that cannot start is started again later and later (`RETRY_S`).
    `unprotected`: what is lost while none runs."""

    def __init__(self, warn: Callable[[str], None], unprotected: str = _UNPROTECTED,
                 inform: Callable[[str], None] | None = None) -> None:
        self._warn, self._unprotected, self._inform = warn, unprotected, inform or warn
        self.known: Callable[[], Iterable[Group]] = tuple
        """The groups to tell a guardian started again (the registry's)."""
        self._guardian: Guardian | None = None
        self._watch = -1  # a pidfd of the guardian, read by the loop
        self._timer: asyncio.TimerHandle | None = None  # the next start, or the new one's check
        self._failed = 0  # guardians in a row that ended before they were `up`
        self._unstarted = 0  # starts that failed since one could not start (0: none is failing)
        self._why = ""  # how the last one that could not start ended

    @property
    def pid(self) -> int | None:
        return self._guardian.pid if self._guardian is not None else None

    def problem(self) -> str | None:
        """For `status`, while none runs because none could start."""
        if not self._unstarted:
            return None
        n = self._unstarted
        return (f"the guardian process: {n} start{'s' if n != 1 else ''} in a row failed "
                f"({self._why}); until one starts, {self._unprotected}")

    def start(self) -> None:
        if self._guardian is None and self._timer is None:  # (a timer: a start put off)
            self._begin()

    def _begin(self) -> None:
        self._timer = None
        guardian = self._guardian = Guardian(group.told() for group in self.known())
        if guardian.problem is not None:
            self._guardian = None
            self._failed += 1
            self._cannot_start(guardian.problem)
            return
        if guardian.left:
            guardian.tell(guardian.left)
        pid = guardian.pid
        with contextlib.suppress(OSError, RuntimeError, AttributeError):  # (no loop: no watch)
            assert pid is not None
            loop = asyncio.get_running_loop()
            self._watch = os.pidfd_open(pid)
            loop.add_reader(self._watch, self._ended)
            self._timer = loop.call_later(UP_S, self._check)

    def _check(self) -> None:
        """UP_S after a start: one that still runs started well."""
        self._timer = None
        guardian = self._guardian
        if guardian is None or not guardian.running():
            return  # (`_ended` is on its way)
        guardian.up = True
        if self._unstarted:
            n = self._unstarted
            self._inform(f"the guardian process runs again (pid {guardian.pid}), after {n} "
                         f"failed start{'s' if n != 1 else ''}")
        self._failed = self._unstarted = 0

    def _ended(self) -> None:
        """The guardian exited while the runner runs: reap it, say so, start another, at once
        if it had started well, later if it could not start."""
        self._unwatch_pid()
        self._cancel()  # (its check)
        old, self._guardian = self._guardian, None
        if old is None:
            return
        code = old.wait()
        assert code is not None  # (a pidfd is watched only for a guardian that started)
        exit_code, sig = returncode_ended(code)
        how = ended(exit_code, sig, old.said())
        old.release()
        self._failed = 0 if old.up else self._failed + 1
        if not self._unstarted and (old.up or (sig is not None and self._failed == 1)):
            self._warn(f"the guardian process (pid {old.pid}) ended ({how}); starting another, "
                       "told the process groups")
            self._begin()
        else:
            self._cannot_start(how)

    def _cannot_start(self, why: str) -> None:
        """Said once, then started again after RETRY_S, 2 RETRY_S, … up to RETRY_CAP_S."""
        self._why = why
        delay = min(RETRY_S * 2 ** min(self._unstarted, 16), RETRY_CAP_S)  # (2**1024 s is
        # no float: a day of failing starts, a minute apart, would end the retries)
        if not self._unstarted:
            self._warn(f"the guardian process cannot start ({why}): until one starts, "
                       f"{self._unprotected}; trying again in {delay:g} s, then twice as long "
                       f"each time, at most {RETRY_CAP_S:g} s (was watchrun upgraded or removed "
                       "under this process? restart it)")
        self._unstarted += 1
        with contextlib.suppress(RuntimeError):  # (no loop: not started again)
            self._timer = asyncio.get_running_loop().call_later(delay, self._begin)

    def _unwatch_pid(self) -> None:
        if self._watch >= 0:
            with contextlib.suppress(RuntimeError):  # (its loop already closed)
                asyncio.get_running_loop().remove_reader(self._watch)
            os.close(self._watch)
            self._watch = -1

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def unwatch(self) -> None:
        """On the loop, before `close`: a guardian ending at a clean stop is not replaced, and
        none is started later."""
        self._unwatch_pid()
        self._cancel()

    def tell(self, line: str) -> None:
        if self._guardian is not None:
            self._guardian.tell(line)

    def close(self) -> None:
        """(In a worker thread: the loop's reader is gone already, see `unwatch`.)"""
        if self._guardian is not None:
            self._guardian.close()
