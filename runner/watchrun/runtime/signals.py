"""Signal handlers that only record the signal; the supervisor loop acts on it."""

from __future__ import annotations

import asyncio
import signal


class SignalInbox:
    """Queues SIGTERM, SIGINT and SIGHUP for the loop to read with `next()`."""

    WATCHED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[signal.Signals] = asyncio.Queue()
        for sig in self.WATCHED:
            loop.add_signal_handler(sig, self._queue.put_nowait, sig)
        # A reader of our stdout that went away must not kill us with SIGPIPE.
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)

    async def next(self) -> signal.Signals:
        return await self._queue.get()

    def push(self, sig: signal.Signals) -> None:
        """Act as if `sig` had arrived (a program that embeds the runner asks it to stop)."""
        self._queue.put_nowait(sig)

    def close(self) -> None:
        for sig in self.WATCHED:
            self._loop.remove_signal_handler(sig)
