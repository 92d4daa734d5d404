"""Cron schedules on the wall clock: the next tick of an expression (local time, as cron runs),
and `Ticks`, which follows a schedule's ticks on a wall clock that can step."""

from __future__ import annotations

import time
from datetime import datetime

from watchrun.clock import RECHECK_S, Clock

__all__ = ["Ticks", "next_cron"]


def next_cron(expr: str, after: float) -> float:
    """The first tick of cron `expr` (local time, as cron runs) after epoch `after`. The ticks
    are counted in local wall time and each is turned into an epoch with the zone's rules for
    its own date (`mktime`), so `0 9 * * *` is 09:00 on both sides of a DST change (an aware
    datetime would carry today's UTC offset into every later tick). croniter is imported
    here, on first use: a runner without schedules never loads it."""
    from croniter import croniter  # type: ignore[import-untyped]

    ticks = croniter(expr, datetime.fromtimestamp(after))  # naive: local wall time
    while True:
        at = time.mktime(ticks.get_next(datetime).timetuple())  # (tm_isdst -1: its date's)
        if at > after:  # (an hour that repeats when DST ends can map to before `after`)
            return at


class Ticks:
    """The ticks of one schedule as the wall clock reaches them, for a command watcher's runs
    and an agent's turns alike. `wait()` says how long to sleep before asking again; 0 when a
    tick is due, which `take()` then marks reached. No sleep is longer than RECHECK_S: the wall
    clock steps (NTP, a VM restored, a laptop that slept while the monotonic clock asyncio
    sleeps on stood still), and a whole sleep to a tick computed before the step ran a day
    late, or an hour late after a resume."""

    def __init__(self, expr: str, clock: Clock) -> None:
        self.expr, self.clock = expr, clock
        self._base = clock.now()  # the ticks are counted from here
        self._tick = next_cron(expr, self._base)
        self._reached: float | None = None  # the last tick taken

    def wait(self) -> float:
        """Seconds to sleep before asking again (at most RECHECK_S); 0: a tick is due. A clock
        set back is followed: the next tick is counted from the new time, and the tick last
        taken is not due again at once."""
        now = self.clock.now()
        if now < self._base:  # the clock was set back: count from now on
            self._base = now
            self._tick = next_cron(self.expr, now)
            if self._tick == self._reached:
                self._tick = next_cron(self.expr, self._tick)
        return min(max(0.0, self._tick - now), RECHECK_S)

    def take(self) -> float:
        """The due tick, marked reached; the next one is counted from it, or from now when the
        clock passed several (set forward, or a resume): one run for them all, not a burst."""
        tick = self._reached = self._tick
        self._base = max(tick, self.clock.now())
        self._tick = next_cron(self.expr, self._base)
        return tick
