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


_SECOND: tuple[int, str] = (-1, "")
"""The last whole second formatted, and its text: records come many per second."""


def iso_ts(epoch: float) -> str:
    """`2026-05-16T12:00:00.000Z` as in every record's `ts` (UTC, milliseconds truncated)."""
    global _SECOND
    sec = math.floor(epoch)
    us = round((epoch - sec) * 1e6)
    if us >= 1_000_000:
        sec, us = sec + 1, us - 1_000_000
    if sec != _SECOND[0]:
        _SECOND = (sec, time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(sec)))
    return f"{_SECOND[1]}{us // 1000:03d}Z"


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
    """The first tick of cron `expr` (local time, as cron runs) after epoch `after`. croniter
    is imported here, on first use: a runner without schedules never loads it."""
    from croniter import croniter  # type: ignore[import-untyped]

    return float(croniter(expr, datetime.fromtimestamp(after).astimezone()).get_next(float))
