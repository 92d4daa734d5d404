"""The clock seam: monotonic time for timers, wall time only for records."""

from __future__ import annotations

import math
import time
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
