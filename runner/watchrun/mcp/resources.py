"""Each watcher's matches as an MCP resource, `watchrun://watchers/{id}/matches` (`?since=CURSOR`
for what came after a cursor), and the subscriptions to them: a subscribed watcher's JSONL is
skimmed for new match records (woken by inotify or polling; bounded reads in a worker thread,
no record parsed) and every subscriber of its URI is told (`notifications/resources/updated`,
or a `subscriptions/listen` event), at most once per MIN_GAP_S. At most MAX_FOLLOWED URIs are
followed at once, and those of a watcher no longer known (cleared) are followed no more."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import time
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, quote, urlsplit

from watchrun.notify import Notifier
from watchrun.output.records import ID_PATTERN
from watchrun.output.runlog import RunLog
from watchrun.views.skim import MatchSkimmer

__all__ = ["MAX_FOLLOWED", "TEMPLATE", "Followers", "Full", "parse_uri", "uri_of"]

TEMPLATE = "watchrun://watchers/{id}/matches"
MIN_GAP_S = 0.2
"""At most one update per URI this often: a flood of matches is one refetch, not thousands."""
MAX_FOLLOWED = 100
"""The URIs one session follows at once: each holds its watcher's JSONL open (a descriptor, an
inotify watch), and a client's descriptor limit is often 1024."""
T = TypeVar("T")
Send = Callable[[str], Awaitable[None]]
"""Sends `notifications/resources/updated` for a URI to the client."""


def uri_of(wid: str) -> str:
    return TEMPLATE.replace("{id}", quote(wid, safe=""))


def parse_uri(uri: str) -> tuple[str, str | None]:
    """(watcher id, the `since` cursor or None) of a matches URI; ValueError otherwise."""
    parts = urlsplit(uri)
    segments = parts.path.strip("/").split("/")
    if parts.scheme != "watchrun" or parts.netloc != "watchers" or len(segments) != 2 or \
            segments[1] != "matches" or re.fullmatch(ID_PATTERN, segments[0]) is None:
        raise ValueError(f"not a watchrun resource: {uri!r} (they are {TEMPLATE})")
    since = parse_qs(parts.query).get("since")
    return segments[0], since[-1] if since else None


class Full(Exception):
    """A subscription refused: MAX_FOLLOWED URIs are followed already."""


class Followers:
    """The subscribed URIs, their subscribers, and one task per URI following its watcher's
    JSONL; every task is owned by `run()`'s TaskGroup and ends with its last subscriber or with
    `close()`."""

    def __init__(self, root: Path, poll_ms: int, log: RunLog) -> None:
        self.root, self.log = root, log
        self.notifier = Notifier(poll_ms)
        self._subs: dict[str, dict[object, Send]] = {}
        self._tasks: dict[str, tuple[asyncio.Task[None], asyncio.Event]] = {}
        """Each followed URI's task, and the event it sets once it follows the JSONL."""
        self._tg: asyncio.TaskGroup | None = None
        self._closing = asyncio.Event()

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                await self._closing.wait()
                for task, _ in self._tasks.values():
                    task.cancel()
        finally:
            self._tg = None
            self.notifier.close()

    def close(self) -> None:
        self._closing.set()

    def room(self, uris: Collection[str]) -> None:
        """Raise Full unless the URIs not followed yet of `uris` fit within MAX_FOLLOWED."""
        new = {uri for uri in uris if uri not in self._subs}
        if new and len(self._subs) + len(new) > MAX_FOLLOWED:
            raise Full(f"this session follows {len(self._subs)} resources, and follows at most "
                       f"{MAX_FOLLOWED} at once (each holds a watcher's JSONL open): "
                       "unsubscribe from one first (`resources/unsubscribe`)")

    def keep(self, known: Collection[str]) -> None:
        """End the subscriptions of URIs whose watcher is not among the `known` ids (cleared:
        it records nothing more), and their followers with them."""
        for uri in [u for u in self._subs if parse_uri(u)[0] not in known]:
            self._subs.pop(uri)
            if uri in self._tasks:
                self._tasks[uri][0].cancel()

    async def subscribe(self, uri: str, key: object, send: Send) -> None:
        """`send(uri)` on each batch of new matches of `uri`'s watcher, until `unsubscribe(uri,
        key)` or `keep` without it; Full when MAX_FOLLOWED URIs are followed already. Returns
        once the watcher's JSONL is followed: a match recorded after it is told (the follower
        began after the subscription was answered, and passed over a match recorded in
        between)."""
        wid, _ = parse_uri(uri)
        self.room([uri])
        self._subs.setdefault(uri, {})[key] = send
        if uri not in self._tasks and self._tg is not None:
            started = asyncio.Event()
            task = self._tg.create_task(self._follow(uri, wid, started), name=f"follow {wid}")
            self._tasks[uri] = task, started
            task.add_done_callback(functools.partial(self._done, uri))
        if uri in self._tasks:
            await self._tasks[uri][1].wait()

    def unsubscribe(self, uri: str, key: object) -> None:
        subs = self._subs.get(uri, {})
        subs.pop(key, None)
        if not subs:
            self._subs.pop(uri, None)
            if uri in self._tasks:
                self._tasks[uri][0].cancel()

    def _done(self, uri: str, task: asyncio.Task[None]) -> None:
        if uri in self._tasks and self._tasks[uri][0] is task:
            self._tasks.pop(uri)[1].set()  # (a waiter of a follower cancelled first goes on)

    async def _follow(self, uri: str, wid: str, started: asyncio.Event) -> None:
        """Tell `uri`'s subscribers when its watcher records a match: the JSONL is skimmed
        (`MatchSkimmer`, in a worker thread, a bounded slice per look), never parsed; looks
        wait MIN_GAP_S after an update, so a flood is one update per MIN_GAP_S."""
        path = self.root / "watchers" / f"{wid}.jsonl"
        watch = self.notifier.watch(path)  # armed first: what is written from now on wakes us
        skimmer = MatchSkimmer(path)
        try:
            await _in_thread(skimmer.start)
            started.set()
            sent_at, more = 0.0, False
            while True:
                if not more:  # (else what is left of the last look comes first)
                    await watch.wait()
                    await asyncio.sleep(max(0.0, sent_at + MIN_GAP_S - time.monotonic()))
                if watch.stale:
                    watch.rearm()
                found, more = await _in_thread(skimmer.look)
                if found:
                    sent_at = time.monotonic()
                    for key, send in list(self._subs.get(uri, {}).items()):
                        await self._send(uri, key, send)
        except OSError as exc:  # a symlink in place of the JSONL, say: never followed
            self.log.warning(f"cannot follow {wid}'s matches for {uri}: {exc}")
        finally:
            watch.close()
            skimmer.close()

    async def _send(self, uri: str, key: object, send: Send) -> None:
        try:
            await send(uri)
        except Exception as exc:  # that subscriber is gone (the client left): drop it only
            self.log.warning(f"cannot send an update of {uri}: {exc!r}")
            self._subs.get(uri, {}).pop(key, None)


async def _in_thread(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` in a worker thread. Cancelled, it still waits for the thread to finish, so
    nothing it uses (the follower's descriptor) is closed under it."""
    job = asyncio.ensure_future(asyncio.to_thread(fn, *args))
    try:
        return await asyncio.shield(job)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await asyncio.wait({job})
        raise
