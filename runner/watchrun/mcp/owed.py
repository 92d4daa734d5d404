"""The answers an MCP session owes its client, bounded: at MAX_OWED, the client's next messages
are not read (`StdinLines` waits for `room`) until the writer takes an answer, so a client that
sends requests faster than it reads the answers holds that many answers in the server, not one
per request (each `matches` is up to a few MiB; 900 pipelined ones held 868 MB)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from types import TracebackType
from typing import Any

import mcp_types as types
from mcp.shared.message import SessionMessage

__all__ = ["MAX_OWED", "Owed"]

MAX_OWED = 8
"""Requests read whose answers the writer has not taken yet, at most."""
LONG_LIVED = frozenset({"subscriptions/listen"})
"""Requests answered only when the client ends them (a 2026-07-28 subscription stream): not
counted on a 2026-07-28 connection, or a client holding MAX_OWED streams open would never be
read again (on a 2025 one, the SDK answers them at once: Method not found)."""


class Owed:
    """The requests handed to the SDK (by id) whose answer the writer has not taken, and the
    gate that holds stdin's reading while there are MAX_OWED of them. A request the client
    cancels (`notifications/cancelled`) is never answered: it is owed no more."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self._ids: Counter[str] = Counter()
        self._room, self._none = asyncio.Event(), asyncio.Event()
        self._room.set()
        self._none.set()
        self._say, self._said = say, False
        self._closed = self._unheld = False
        self._modern: bool | None = None
        """Whether the connection is a 2026-07-28 one (None: no request yet). Its first
        request decides, as the SDK's: a `_meta` envelope naming the version, on a request
        other than `initialize`."""

    def read(self, message: dict[str, Any]) -> None:
        """A message from the client, as it is handed to the SDK."""
        method, rid = message.get("method"), message.get("id")
        if rid is not None and isinstance(method, str):
            if self._modern is None:
                meta = params.get("_meta") if isinstance(params := message.get("params"),
                                                         dict) else None
                self._modern = method != "initialize" and isinstance(meta, dict) and \
                    types.PROTOCOL_VERSION_META_KEY in meta
            if not (self._modern and method in LONG_LIVED):
                self._ids[str(rid)] += 1
        elif rid is None and method == "notifications/cancelled":
            params = message.get("params")
            if isinstance(params, dict) and params.get("requestId") is not None:
                self._settled(params["requestId"])
        self._update()

    async def room(self) -> None:
        """Until fewer than MAX_OWED answers are owed."""
        await self._room.wait()

    async def none(self) -> None:
        """Until no answer is owed (or this is closed)."""
        await self._none.wait()

    def ended(self) -> None:
        """The client's messages have ended: reading is held back no more (`none` still waits
        for the answers owed)."""
        self._unheld = True
        self._update()

    def close(self) -> None:
        """The session ends now: nothing is held back from now on."""
        self._closed = True
        self._room.set()
        self._none.set()

    def counting(self, write: Any) -> _Counting:
        """`write` (the SDK's stream of messages to the writer), telling this of each answer
        the writer takes."""
        return _Counting(write, self)

    def taken(self, message: SessionMessage) -> None:
        if isinstance(message.message, types.JSONRPCResponse | types.JSONRPCError):
            self._settled(message.message.id)
            self._update()

    def _settled(self, rid: object) -> None:
        key = str(rid)
        if self._ids[key] > 1:
            self._ids[key] -= 1
        else:
            self._ids.pop(key, None)

    def _update(self) -> None:
        if self._closed or not self._ids:
            self._none.set()
        else:
            self._none.clear()
        if self._closed or self._unheld or self._ids.total() < MAX_OWED:
            self._room.set()
            return
        if not self._said:
            self._said = True
            self._say(f"the MCP client has {MAX_OWED} requests whose answers it has not taken "
                      "(it reads them slower than it asks, or not at all): its next messages "
                      "are read as those answers go out")
        self._room.clear()


class _Counting:
    """The SDK's write stream (`WriteStream`), with `owed` told of each answer the writer has
    taken (or that will never go out: the stream is closed)."""

    def __init__(self, inner: Any, owed: Owed) -> None:
        self._inner, self._owed = inner, owed

    async def send(self, item: SessionMessage, /) -> None:
        try:
            await self._inner.send(item)
        finally:
            self._owed.taken(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Counting:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc_val: BaseException | None, exc_tb: TracebackType | None) -> None:
        await self.aclose()
