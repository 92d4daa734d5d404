"""A file on a remote file system is followed on an event loop of its own, in a thread: a read
that never returns (an NFS server gone, a hard mount) holds that watcher, not the runner. So is
one whose path turned remote after its watcher started, from its checkpoint."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from watchrun import offload
from watchrun.events import Chunk
from watchrun.match.sanitize import edge_name
from watchrun.notify import Notifier
from watchrun.runtime.first_looks import Said, resumed_said, stalled_said, stopped_reads
from watchrun.runtime.lag import LoopLag
from watchrun.runtime.pipeline import WatcherPipeline
from watchrun.runtime.workers import Workers
from watchrun.sources.file import FileSource
from watchrun.sources.resume import Recorded

if TYPE_CHECKING:
    from watchrun.runtime.ending import Owner
    from watchrun.runtime.wiring import WatcherRuntime

__all__ = ["BEAT_S", "follow_elsewhere", "follow_remote"]

T = TypeVar("T")

BEAT_S = 1.0
"""The remote loop's lag timer: a stall of its reads is said STALL_S after it began."""


class Across:
    """The pipeline as a source on the remote loop sees it: every call that does something
    runs on the runner's loop, and the source waits for it there."""

    def __init__(self, pipeline: WatcherPipeline, home: asyncio.AbstractEventLoop) -> None:
        self._pipeline, self._home = pipeline, home

    async def chunk(self, chunk: Chunk) -> None:
        await self._on_home(self._pipeline.chunk(chunk))

    async def event(self, kind: str, **fields: Any) -> None:
        await self._on_home(self._pipeline.event(kind, **fields))

    async def recorded(self, since_seq: int) -> Recorded:
        return await self._on_home(self._pipeline.recorded(since_seq))

    def skipped(self, lines: int) -> None:
        self._home.call_soon_threadsafe(self._pipeline.skipped, lines)

    async def lost(self, seq: int) -> None:
        await self._on_home(self._pipeline.lost(seq))

    async def durable(self) -> Callable[[], None] | None:
        return await self._on_home(self._pipeline.durable())

    @property
    def next_seq(self) -> int:
        return self._pipeline.next_seq  # (an int read; its writes are ordered by `_on_home`)

    def lines_in_last_chunk(self) -> int:
        return self._pipeline.lines_in_last_chunk()  # (set before the chunk's call returned)

    def matches_in_last_chunk(self) -> int:
        return self._pipeline.matches_in_last_chunk()

    async def _on_home(self, coro: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._home))


async def follow_remote(sup: Owner, rt: WatcherRuntime, fs: str, *, moved: bool,
                        said: Said) -> None:
    """`rt`'s file, on the remote file system `fs`, followed on a loop of its own, as the log
    says; its stalls `said` (`first_looks.Said`). `moved`: its path turned remote after the
    watcher started, and its source ended on the runner's loop (`HandOver`): one made anew goes
    on from its checkpoint there."""
    assert isinstance(rt.source, FileSource)
    wid, poll_ms = rt.spec.id, sup.config.limits.poll_ms
    if moved:
        rt.source = rt.source.successor()
        if (entry := sup.board.entries.get(wid)) is not None:  # (`list`, `status`: its state)
            entry.source = rt.source
    path, now = edge_name(rt.spec.path), " now" if moved else ""
    if sup.once:
        sup.log.info(f"{path} is on {fs}: read on a thread of its own", wid)
    else:
        sup.log.warning(f"{path} is on {fs}{now}, where inotify does not see what other hosts "
                        f"write; polling it every {poll_ms} ms, on a thread of its own", wid)
    await follow_elsewhere(rt.source, rt.pipeline, name=wid, poll_ms=poll_ms,
                           watching=not sup.once, said=said)


async def follow_elsewhere(source: FileSource, pipeline: WatcherPipeline, *, name: str,
                           poll_ms: int, watching: bool, said: Said) -> None:
    """Run `source` on a new loop in a daemon thread until it ends; cancelled, cancel it there
    and wait STOP_CALL_S at most (or until cancelled again; not past the stop's deadline:
    `offload.stop_left`) for it to end: `StuckCall` if it did not, the thread left to its call.
    `watching` False (once mode): the source never waits, nothing is polled. `said(text,
    stalled)`: a stall of its loop past STALL_S and the end of one, on this loop."""
    home = asyncio.get_running_loop()
    ended: asyncio.Future[BaseException | None] = home.create_future()

    def on_home(fn: Callable[..., None], *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # (the runner's loop has closed)
            home.call_soon_threadsafe(fn, *args)

    def end(exc: BaseException | None) -> None:
        if not ended.done():
            ended.set_result(exc)

    lag = LoopLag(BEAT_S, stalled=lambda s, where, _busy: on_home(
        said, stalled_said(source.path, s, where), True),
        resumed=lambda s: on_home(said, resumed_said(source.path, s), False))
    source.ready = _Relay(source.ready, on_home)  # (before the thread: no one sees it change)
    loop = asyncio.new_event_loop()
    loop.set_default_executor(Workers())  # (daemon threads: a call stuck there holds no exit)
    task = loop.create_task(_follow(source, Across(pipeline, home), lag, poll_ms, watching))

    def thread() -> None:
        exc: BaseException | None = None
        try:
            loop.run_until_complete(task)
        except asyncio.CancelledError:
            pass  # (its owner cancelled it)
        except BaseException as e:  # handed to the owner, on its loop
            exc = e
        finally:
            loop.close()
        on_home(end, exc)

    threading.Thread(target=thread, name=f"watchrun-remote-{name}", daemon=True).start()
    try:
        await asyncio.wait({ended})
    except asyncio.CancelledError:
        loop.call_soon_threadsafe(task.cancel)
        await stopped_reads(ended, source.path)
        raise
    if (exc := ended.result()) is not None:
        raise exc


async def _follow(source: FileSource, ctx: Across, lag: LoopLag, poll_ms: int,
                  watching: bool) -> None:
    """On the remote loop: a notifier that polls (inotify does not see other hosts' writes),
    the lag monitor, and the source, whose blocking calls are made on this loop (`inline`): one
    that does not return, its first stat or open too, holds the loop, which the lag monitor's
    guard thread (started first) says."""
    offload.inline()
    source.notifier = Notifier(poll_ms, force_poll=True, enabled=watching)
    beat = asyncio.create_task(lag.run())
    await asyncio.sleep(0)  # (the guard thread starts before the source's first call)
    try:
        await source.run(ctx)
    finally:
        beat.cancel()
        await asyncio.wait({beat})
        source.notifier.close()


class _Relay(asyncio.Event):
    """A remote source's `ready`: set on its loop, seen on the runner's (where the start waits
    on it, maybe already on the event this one replaced)."""

    def __init__(self, home_ready: asyncio.Event,
                 on_home: Callable[[Callable[[], None]], None]) -> None:
        super().__init__()
        self._home_ready, self._on_home = home_ready, on_home

    def set(self) -> None:
        self._on_home(self._home_ready.set)

    def is_set(self) -> bool:
        return self._home_ready.is_set()

    async def wait(self) -> Literal[True]:
        return await self._home_ready.wait()
