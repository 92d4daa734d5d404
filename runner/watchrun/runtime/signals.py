"""Signal handlers that only record the signal; the supervisor loop acts on it (SIGCHLD: the
orphans it adopted are reaped)."""

from __future__ import annotations

import asyncio
import signal
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from watchrun.process.tree import adopted_zombies, reap_adopted

__all__ = ["SignalInbox", "handle_signals", "reap_orphans_when"]


def handle_signals(loop: asyncio.AbstractEventLoop,
                   callbacks: Mapping[signal.Signals, Callable[[], object]],
                   arrived: deque[signal.Signals] | None = None) -> Callable[[], None]:
    """Have each signal call its callback on the loop; return what gives them back to the
    handlers they had (the `run` command's: a signal after the loop is recorded, never the
    default that ended the process with 129 or 143 while it exited). The handler only hands the
    call to the loop (`call_soon_threadsafe`, as asyncio's own SIGINT handler does), after it
    appends the signal to `arrived` (if given): one that came as the loop ended, its call not
    run, is not lost.

    Not `loop.add_signal_handler`: that writes one byte a signal into a socket, which a burst
    of SIGCHLDs fills (hundreds of children ended at once by a stop): CPython then printed a
    traceback for each byte that did not fit, into the runner's log, and a SIGTERM among them
    would have been lost. A call handed to the loop is never lost."""
    def handler(cb: Callable[[], object]) -> Callable[[int, Any], None]:
        def on_signal(signum: int, _frame: Any) -> None:
            if arrived is not None:
                arrived.append(signal.Signals(signum))
            loop.call_soon_threadsafe(cb)
        return on_signal

    before = {sig: signal.signal(sig, handler(callback)) for sig, callback in callbacks.items()}
    for sig in callbacks:
        signal.siginterrupt(sig, False)  # (as asyncio: a system call in a thread is restarted)

    def restore() -> None:
        for sig, was in before.items():
            signal.signal(sig, signal.SIG_DFL if was is None else was)

    return restore


class SignalInbox:
    """Holds SIGTERM, SIGINT and SIGHUP, in order, for the loop to read with `next()`. SIGHUPs
    coalesce: one reload waiting covers every SIGHUP sent before it starts (a storm of them is
    one reload after the running one, not one each, with a stop queued behind them all); a stop
    signal drops the reload waiting (a runner that stops reloads nothing)."""

    WATCHED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._waiting: deque[signal.Signals] = deque()
        self._came: deque[signal.Signals] = deque()  # (by the handlers, for `_take`)
        self._arrived = asyncio.Event()
        self._restore = handle_signals(loop, dict.fromkeys(self.WATCHED, self._take),
                                       self._came)
        # A reader of our stdout that went away must not kill us with SIGPIPE.
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)

    async def next(self) -> signal.Signals:
        """The next signal (one cancelled while waiting takes none)."""
        while not self._waiting:
            self._arrived.clear()
            await self._arrived.wait()
        return self._waiting.popleft()

    async def next_before(self, other: asyncio.Future[Any] | None) -> signal.Signals | None:
        """The next signal, or None when `other` is done first (it is left as it is)."""
        waiting = asyncio.ensure_future(self.next())
        try:
            done, _ = await asyncio.wait({waiting} if other is None else {waiting, other},
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()  # (a wait cancelled takes no signal)
        return waiting.result() if waiting in done else None

    def push(self, sig: signal.Signals) -> None:
        """Record `sig` (also: act as if it had arrived, when a program that embeds the runner
        asks it to stop)."""
        if sig == signal.SIGHUP:
            if sig in self._waiting:
                return  # the reload waiting will read the config as it is then
        elif signal.SIGHUP in self._waiting:
            self._waiting.remove(signal.SIGHUP)
        self._waiting.append(sig)
        self._arrived.set()

    def _take(self) -> None:
        while self._came:
            self.push(self._came.popleft())

    def close(self) -> list[signal.Signals]:
        """Give the signals back to the handlers they had; those that came and were not read
        (also one whose call to the loop had not run yet)."""
        self._restore()
        self._take()
        return list(self._waiting)


async def reap_orphans_when(sigchld: asyncio.Event) -> None:
    """Each time `sigchld` is set, reap the orphans adopted since: /proc scanned in a thread,
    reaped on the loop."""
    while True:
        await sigchld.wait()
        sigchld.clear()
        reap_adopted(await asyncio.to_thread(adopted_zombies))
