"""The heap trimmer: every minute, a live runner gives glibc's free heap pages back."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

INTERVAL_S = 60.0
"""How often a live runner trims. glibc keeps the pages of memory freed inside its main heap
(below a chunk still in use, the heap's top cannot shrink): in a 25-minute soak its free bytes
rose 2.7 -> 26.6 MB while the bytes in use stayed at 12-13 MB, and the RSS 50 -> 85 MB. One
`malloc_trim(0)` gave 9-12.6 MB of it back at once (docs/decisions.md). A trim that gives back
60 MB takes ~4.5 ms, one with little to give back ~0.01 ms, in a worker thread (ctypes lets go
of the GIL while it runs); once a minute keeps what builds up between two trims small."""


def glibc_trim() -> Callable[[], int] | None:
    """`malloc_trim(0)`: every free page of every malloc arena given back (not only the heap's
    top, which free() does past M_TRIM_THRESHOLD); None where the C library has none (musl,
    macOS), where nothing is trimmed and nothing said. Returns 1 when memory was given back."""
    import ctypes  # (imported by the first trim, in its worker thread: nothing at the start)

    try:
        fn = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: int(fn(0))


class Trimmer:
    """Runs as a task of the supervisor's TaskGroup (a live runner's: a `run --once` ends too
    soon to need it) until cancelled: every `interval_s`, `trim` in a worker thread, never on
    the loop. `trim` None: glibc's, looked up at the first trim; where there is none, the task
    ends there, quietly."""

    def __init__(self, interval_s: float = INTERVAL_S, *,
                 trim: Callable[[], object] | None = None,
                 sleep: Callable[[float], Awaitable[object]] = asyncio.sleep) -> None:
        self.interval_s, self._trim, self._sleep = interval_s, trim, sleep
        self.trims = 0
        """The trims done."""

    async def run(self) -> None:
        while True:
            await self._sleep(self.interval_s)
            if not await asyncio.to_thread(self._call):
                return

    def _call(self) -> bool:
        """In the worker thread: one trim; False where there is nothing to trim with."""
        if self._trim is None:
            self._trim = glibc_trim()
            if self._trim is None:
                return False
        self._trim()
        self.trims += 1
        return True
