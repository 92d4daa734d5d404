"""The runner's side of the guardian process (`guardian.py`): a tiny process that outlives a
SIGKILLed runner just long enough to end every process group the runner started
(PR_SET_PDEATHSIG reaches only each group's leader).

The runner holds the write end of a pipe that is the guardian's stdin and tells it
`+PGID START SPAWN_ID` / `-PGID` as groups come and go. A clean exit sends `.` first; end of
file without it means the runner died, and the guardian SIGKILLs what is left of each group
(verified in /proc, see `guardian.members`). It runs `command()`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
from collections.abc import Callable, Iterable

from watchrun.process.groups import Group
from watchrun.process.tree import HELPERS, forking, watchrun_home

__all__ = ["Guardian", "LazyGuardian", "command"]


def command() -> list[str]:
    """The guardian's argv: `guardian.main` in this interpreter, without site (`-S`: no .pth
    files, no site-packages; the guardian needs only the standard library and watchrun, found
    where this runner found it) and with the environment ignored (`-I`: no PYTHONPATH,
    PYTHONSTARTUP or user site can put code into it, and the current directory is not on its
    path). ~15 ms of CPU instead of ~60 (docs/decisions.md). `-I` ignores
    PYTHONDONTWRITEBYTECODE too: `-B` passes the runner's on (a guardian started under a file
    size limit wrote its `.pyc` cut short, and every later start from that tree failed)."""
    return [sys.executable, "-I", "-S", *(["-B"] if sys.dont_write_bytecode else []), "-c",
            f"import sys; sys.path.append({watchrun_home()!r}); "
            "from watchrun.process.guardian import main; sys.exit(main())"]


class Guardian:
    """The runner's side: starts the guardian and feeds it (never blocking the loop)."""

    def __init__(self) -> None:
        self.problem: str | None = None
        """Why registrations could not be sent (the guardian died or fell behind), if so."""
        r, w = os.pipe()  # both O_CLOEXEC: no child of the runner inherits the write end
        try:
            with forking():  # (until it is in HELPERS no sweep takes it for a stray)
                self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                    command(), stdin=r,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
                HELPERS.add(self._proc.pid)
        except OSError as exc:
            os.close(w)
            self._proc, self._w = None, -1
            self.problem = f"cannot start the guardian process: {exc.strerror}"
        else:
            self._w = w
            fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
        finally:
            os.close(r)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

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

    def close(self) -> None:
        """A clean exit: every group was ended by the runner itself."""
        if self._w >= 0:
            self.tell(".\n")
            os.close(self._w)
            self._w = -1
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=2)
                HELPERS.discard(self._proc.pid)


_OTHERWISE = "children of a SIGKILLed runner are ended by the next runner of this output dir"


class LazyGuardian:
    """A guardian started just before the first child is spawned (`GroupRegistry.prepare`):
    a runner that only follows files never starts one (an interpreter start saved). One that
    ends while the runner runs (an operator's `kill`, the OOM killer) is noticed on the loop (a
    pidfd) and replaced, told every group `known` lists, so a later SIGKILL of the runner still
    ends them."""

    def __init__(self, warn: Callable[[str], None], otherwise: str = _OTHERWISE) -> None:
        self._warn, self._otherwise = warn, otherwise
        self.known: Callable[[], Iterable[Group]] = tuple
        """The groups to tell a guardian started again (the registry's)."""
        self._guardian: Guardian | None = None
        self._watch = -1  # a pidfd of the guardian, read by the loop

    @property
    def pid(self) -> int | None:
        return self._guardian.pid if self._guardian is not None else None

    def start(self) -> None:
        if self._guardian is None:
            self._begin()

    def _begin(self) -> None:
        self._guardian = Guardian()
        if self._guardian.problem:
            self._warn(f"{self._guardian.problem}; {self._otherwise}")
            return
        for group in self.known():
            self._guardian.tell(group.told())
        import asyncio  # (here: the guardian process itself loads no asyncio)

        pid = self._guardian.pid
        with contextlib.suppress(OSError, RuntimeError, AttributeError):  # (no loop: no watch)
            assert pid is not None
            self._watch = os.pidfd_open(pid)
            asyncio.get_running_loop().add_reader(self._watch, self._ended)

    def _ended(self) -> None:
        """The guardian exited while the runner runs: reap it, say so, start another."""
        self.unwatch()
        old = self._guardian
        code = old.wait() if old is not None else None
        how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
        self._warn(f"the guardian process (pid {old.pid if old else None}) ended ({how}); "
                   "starting another, told the process groups")
        self._begin()

    def unwatch(self) -> None:
        """On the loop, before `close`: a guardian ending at a clean stop is not replaced."""
        import asyncio

        if self._watch >= 0:
            with contextlib.suppress(RuntimeError):  # (its loop already closed)
                asyncio.get_running_loop().remove_reader(self._watch)
            os.close(self._watch)
            self._watch = -1

    def tell(self, line: str) -> None:
        if self._guardian is not None:
            self._guardian.tell(line)

    def close(self) -> None:
        """(In a worker thread: the loop's reader is gone already, see `unwatch`.)"""
        if self._guardian is not None:
            self._guardian.close()

