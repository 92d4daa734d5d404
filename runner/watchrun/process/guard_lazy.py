"""A guardian started just before the first child is spawned, and started again when one ends
(`LazyGuardian`; the guardian itself: `guard.py`). One that ends while the runner runs is
replaced at once. One that cannot start (it exits within UP_S of its start: its files replaced
under a running runner by `pip install -U`, a broken install, no memory) is started again after
RETRY_S, then twice as long each time up to RETRY_CAP_S: said once, with its exit status and the
last line of its stderr, listed in `status` while it lasts, and said again when one runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterable

from watchrun.process.groups import Group
from watchrun.process.guard import Guardian
from watchrun.process.helper_exit import ended, returncode_ended

__all__ = ["RETRY_CAP_S", "RETRY_S", "UP_S", "LazyGuardian"]

UP_S = 1.0
"""A guardian still running this long after its start started well: one that ends later is
replaced at once. One that exits by itself sooner could not start (an import that fails takes
milliseconds); one killed sooner is replaced at once the first time (an operator's `kill`)."""
RETRY_S, RETRY_CAP_S = 1.0, 60.0
"""The wait before the next start once a guardian cannot start, doubled each time up to the cap
(as a command watcher's restart delays, `sources/restarts.py`)."""

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
