"""Watchers added with `endWithClient` end with the process that added them: its pidfd is
followed, and when it ends (killed or not) the watchers it added, still as it added them, stop
(`stop{reason: client-gone}`). The runner keeps the rows of the last ENDED_KEPT such watchers
whose client ended, and forgets older ones as `clear` does (their JSONL stays)."""

from __future__ import annotations

import asyncio
import os
import weakref
from typing import Any, Protocol

from watchrun.config.model import WatcherSpec
from watchrun.runtime.forgetting import Forgetting, forget_stopped
from watchrun.runtime.watchers import WatcherSet
from watchrun.views.humanize import named

__all__ = ["ENDED_KEPT", "Managing", "added_by", "own", "release"]

ENDED_KEPT = 20
"""The watchers whose client ended that stay listed (stopped): as many as `limits.maxWatchers`
runs by default. An agent's session adds some to a long-lived runner every time; older ones are
forgotten as `clear` forgets them, so the rows, state files and metric series stay bounded."""


class Managing(Forgetting, Protocol):
    """What following clients needs of the supervisor."""

    set: WatcherSet
    changing: asyncio.Lock

    @property
    def state(self) -> object: ...

    def spawn(self, coro: Any, name: str) -> asyncio.Task[Any]: ...
    def problem(self, message: str, wid: str | None = None) -> None: ...


_OWNERS: weakref.WeakKeyDictionary[Managing, dict[int, dict[str, WatcherSpec]]] = \
    weakref.WeakKeyDictionary()
"""Per runner: the pid of each client whose watchers end with it, and those watchers."""


_FOLLOWING: weakref.WeakKeyDictionary[Managing, set[asyncio.Task[None]]] = \
    weakref.WeakKeyDictionary()
"""Per runner: the tasks following its clients (`release` cancels them)."""


_ENDED: weakref.WeakKeyDictionary[Managing, dict[str, WatcherSpec]] = \
    weakref.WeakKeyDictionary()
"""Per runner: the watchers whose client ended, as it added them, the oldest first."""


def own(sup: Managing, pid: int, spec: WatcherSpec) -> None:
    """Stop `spec`'s watcher when process `pid` ends, killed or not (one task per client, owned
    by the supervisor's TaskGroup: `release`d by the runner's stop, which stops the watchers
    anyway; a client that outlives the runner must not hold its TaskGroup open)."""
    owners = _OWNERS.setdefault(sup, {})
    if pid not in owners:
        owners[pid] = {}
        task = sup.spawn(_watch_client(sup, pid, owners[pid]), f"client:{pid}")
        following = _FOLLOWING.setdefault(sup, set())
        following.add(task)
        task.add_done_callback(following.discard)
    owners[pid][spec.id] = spec


def added_by(sup: Managing, pid: int | None) -> set[str]:
    """The ids of the watchers process `pid` added with `endWithClient` that are still as it
    added them, running or stopped: not one added again under the same id since, nor a config
    watcher that took the id over in a reload. None for no pid, nor for pid 0 (every client
    outside the runner's pid namespace has it: none is told from another)."""
    return _still(sup, _OWNERS.get(sup, {}).get(pid, {}) if pid else {})


def _still(sup: Managing, specs: dict[str, WatcherSpec]) -> set[str]:
    """Those of `specs` the runner holds as they were added (the spec itself, not an equal)."""
    return {wid for wid, spec in specs.items() if sup.set.runtime.get(wid) is spec}


def release(sup: Managing) -> None:
    """At the runner's stop: the clients are no longer followed (their tasks cancelled)."""
    for task in list(_FOLLOWING.pop(sup, ())):
        task.cancel()
    _OWNERS.pop(sup, None)
    _ENDED.pop(sup, None)


async def _watch_client(sup: Managing, pid: int, specs: dict[str, WatcherSpec]) -> None:
    """Until process `pid` ends (its pidfd becomes readable; at once when it has ended), then
    stop the watchers it added. A failure is reported, never raised into the TaskGroup."""
    try:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            fd = -1  # it has ended already
        if fd >= 0:
            loop = asyncio.get_running_loop()
            ended: asyncio.Future[None] = loop.create_future()
            loop.add_reader(fd, _settle, ended)
            try:
                await ended
            finally:
                loop.remove_reader(fd)
                os.close(fd)
        _OWNERS.get(sup, {}).pop(pid, None)  # (a later client with the same pid: its own task)
        await _owner_gone(sup, pid, specs)
    except OSError as exc:
        sup.problem(f"cannot follow process {pid}, which added {', '.join(specs)}: {exc}; "
                    "they keep running until stopped")


def _settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


async def _owner_gone(sup: Managing, pid: int, specs: dict[str, WatcherSpec]) -> None:
    """Stop the watchers that process `pid` added with `endWithClient` and that still run as it
    added them (not one re-added under the same id since); then keep the last ENDED_KEPT."""
    async with sup.changing:
        if str(sup.state) != "running":
            return  # a runner that is stopping stops them anyway
        still = _still(sup, specs)
        ids = [wid for wid in specs if wid in still and wid in sup.set.running]
        if ids:
            sup.log.info(f"process {pid}, which added {', '.join(ids)}, has ended: stopping "
                         "them", event="client-gone")
        elif still:
            sup.log.info(f"process {pid}, which added {', '.join(w for w in specs if w in still)}"
                         ", has ended (they are stopped already)", event="client-gone")
        for wid in ids:
            await sup.set.stop(wid, reason="client-gone")
        await _keep_last(sup, {wid: spec for wid, spec in specs.items() if wid in still})


async def _keep_last(sup: Managing, ended: dict[str, WatcherSpec]) -> None:
    """`ended` are the newest watchers whose client ended; forget the oldest beyond ENDED_KEPT
    of those that rest as their client left them (one cleared since, added again by another,
    or started again by someone is no longer counted: it is not a row its client left)."""
    kept = _ENDED.setdefault(sup, {})
    for wid, spec in ended.items():
        kept.pop(wid, None)
        kept[wid] = spec  # (the newest last)
    ws = sup.set
    for wid, spec in list(kept.items()):
        if ws.runtime.get(wid) is not spec or wid in ws.running or wid in ws.later or \
                wid in ws.stopping:
            del kept[wid]
    old = list(kept)[:max(0, len(kept) - ENDED_KEPT)]
    if not old:
        return
    for wid in old:
        del kept[wid]
    await forget_stopped(sup, ws, old)
    sup.log.info(f"forgot {named(old)}, stopped when the client that added them ended: the "
                 f"runner keeps the last {ENDED_KEPT} such watchers listed (their JSONL stays)",
                 event="forgotten")
