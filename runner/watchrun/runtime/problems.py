"""What the runner says of its own health: the problems it survives (each logged; the last KEEP
kept for `status`, with a count of the older ones let go), an error in a loop callback, and a
loop that stalled and runs again."""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import Callable, Iterator
from typing import Any

from watchrun.output.runlog import RunLog

__all__ = ["KEEP", "Problems"]

KEEP = 20
"""Problems `status` lists (the newest); older ones are counted in `problemsDropped`."""


class Problems:
    """The runner-level problems (a failed reload step, a sink that would not close)."""

    def __init__(self, log: RunLog) -> None:
        self.log = log
        self.standing: list[Callable[[], str | None]] = []
        """Problems that last while a condition does (no guardian process can start), each
        listed first while it is one (its owner logs it)."""
        self._kept: deque[str] = deque(maxlen=KEEP)
        self._dropped: Counter[str] = Counter()
        """Problems older than the last KEEP, by head (`_head`): in the log, not in `status`."""

    def __iter__(self) -> Iterator[str]:
        yield from (text for standing in self.standing if (text := standing()) is not None)
        yield from self._kept

    @property
    def dropped(self) -> int:
        return sum(self._dropped.values())

    def report(self, message: str, wid: str | None = None, event: str = "message") -> None:
        """One line in the log; kept for `status` (the oldest kept one let go, and counted)."""
        self.log.error(message, wid, event=event)
        self.keep(f"{wid}: {message}" if wid else message)

    def keep(self, text: str) -> None:
        """Kept for `status`, not logged (its owner logged it: an agent's stream)."""
        if len(self._kept) == KEEP:
            self._dropped[_head(self._kept[0])] += 1
        self._kept.append(text)

    def forget(self, head: str) -> None:
        """Problems of this head that are no longer so, listed or dropped (a reload that
        worked: the failed reloads before it)."""
        self._kept = deque((p for p in self._kept if _head(p) != head), maxlen=KEEP)
        self._dropped.pop(head, None)

    def loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """A callback or an unawaited task raised (a bug): one log line (no traceback), `status`."""
        exc = context.get("exception")
        self.report(f"internal error: {context.get('message', 'in the event loop')}"
                    + (f": {exc!r}" if exc is not None else ""))

    def stalled(self, held_s: float, where: str, busy: bool) -> None:
        """From the loop-lag guard's thread: the loop has not run for STALL_S; `busy`: its
        thread was on CPU (the runner's own work), else it waits in a call (storage?)."""
        why = ("busy on CPU: the runner's own work, not a wait on storage" if busy else
               "a file system that does not answer?")
        self.log.error(f"the event loop has not run for {held_s:.0f} s: it is held in {where} "
                       f"({why}); nothing is read, recorded or answered until it returns",
                       event="loop-stalled", stalledS=held_s, where=where,
                       cause="busy" if busy else "waiting")

    def suspended(self, held_s: float) -> None:
        """From the loop-lag guard's thread: the whole process did not run for `held_s`."""
        self.log.warning(f"the runner did not run for {held_s:.0f} s: not its event loop alone, "
                         "the whole process was stopped (SIGSTOP, a frozen container or VM, a "
                         "host out of CPU); nothing was read, recorded or answered meanwhile",
                         event="loop-stalled", stalledS=held_s, cause="suspended")

    def resumed(self, held_s: float) -> None:
        self.log.warning(f"the event loop runs again after a stall of {held_s:.1f} s",
                         event="loop-resumed", stalledS=held_s)


def _head(problem: str) -> str:
    """What a problem is about: its text before the first `:` (`reload failed`, a watcher's
    id, `internal error`)."""
    return problem.partition(":")[0]
