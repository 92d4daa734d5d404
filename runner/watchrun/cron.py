"""Cron schedules on the wall clock: the next tick of an expression (local time, as cron runs),
and `Ticks`, which follows a schedule's ticks on a wall clock that can step."""

from __future__ import annotations

import calendar
import time
from datetime import datetime, timedelta

from watchrun.clock import RECHECK_S, Clock

__all__ = ["Ticks", "next_cron", "wildcard"]

_DAY_S = 86_400


def wildcard(expr: str) -> bool:
    """cron(8)'s "wildcard" job: its minute or its hour field begins with `*` (`*/15 * * * *`,
    `0 * * * *`, `*/10 1 * * *`, `@hourly`); a "fixed-time" one otherwise (`30 1 * * *`,
    `0 9 * * 1-5`, `@daily`). They differ only where DST changes the local time."""
    fields = expr.split()
    if fields == ["@hourly"]:
        return True
    return len(fields) == 5 and (fields[0].startswith("*") or fields[1].startswith("*"))


def next_cron(expr: str, after: float) -> float:
    """The first tick of cron `expr` after epoch `after`, in local time (the C library's zone:
    `TZ`, /etc/localtime) as cron(8) runs it, Vixie cron's and cronie's rules for a DST change
    included: a wildcard schedule (`wildcard`) ticks at each wall time as it passes, so through
    the hour repeated when DST ends twice and through the hour DST skips not at all; a
    fixed-time schedule ticks once for each of its times: at the first of a repeated time, and
    at the end of the gap (03:00) for a time DST skips (02:30). The wall times come from
    croniter (imported here, on first use: a runner without schedules never loads it), each
    turned into the epochs that show it (`_instants`); ticks before `after` in wall time can
    be after it in epochs when DST ends, so the search starts as far back as the local offset
    can fall (`_spread`)."""
    from croniter import croniter  # type: ignore[import-untyped]

    wild = wildcard(expr)
    start = datetime.fromtimestamp(after) - timedelta(seconds=_spread(after))
    walls = croniter(expr, start)  # naive: local wall time
    best: float | None = None
    bound = 0.0  # a wall time from here on has no epoch before `best`
    while True:
        wall = calendar.timegm(walls.get_next(datetime).timetuple())  # (wall time as UTC)
        if best is not None and wall >= bound:
            return best
        for at in _instants(wall, wild):
            if after < at and (best is None or at < best):
                best, bound = at, wall + _spread(at)


def _offsets(t: float) -> set[int]:
    """The local UTC offsets (seconds) a day either side of `t` and at it."""
    return {time.localtime(t + d).tm_gmtoff for d in (-_DAY_S, 0, _DAY_S)}


def _spread(t: float) -> int:
    """How far the local offset changes within a day of `t` (0 but near a DST change)."""
    offsets = _offsets(t)
    return max(offsets) - min(offsets)


def _instants(wall: int, wild: bool) -> list[float]:
    """The epochs of a wall time (its fields counted as UTC seconds) a schedule ticks at: each
    epoch that shows it for a wildcard one (two in the hour repeated when DST ends, none in the
    hour it skips); the first for a fixed-time one, and for a wall time DST skips the end of
    that gap, the first epoch of the new offset."""
    offsets = _offsets(wall)
    found = sorted(float(wall - off) for off in offsets
                   if time.localtime(wall - off).tm_gmtoff == off)
    if found or wild:
        return found if wild else found[:1]
    before, after = wall - max(offsets), wall - min(offsets)  # (before the gap, after it)
    new = time.localtime(after).tm_gmtoff
    while after - before > 1:
        mid = (before + after) // 2
        before, after = (before, mid) if time.localtime(mid).tm_gmtoff == new else (mid, after)
    return [float(after)]


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
