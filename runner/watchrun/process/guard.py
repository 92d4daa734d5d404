"""The guardian: a tiny process that outlives a SIGKILLed runner just long enough to end every
process group the runner started (PR_SET_PDEATHSIG reaches only each group's leader).

The runner holds the write end of a pipe that is the guardian's stdin and tells it
`+PGID START SPAWN_ID` / `-PGID` as groups come and go. A clean exit sends `.` first; end of
file without it means the runner died, and the guardian SIGKILLs what is left of each group
(verified in /proc, see `groups.members`). Run as `python -m watchrun.process.guard`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import subprocess
import sys
from collections.abc import Callable

from watchrun.process.groups import Group, end_groups
from watchrun.process.tree import HELPERS, forking

__all__ = ["Guardian", "LazyGuardian", "main"]


class Guardian:
    """The runner's side: starts the guardian and feeds it (never blocking the loop)."""

    def __init__(self) -> None:
        self.problem: str | None = None
        """Why registrations could not be sent (the guardian died or fell behind), if so."""
        r, w = os.pipe()  # both O_CLOEXEC: no child of the runner inherits the write end
        try:
            with forking():  # (until it is in HELPERS no sweep takes it for a stray)
                self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                    [sys.executable, "-m", "watchrun.process.guard"], stdin=r,
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


class LazyGuardian:
    """A guardian started just before the first child is spawned (`GroupRegistry.prepare`):
    a runner that only follows files never starts one (an interpreter start saved)."""

    def __init__(self, on_problem: Callable[[str], None]) -> None:
        self._on_problem = on_problem
        self._guardian: Guardian | None = None

    @property
    def pid(self) -> int | None:
        return self._guardian.pid if self._guardian is not None else None

    def start(self) -> None:
        if self._guardian is None:
            self._guardian = Guardian()
            if self._guardian.problem:
                self._on_problem(self._guardian.problem)

    def tell(self, line: str) -> None:
        if self._guardian is not None:
            self._guardian.tell(line)

    def close(self) -> None:
        if self._guardian is not None:
            self._guardian.close()


def main() -> int:
    groups: dict[int, Group] = {}
    buf = b""
    while True:
        try:
            data = os.read(0, 65536)
        except OSError as exc:
            if exc.errno == errno.EINTR:
                continue
            data = b""
        if not data:
            break
        buf += data
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if line == b".":
                return 0  # the runner stopped cleanly and ended its groups itself
            if line.startswith(b"+"):
                pgid, start, spawn_id = line[1:].decode().split(" ", 2)
                groups[int(pgid)] = Group(int(pgid), int(start), spawn_id)
            elif line.startswith(b"-"):
                groups.pop(int(line[1:]), None)
    end_groups(list(groups.values()), grace_s=0.0)  # the runner died: no grace period
    return 0


if __name__ == "__main__":
    sys.exit(main())
