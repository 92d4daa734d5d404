"""The clock seam: monotonic time for timers, elapsed time (counting a suspend) for windows,
wall time only for records and schedules."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from typing import Protocol

RECHECK_S = 60.0
"""The longest single wait for a time of a clock asyncio's timers do not follow: the wall clock
(a cron tick), stepped back or forward by NTP or by hand, or `elapsed` (a window's end), which
runs on while the machine sleeps: a step or a resume shows within this long."""
_BOOTTIME = getattr(time, "CLOCK_BOOTTIME", None)


class Clock(Protocol):
    def monotonic(self) -> float: ...
    def elapsed(self) -> float: ...
    def now(self) -> float: ...


class SystemClock:
    """The real clock."""

    def monotonic(self) -> float:
        """Timers and durations: asyncio's clock. On Linux it stands still while the machine
        sleeps (a laptop's lid closed)."""
        return time.monotonic()

    def elapsed(self) -> float:
        """Windows of time (maxTurns' hour, a command's start limit, an action's throttle and
        threshold): like `monotonic` it never steps, but it counts the time the machine slept
        (CLOCK_BOOTTIME; where there is none, the monotonic clock). "The last hour" is an hour
        of the day, not an hour the machine was awake."""
        return time.monotonic() if _BOOTTIME is None else time.clock_gettime(_BOOTTIME)

    def now(self) -> float:
        return time.time()


_MS: tuple[float, float, str] = (1.0, 0.0, "")
"""The last millisecond formatted: epochs in [lo, hi) give `text` (records come many per ms)."""
_SECOND: tuple[int, str] = (-1, "")
"""The last whole second formatted, and its text."""


def iso_ts(epoch: float) -> str:
    """`2026-05-16T12:00:00.000Z` as in every record's `ts` (UTC; rounded to the microsecond,
    as `datetime` does, then the milliseconds truncated). Cached per millisecond: an epoch
    inside the last millisecond formatted (at least a microsecond from its edges) costs two
    comparisons."""
    global _MS, _SECOND
    lo, hi, text = _MS
    if lo <= epoch < hi:
        return text
    sec = math.floor(epoch)
    us = round((epoch - sec) * 1e6)
    if us >= 1_000_000:
        sec, us = sec + 1, us - 1_000_000
    if sec != _SECOND[0]:
        _SECOND = (sec, time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(sec)))
    ms = us // 1000
    text = f"{_SECOND[1]}{ms:03d}Z"
    start = sec + ms / 1000
    _MS = (start + 1e-6, start + 0.000999, text)  # clear of rounding at both edges
    return text


def parse_ts(text: object) -> float | None:
    """A record's `ts` (`2026-05-16T12:00:00.000Z`, or any ISO-8601 time with an offset) as
    epoch seconds; None when it is not one. A time without an offset is taken as UTC."""
    if not isinstance(text, str) or not text:
        return None
    try:
        ts = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)).timestamp()
