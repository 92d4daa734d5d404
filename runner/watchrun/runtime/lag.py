"""The loop-lag monitor: how late the event loop runs a timer, i.e. the worst stall so far."""

from __future__ import annotations

import asyncio

INTERVAL_S = 0.1
"""A timer every 100 ms (10 wake-ups a second): a stall that covers one of its deadlines shows
up as that timer's lateness, to within the loop's own scheduling (~1 ms)."""


class LoopLag:
    """Runs as a task of the supervisor; `max_s` is exposed in `status` and the metrics."""

    def __init__(self, interval_s: float = INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.max_s = 0.0
        """The worst lateness seen since the runner started (seconds)."""
        self.last_s = 0.0
        """The lateness of the latest tick."""

    async def run(self) -> None:
        """Until cancelled."""
        loop = asyncio.get_running_loop()
        due = loop.time() + self.interval_s
        while True:
            await asyncio.sleep(max(0.0, due - loop.time()))
            now = loop.time()
            self.last_s = max(0.0, now - due)
            self.max_s = max(self.max_s, self.last_s)
            due = now + self.interval_s
