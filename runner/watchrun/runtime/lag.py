"""The loop-lag monitor: how late the event loop runs a timer, i.e. the worst stall of the last
minutes, and a thread that says a stall while it lasts (the loop cannot say it is held)."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from types import FrameType

from watchrun.process.procstat import stat_fields

INTERVAL_S = 0.1
"""A timer every 100 ms (10 wake-ups a second): a stall that covers one of its deadlines shows
up as that timer's lateness, to within the loop's own scheduling (~1 ms)."""
STALL_S = 5.0
"""A loop whose timer has not run for this long is stalled (a read on a file system that
stopped answering, or work of the runner's own that no yield cuts): the guard thread says so
then, where the loop is held, and whether its thread was busy on CPU meanwhile (`BUSY`)."""
BUSY = 0.5
"""Where /proc cannot say whether the loop's thread is running or waiting for a CPU (`_runnable`),
a stall during which it used at least this share of the time on CPU is busy: the runner's own
work (or a call that computes), not a wait on storage. (Its share alone is no answer on a host
short of CPU: a thread that computes there runs a fraction of the time.)"""
OVERSLEPT_S = 1.0
"""A guard that wakes this late, while the process used less than half that CPU time, was not
running either: the whole process was not (SIGSTOP, a frozen container or VM, a host out of
CPU), not its event loop alone. (One that used it was kept from the interpreter by a busy call
that holds it: that is the loop's stall.)"""
WINDOW_S = 300.0
"""`max_s` is the worst lateness of the last 5 minutes: the gauge an alert watches fires for a
stall and clears 5 minutes after it (a scrape every 5 minutes or more often sees it). The worst
since the start could never clear: one stall pinned it until the runner restarted."""


class LoopLag:
    """Runs as a task of the supervisor; `max_s` is exposed in `status` and the metrics.
    `stalled(seconds, where, busy)` is called from the guard thread once a stall passes STALL_S
    (`busy`: the loop's thread was on CPU for most of it, `BUSY`), and
    `resumed(seconds)` on the loop when it runs again; `suspended(seconds)` on the loop when it
    ran that late (STALL_S or more) while the process used little CPU and the guard said
    nothing: the whole process did not run (None: such a stall is not said here). That is no
    lateness of the loop, and `max_s` does not count it; a shorter one cannot be told from a
    loop held by a blocking call, and counts."""

    def __init__(self, interval_s: float = INTERVAL_S, *,
                 stalled: Callable[[float, str, bool], None] | None = None,
                 resumed: Callable[[float], None] | None = None,
                 suspended: Callable[[float], None] | None = None,
                 window_s: float = WINDOW_S) -> None:
        self.interval_s, self.window_s = interval_s, window_s
        self._worst: deque[tuple[float, float]] = deque()
        """(when, lateness) of the window's ticks that no later tick was as late as: the first
        is the worst (each tick drops the ones it outdoes, and those older than the window)."""
        self.last_s = 0.0
        """The lateness of the latest tick."""
        self._stalled, self._resumed, self._suspended = stalled, resumed, suspended
        self._beat = time.monotonic()  # the loop's last tick
        self._beat_cpu = 0.0  # the loop thread's CPU time at it
        self._said: float | None = None  # the beat of a stall the guard has said

    async def run(self) -> None:
        """Until cancelled (the guard thread ends with it)."""
        loop = asyncio.get_running_loop()
        stop = threading.Event()
        guard, clock = None, time.pthread_getcpuclockid(threading.get_ident())
        self._beat_cpu = time.clock_gettime(clock)
        if self._stalled is not None:
            guard = threading.Thread(
                target=self._guard, args=(threading.get_ident(), threading.get_native_id(),
                                          clock, stop),
                name="watchrun-stall-guard", daemon=True)
            guard.start()
        try:
            due, cpu = loop.time() + self.interval_s, time.process_time()
            while True:
                await asyncio.sleep(max(0.0, due - loop.time()))
                now = loop.time()
                self.last_s = max(0.0, now - due)
                self._beat, said = time.monotonic(), self._said
                self._beat_cpu = time.clock_gettime(clock)
                suspended = said is None and self.last_s >= STALL_S and \
                    time.process_time() - cpu < self.last_s / 2  # the guard did not run either
                if not suspended:
                    self._note(self._beat, self.last_s)
                if said is not None:
                    self._said = None
                    if self._resumed is not None:
                        self._resumed(self._beat - said)
                elif suspended and self._suspended is not None:
                    self._suspended(self.last_s)
                due, cpu = now + self.interval_s, time.process_time()
        finally:
            stop.set()
            if guard is not None:
                guard.join(1.0)

    @property
    def max_s(self) -> float:
        """The worst lateness of the last `window_s` seconds (read on the loop's thread)."""
        horizon = time.monotonic() - self.window_s
        return next((late for at, late in self._worst if at >= horizon), 0.0)

    def _note(self, at: float, late: float) -> None:
        """A tick at `at` (monotonic) was `late` seconds late."""
        worst = self._worst
        while worst and worst[-1][1] <= late:
            worst.pop()
        worst.append((at, late))
        while worst[0][0] < at - self.window_s:
            worst.popleft()

    def _guard(self, loop_thread: int, native: int, clock: int, stop: threading.Event) -> None:
        """In its own thread: a stall past STALL_S is said once, with where the loop is; not
        when the guard itself woke OVERSLEPT_S late (the process did not run: the loop says
        that). It wakes when the last tick is STALL_S old, about every STALL_S on a loop that
        runs. `native`: the loop thread's id to the kernel; `clock`: its CPU clock."""
        due, cpu = time.monotonic(), time.process_time()
        while True:
            beat, now = self._beat, time.monotonic()
            held, late = now - beat, now - due
            overslept = late >= OVERSLEPT_S and time.process_time() - cpu < late / 2
            if held >= STALL_S and self._said is None and self._stalled is not None and \
                    not overslept:  # (overslept: the loop's next tick says it, if it can run)
                self._said = beat
                busy = _runnable(native)
                if busy is None:
                    busy = time.clock_gettime(clock) - self._beat_cpu >= held * BUSY
                self._stalled(held, held_in(sys._current_frames().get(loop_thread)), busy)
            wait = STALL_S - held if held < STALL_S else STALL_S
            due, cpu = time.monotonic() + wait, time.process_time()
            if stop.wait(wait):
                return


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""watchrun's own directory: frames of files under it are ours."""
_WRAPPER = os.path.join(_PACKAGE, "preads.py")
"""`pread_full`'s file: a read held there is said with what called it."""


def held_in(frame: FrameType | None) -> str:
    """`fn (file:line)` of the innermost Python frame, and of watchrun's innermost one when
    that is another (a library's or the standard library's frame inside ours, or
    `pread_full`'s: the read it makes is its caller's)."""
    inner, ours = frame, None
    while frame is not None and ours is None:
        name = frame.f_code.co_filename
        if name.startswith(_PACKAGE + os.sep) and name != _WRAPPER:
            ours = frame
        frame = frame.f_back
    if inner is None:
        return "(no Python frame)"
    said = _frame(inner)
    return said if ours is None or ours is inner else f"{said}, called from {_frame(ours)}"


def _frame(frame: FrameType) -> str:
    """`fn (file:line)`, a file of ours named from the package (`watchrun/sources/…`)."""
    name = frame.f_code.co_filename
    if name.startswith(_PACKAGE + os.sep):
        name = os.path.relpath(name, os.path.dirname(_PACKAGE))
    return f"{frame.f_code.co_qualname} ({name}:{frame.f_lineno})"


def _runnable(tid: int) -> bool | None:
    """Whether the thread `tid` (the kernel's id) is running or waiting for a CPU now (state R:
    computing), rather than asleep in a call (S, D: waiting on a file system, a lock, a pipe);
    None where /proc does not say."""
    fields = stat_fields(f"/proc/self/task/{tid}/stat")
    return fields[0] == b"R" if fields else None
