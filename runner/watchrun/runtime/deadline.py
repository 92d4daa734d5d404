"""The runner's stop has one deadline, kept by a thread of its own: a stop that has not ended by
then (its event loop held in a write to a file system that stopped answering, a blocking call
that never returns) is given up, what holds it is said, and the process exits 3.

The loop cannot keep it: held in a write, it runs nothing, and a signal's Python handler runs
only once that write returns (a write a signal came during is restarted). So the thread sees a
stop signal itself, as the kernel has it: a byte in the wakeup pipe, which the C handler writes
in whichever thread took the signal, or a signal pending that no thread took yet (one the
kernel routed to a thread held in an uninterruptible wait). It only records that; the loop
acts on the signal, when it runs. At the deadline the guardian's pipe ends without the runner's
goodbye, so the guardian ends every process group it was told (`process/guardian.py`): a
thread held in a call the kernel cannot interrupt (a FUSE or NFS server that took the request
and never answers) keeps the process, and its descriptors, until that call returns, its exit
status already 3 (control.lock stays held: nothing else writes the output dir meanwhile).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType

from watchrun import offload
from watchrun.exitcodes import ExitStatus
from watchrun.output.runlog import RunLog
from watchrun.process.guard import forsake
from watchrun.runtime.lag import held_in
from watchrun.runtime.workers import Workers, calls

__all__ = ["LOOK_S", "StopDeadline"]

LOOK_S = 1.0
"""Until a stop begins, how often the thread looks for one that came without a byte in the
pipe (a signal pending in the kernel, the supervisor stopping on its own): one seen is taken to
have begun at the look before, so that its deadline is never late. (A byte wakes it at once;
once the stop began, it sleeps until its deadline.)"""
SAY_S = 1.0
"""How long the last line may take to be written (a log nobody reads) before the exit."""
STOPS = frozenset({signal.SIGTERM, signal.SIGINT})


class StopDeadline:
    """`watching()` around a runner's loop: from a stop signal, or from the stop's start
    (`stopping()` true: a once run's end, a failed start), the stop has `bound_s`."""

    def __init__(self, bound_s: float, log: RunLog, workers: Workers,
                 stopping: Callable[[], bool]) -> None:
        self.bound_s, self._log, self._workers, self._stopping = bound_s, log, workers, stopping
        self._since: float | None = None  # monotonic: when the stop began
        self._why = ""  # what began it: a signal's name, or the stop's start
        self._lock = threading.Lock()
        self._ended = False  # the stop has ended: the deadline holds no more

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """In the main thread, which runs the loop, for as long as the loop runs."""
        offload.stop_by(None)  # (a run of its own: an earlier one's stop is no bound on it)
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        was = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        thread = threading.Thread(target=self._watch, args=(wake_r, threading.get_ident()),
                                  name="watchrun-stop-deadline", daemon=True)
        try:
            thread.start()
            yield
        finally:
            with self._lock:
                self._ended = True  # (a thread that is ending the process now goes on)
            signal.set_wakeup_fd(was)
            offload.stop_by(None)
            with contextlib.suppress(OSError):
                os.write(wake_w, b"\0")  # (it wakes, and ends)
            if thread.is_alive():
                thread.join()
            os.close(wake_r)
            os.close(wake_w)

    def _begin(self, since: float, why: str) -> None:
        with self._lock:  # (never after the stop ended: a deadline left set would cut the
            if self._since is None and not self._ended:  # next run's stop in this process)
                self._since, self._why = since, why
                offload.stop_by(since + self.bound_s)

    def _watch(self, wake_r: int, loop_thread: int) -> None:
        """The thread: takes no stop signal itself (so one that no thread took shows as
        pending), and looks until the stop has ended or its deadline is past."""
        signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
        poll = select.poll()
        poll.register(wake_r, select.POLLIN)
        before = time.monotonic()  # the last look that saw no stop
        while True:
            left = LOOK_S if self._since is None else \
                self._since + self.bound_s - time.monotonic()
            if poll.poll(max(0.0, left) * 1000):
                with contextlib.suppress(OSError):
                    came = os.read(wake_r, 4096)
                    if seen := sorted(STOPS.intersection(came)):
                        self._begin(time.monotonic(), signal.Signals(seen[0]).name)
            if seen := sorted(STOPS & signal.sigpending()):
                self._begin(before, seen[0].name)
            if self._stopping():
                self._begin(before, "its start")
            before = time.monotonic()
            with self._lock:
                if self._ended:
                    return
                if self._since is not None and time.monotonic() >= self._since + self.bound_s:
                    break
        try:
            self._give_up(sys._current_frames().get(loop_thread))
        finally:
            os._exit(ExitStatus.RUNTIME)  # (whatever saying it met)

    def _give_up(self, loop_frame: FrameType | None) -> None:
        """Have the guardian end the groups, and say what holds the stop (SAY_S at most)."""
        running = self._workers.running()
        held = None if _waits(loop_frame) else held_in(loop_frame)
        parts = [f"the event loop is held in {held}"] if held is not None else []
        if running:
            parts.append(f"{calls(running)} still running ({', '.join(running)})")
        said = "; ".join(parts) or "its last steps did not end"
        message = (f"the stop did not end within {self.bound_s:g} s of {self._why} (twice "
                   f"limits.stopTimeout plus {offload.STOP_MARGIN_S:g} s): {said}: a file system "
                   "that does not answer? Exiting now; what its commands left running is killed")
        forsake()  # (the guardian ends the groups, even if the process cannot end yet)
        sayer = threading.Thread(target=self._say, args=(message, held, running), daemon=True)
        sayer.start()
        sayer.join(SAY_S)

    def _say(self, message: str, held: str | None, running: list[str]) -> None:
        self._log.error(message, event="stop-overran", boundS=self.bound_s, heldIn=held,
                        calls=running)
        self._log.drain(SAY_S)


def _waits(frame: FrameType | None) -> bool:
    """Whether the loop's thread is the event loop waiting for what comes (its selector's
    `select`, called by `_run_once`): not held, whatever holds the stop is elsewhere."""
    caller = frame.f_back if frame is not None else None
    return frame is not None and caller is not None and frame.f_code.co_name == "select" and \
        caller.f_code.co_name == "_run_once"
