"""The event loop's worker threads, which a blocking call that never returns cannot hold.

asyncio's default executor joins its threads when the loop closes and again at interpreter exit,
without a bound: one call stuck in the kernel (a checkpoint written to a dead NFS mount, a /proc
read of a process stuck in D state) kept a stopped runner alive forever after SIGTERM. These
threads are daemon threads: `shutdown` waits for them at most `grace_s` (and not past a runner's
stop deadline: `offload.stop_left`), then names what is still running (`stuck`), and the process
exits without them.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import queue
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from watchrun.offload import stop_left

__all__ = ["GRACE_S", "Workers", "calls", "run_with_workers", "stuck_message"]

P = ParamSpec("P")
T = TypeVar("T")

GRACE_S = 5.0
"""How long the loop's close waits for calls still running (what it awaited ended before)."""

_Item = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class Workers(ThreadPoolExecutor):
    """A thread pool of daemon threads that records what each one runs (a ThreadPoolExecutor
    by type, as `loop.set_default_executor` demands; none of its threads is started)."""

    def __init__(self, max_workers: int | None = None, grace_s: float | None = None) -> None:
        super().__init__(max_workers)
        self._max = self._max_workers
        self._grace_s = GRACE_S if grace_s is None else grace_s
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._daemons: list[threading.Thread] = []
        self._running: dict[int, str] = {}  # thread ident -> the call it is inside
        self._shut = False
        self.stuck: list[str] = []
        """What was still running when `shutdown` stopped waiting (qualified names)."""

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        fut: Future[T] = Future()
        with self._lock:
            if self._shut:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if not self._idle.acquire(blocking=False) and len(self._daemons) < self._max:
                thread = threading.Thread(target=self._work, daemon=True,
                                          name=f"watchrun-worker-{len(self._daemons)}")
                try:
                    thread.start()
                except RuntimeError:  # (a process limit): the threads there are take it, or
                    if not self._daemons:  # it is refused, never queued for a later one
                        raise
                else:
                    self._daemons.append(thread)  # (one never started is never joined)
            self._queue.put((fut, fn, args, kwargs))
        return fut

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shut = True
            threads = list(self._daemons)
        if cancel_futures:
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        for _ in threads:
            self._queue.put(None)
        if not wait:
            return
        deadline = time.monotonic() + stop_left(self._grace_s)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self.stuck = self.running()

    def running(self) -> list[str]:
        """What the threads are running now (qualified names; from any thread)."""
        with self._lock:
            return sorted(self._running.values())

    def _work(self) -> None:
        me = threading.get_ident()
        while (item := self._queue.get()) is not None:
            fut, fn, args, kwargs = item
            del item
            if fut.set_running_or_notify_cancel():
                with self._lock:
                    self._running[me] = _name(fn)
                try:
                    fut.set_result(fn(*args, **kwargs))
                except BaseException as exc:  # handed to the awaiter, as ThreadPoolExecutor does
                    fut.set_exception(exc)
                finally:
                    with self._lock:
                        self._running.pop(me, None)
            del fut, fn, args, kwargs
            self._idle.release()


def _name(fn: Callable[..., Any]) -> str:
    """What a call runs: `to_thread` hands over `partial(context.run, func, …)`."""
    while isinstance(fn, functools.partial):
        inner, args = fn.func, fn.args
        ran = isinstance(getattr(inner, "__self__", None), contextvars.Context)
        fn = args[0] if ran and args and callable(args[0]) else inner
    return str(getattr(fn, "__qualname__", type(fn).__name__))


def run_with_workers(main: Coroutine[Any, Any, T], workers: Workers) -> T:
    """`asyncio.run(main)` with `workers` as the loop's default executor (`to_thread`,
    `run_in_executor(None, …)`): its close waits for them at most their grace."""

    async def with_workers() -> T:
        asyncio.get_running_loop().set_default_executor(workers)
        return await main

    running = with_workers()
    try:
        return asyncio.run(running)
    finally:  # (no loop could be made, out of descriptors: neither was ever awaited)
        running.close()
        main.close()


def stuck_message(stuck: list[str]) -> str:
    """What a command says of the calls `Workers.shutdown` stopped waiting for."""
    return (f"{calls(stuck)} still running at the end of the stop ({', '.join(stuck)}): a file "
            "system that does not answer? Exiting without them")


def calls(names: list[str]) -> str:
    """`1 blocking call`, `2 blocking calls`."""
    return f"{len(names)} blocking call{'' if len(names) == 1 else 's'}"
