"""Blocking calls run off the event loop in one worker thread, results handed back in batches:
`asyncio.to_thread` without a thread hop, a loop wake-up and a fight for the GIL per call (500
file watchers start with 500 such calls), or on the loop itself where it follows one watcher
(`Inline`); and the stop's blocking calls, each waited for a bounded time (`at_stop`), all of
them within the stop's one deadline (`stop_left`)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

DRAINERS = 4
"""Worker threads (of the loop's default executor) taking calls at most. One does the work;
another starts only while every one running has been inside one call for STUCK_S (a dead NFS
mount), so a call that hangs holds up no other."""
STUCK_S = 0.05
TICK_S = 0.01
"""While calls are out, the loop collects what has landed this often (a drainer wakes it only
when it runs out of calls), and starts a drainer when the running ones are stuck."""

STOP_CALL_S = 10.0
"""How long a stop waits for one blocking call (a JSONL's close and fsync, the last status
snapshots) before it goes on without it."""
STOP_MARGIN_S = 10.0
"""A runner's whole stop ends within twice limits.stopTimeout (the actions' programs, then the
commands, each TERMed and given that long) plus this, from the stop signal (`stop_bound_s`)."""
RESERVE_S = 1.0
"""The stop's own waits end this long before its deadline, so that its end can still say what
it gave up before the deadline ends the process (`runtime.deadline`)."""

_stop_at: float | None = None
"""When the stop's waits end (monotonic), once a bounded stop began; None: no such stop."""

_Done = tuple["asyncio.Future[Any]", Any, BaseException | None]


class StuckCall(Exception):
    """A blocking call of the stop did not return in STOP_CALL_S (or by the stop's deadline): it
    goes on in its worker thread, which the run's end names (`runtime.workers`) and does not
    wait for."""


class Offload:
    """A queue of blocking calls and the drainers that run them."""

    def __init__(self, loop: asyncio.AbstractEventLoop, drainers: int = DRAINERS,
                 spawn: Callable[[Callable[[], None]], object] | None = None) -> None:
        self._loop, self._drainers = loop, drainers
        self._spawn = spawn or functools.partial(loop.run_in_executor, None)
        """How a drainer starts: in the loop's default executor, unless told otherwise."""
        self._calls: collections.deque[tuple[Callable[[], Any], asyncio.Future[Any]]] = \
            collections.deque()
        self._done: collections.deque[_Done] = collections.deque()
        self._lock = threading.Lock()
        self._since: dict[int, float] = {}  # each running drainer: when its call began
        self._running = 0  # drainers started and not yet out of calls
        self._out = 0  # calls not yet handed back
        self._tick: asyncio.TimerHandle | None = None
        self.wakeups = 0
        """Times results were handed back (far fewer than the calls: the batching)."""

    async def run(self, call: Callable[[], T]) -> T:
        fut: asyncio.Future[T] = self._loop.create_future()
        with self._lock:
            self._calls.append((call, fut))
            start = self._running == 0
            self._running += start
        self._out += 1
        if start:
            self._spawn(self._drain)
        if self._tick is None:
            self._tick = self._loop.call_later(TICK_S, self._on_tick)
        return await fut

    def _drain(self) -> None:
        """In a worker thread: take calls until none are left, then wake the loop."""
        me = threading.get_ident()
        while True:
            with self._lock:
                if not self._calls:
                    self._running -= 1
                    self._since.pop(me, None)
                    break
                call, fut = self._calls.popleft()
                self._since[me] = time.monotonic()
            if fut.cancelled():  # its awaiter is gone, as `to_thread` drops a queued call
                self._done.append((fut, None, None))
                continue
            try:
                self._done.append((fut, call(), None))
            except BaseException as exc:  # handed to the awaiter, as to_thread does
                self._done.append((fut, None, exc))
        with contextlib.suppress(RuntimeError):  # a closed loop: no one awaits any more
            self._loop.call_soon_threadsafe(self._collect)

    def _on_tick(self) -> None:
        self._tick = None
        self._collect()
        with self._lock:
            now = time.monotonic()
            stuck = self._running == len(self._since) and all(
                now - t >= STUCK_S for t in self._since.values())
            start = bool(self._calls) and stuck and self._running < self._drainers
            self._running += start
        if start:
            try:
                self._spawn(self._drain)
            except RuntimeError:  # the executor is shutting down (the run is ending), or no
                # thread can start (a process limit)
                with self._lock:
                    self._running -= 1
        if self._out:
            self._tick = self._loop.call_later(TICK_S, self._on_tick)

    def _collect(self) -> None:
        """On the loop: hand back every result landed so far."""
        if self._done:
            self.wakeups += 1
        while self._done:
            fut, value, exc = self._done.popleft()
            self._out -= 1
            if fut.done():
                continue
            if exc is None:
                fut.set_result(value)
            elif isinstance(exc, StopIteration):  # a future cannot hold one
                fut.set_exception(RuntimeError(f"StopIteration in an offloaded call: {exc}"))
            else:
                fut.set_exception(exc)


class Inline(Offload):
    """Calls made on the loop itself: one that follows a single watcher (`runtime.remote`), where
    a call that does not return is to hold it, so that its stall guard says where."""

    async def run(self, call: Callable[[], T]) -> T:
        return call()


_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Offload] = \
    weakref.WeakKeyDictionary()


def offloader() -> Offload:
    """The running loop's `Offload`."""
    loop = asyncio.get_running_loop()
    off = _BY_LOOP.get(loop)
    if off is None:
        off = _BY_LOOP[loop] = Offload(loop)
    return off


def inline() -> None:
    """From now on `offload` on the running loop makes its calls there (`Inline`)."""
    loop = asyncio.get_running_loop()
    _BY_LOOP[loop] = Inline(loop)


async def offload(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` in a worker thread, as `asyncio.to_thread` (no context copied);
    on the loop itself after `inline`."""
    return await offloader().run(functools.partial(fn, *args, **kwargs))


def stop_bound_s(stop_timeout_s: float) -> float:
    """How long a runner's stop may take, from its signal: twice `stop_timeout_s` plus
    STOP_MARGIN_S."""
    return 2 * stop_timeout_s + STOP_MARGIN_S


def stop_by(deadline: float | None) -> None:
    """From now on every wait of the stop (`stop_left`) ends RESERVE_S before `deadline`
    (monotonic); None: the waits are their own again (the stop has ended)."""
    global _stop_at
    _stop_at = None if deadline is None else deadline - RESERVE_S


def stop_left(cap: float) -> float:
    """How long a wait of the stop may take: `cap`, or what is left of the stop's waits, if
    less (0 once they are over)."""
    at = _stop_at
    return cap if at is None else max(0.0, min(cap, at - time.monotonic()))


async def at_stop(fn: Callable[..., T], /, *args: Any) -> T:
    """`fn(*args)` in a worker thread, waited for at most STOP_CALL_S, and not past the stop's
    deadline (`stop_left`): a file system that stops answering cannot hold a stop forever.
    `StuckCall` past that; the call goes on in its thread, which the run's end names."""
    budget = stop_left(STOP_CALL_S)
    call = asyncio.get_running_loop().run_in_executor(None, fn, *args)  # (started even when
    try:  # no time is left: it may be quick, and a hung one is named at the run's end)
        await asyncio.wait({call}, timeout=budget)
    finally:
        call.cancel()  # (done: nothing; else the thread runs on, and its result is dropped)
    if not call.cancelled():
        return call.result()
    when = f"in {STOP_CALL_S:g} s" if budget == STOP_CALL_S else "by the stop's deadline"
    raise StuckCall(f"{getattr(fn, '__qualname__', fn)} did not return {when} (a file "
                    "system that does not answer?)")
