"""Checkpoint saves of many watchers batched on an event loop: those asked for in one turn of the
loop are written by one worker-thread job (one thread hop, state/ checked and opened once, one
fsync of state/ after the last rename), and the keepers' periodic saves fall on ticks the loop's
keepers share, so the watchers that moved within one interval are saved in the same turn."""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, NamedTuple, TypeAlias

from watchrun.sources.checkpoint_doc import FileState

if TYPE_CHECKING:  # (asyncio only once a loop saves: `validate` reads checkpoints without it)
    import asyncio

BATCH_SAVES = 64
"""Saves per worker-thread job at most: a larger batch is split into jobs that run in parallel
(each save fsyncs the records it covers and its file: hundreds in a row in one thread would
hold the last of them back on a slow disk)."""


class Ask(NamedTuple):
    """One save, as `CheckpointStore.save` takes it."""

    watcher_id: str
    state: FileState
    ticket: int | None
    first: Callable[[], None] | None


Outcome: TypeAlias = "bool | Exception"
"""What one save came to: written (True), dropped for a newer one (False), or its error."""
Writer: TypeAlias = Callable[[Sequence[Ask]], "list[Outcome]"]


class _OnLoop:
    """One loop's share: the saves asked for in this turn, and the ticks waited for."""

    def __init__(self) -> None:
        self.asks: list[tuple[Ask, asyncio.Future[bool]]] = []
        self.ticks: dict[float, asyncio.Future[None]] = {}


class SaveBatch:
    """Hands the saves asked for on a loop to `write` (`CheckpointStore.save_all`, in a worker
    thread) once per turn of the loop, and gives that loop's keepers common ticks. Each loop has
    its share (a file on a remote file system is followed on a loop of its own)."""

    def __init__(self, write: Writer, size: int = BATCH_SAVES) -> None:
        self._write, self._size = write, size
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _OnLoop] = \
            weakref.WeakKeyDictionary()
        self._lock = threading.Lock()  # (the loops' threads share the table)

    def _on(self, loop: asyncio.AbstractEventLoop) -> _OnLoop:
        with self._lock:
            on = self._loops.get(loop)
            if on is None:
                on = self._loops[loop] = _OnLoop()
            return on

    async def save(self, ask: Ask) -> bool:
        """Whether `ask` was written (False: a newer save was); its error raised. The job runs
        on even if this is cancelled."""
        import asyncio  # (see above)

        loop = asyncio.get_running_loop()
        on = self._on(loop)
        fut: asyncio.Future[bool] = loop.create_future()
        if not on.asks:
            loop.call_soon(self._flush, loop, on)
        on.asks.append((ask, fut))
        return await fut

    def _flush(self, loop: asyncio.AbstractEventLoop, on: _OnLoop) -> None:
        asks, on.asks = on.asks, []
        for i in range(0, len(asks), self._size):
            part = asks[i:i + self._size]
            try:
                job = loop.run_in_executor(None, self._write, [ask for ask, _ in part])
            except RuntimeError as exc:  # (the loop's executor is shut down: the loop ends)
                _settle(part, [exc] * len(part))
                continue
            job.add_done_callback(partial(_landed, part))

    async def tick(self, interval: float) -> None:
        """Return at the loop's next multiple of `interval` seconds: the keepers of the loop
        that wait meanwhile all wake in the same turn, and their saves go in one batch."""
        import asyncio  # (see above)

        loop = asyncio.get_running_loop()
        on = self._on(loop)
        at = (math.floor(loop.time() / interval) + 1) * interval
        fut = on.ticks.get(at)
        if fut is None:
            fut = on.ticks[at] = loop.create_future()
            loop.call_at(at, _ring, on, at)
        await asyncio.shield(fut)  # (a keeper stopped leaves the others their tick)


def _ring(on: _OnLoop, at: float) -> None:
    fut = on.ticks.pop(at, None)
    if fut is not None and not fut.done():
        fut.set_result(None)


def _landed(part: list[tuple[Ask, asyncio.Future[bool]]],
            job: asyncio.Future[list[Outcome]]) -> None:
    exc = None if job.cancelled() else job.exception()
    if job.cancelled() or exc is not None:
        failed = exc if isinstance(exc, Exception) else RuntimeError("checkpoint save cancelled")
        _settle(part, [failed] * len(part))
        return
    _settle(part, job.result())


def _settle(part: list[tuple[Ask, asyncio.Future[bool]]], outcomes: Sequence[Outcome]) -> None:
    for (_, fut), outcome in zip(part, outcomes, strict=True):
        if fut.done():  # (its waiter was cancelled)
            continue
        if isinstance(outcome, Exception):
            fut.set_exception(outcome)
        else:
            fut.set_result(outcome)
