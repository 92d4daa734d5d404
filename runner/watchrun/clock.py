"""The clock seam: monotonic time for timers, wall time only for records."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float: ...
    def now(self) -> float: ...


class SystemClock:
    """The real clock."""

    def monotonic(self) -> float:
        return time.monotonic()

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
