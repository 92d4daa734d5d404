"""One /proc scan shared by every child being stopped: N stops at once cost one or two scans a
tick, not N (each scan reads every process on the host)."""

from __future__ import annotations

import asyncio
import contextlib
import weakref

from watchrun.process.tree import Table, scan

__all__ = ["fresh_table"]


class _Scans:
    """The scan in progress on one loop, if any (its number and result), and how many have
    started."""

    def __init__(self) -> None:
        self.started = 0
        self.running: tuple[int, asyncio.Future[Table]] | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.started += 1
        n, fut = self.started, loop.run_in_executor(None, scan)  # a future, not a task: the
        self.running = (n, fut)  # thread finishes whoever waits, and every asker waits for it
        fut.add_done_callback(lambda _: self._done(n))

    def _done(self, n: int) -> None:
        if self.running is not None and self.running[0] == n:
            self.running = None


_SCANS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Scans] = \
    weakref.WeakKeyDictionary()


async def fresh_table() -> Table:
    """A table read after this call began: the next scan to start, which everyone asking
    meanwhile shares (the one in progress may have missed what the caller just did, such as a
    kill)."""
    loop = asyncio.get_running_loop()
    scans = _SCANS.setdefault(loop, _Scans())
    want = scans.started + 1
    while True:
        running = scans.running
        if running is not None and running[0] >= want:
            return await asyncio.shield(running[1])
        if running is None or running[1].done():  # (done: its callback has not run yet)
            scans.start(loop)
            continue
        with contextlib.suppress(Exception):  # an older scan: its failure is its askers'
            await asyncio.shield(running[1])
