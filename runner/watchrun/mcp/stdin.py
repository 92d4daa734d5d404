"""The MCP client's messages on stdin, read on the event loop: no thread blocked in a read, so the
session can end at once (a signal ends it as EOF does), which the SDK's threaded reader cannot.
Every request gets an answer: one the SDK would drop unanswered is answered here instead
(`vet.py`), and the SDK sees the end of stdin only once every answer owed went out. While the
session owes MAX_OWED answers, no more is read (`owed.py`)."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import stat
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from watchrun.mcp.owed import Owed
from watchrun.mcp.vet import HEAD, Error, head_id, vet

__all__ = ["StdinLines", "claim_pipe"]

MAX_LINE = 4 << 20
"""A longer message is not read: it is discarded up to its newline and answered with an error
(-32600), with its `id` when that is found in its first HEAD bytes, else `null`."""


class StdinLines:
    """An async iterator of stdin's lines (str), for `mcp.server.stdio.stdio_server(stdin=…)`.

    Only for a pipe or a socket (what MCP clients give): stdin is duplicated onto a private
    descriptor read in non-blocking mode, and fd 0 is pointed at /dev/null, so a child or a stray
    read gets EOF instead of the client's messages (as the SDK does). A terminal or a file is left
    to the SDK's own reader (`open` returns None): a terminal's non-blocking flag would be
    shared with stdout and stderr.
    """

    def __init__(self, reader: asyncio.StreamReader, transport: asyncio.ReadTransport,
                 ended: asyncio.Event) -> None:
        self.reader, self.transport = reader, transport
        self._write: Any = None
        self._writable = asyncio.Event()
        self._owed: Owed | None = None
        self._closed = False
        self.ended = ended
        """Set when the client's messages end (stdin closed, or `close`), however many of them
        are still to be handled."""

    @classmethod
    async def open(cls) -> StdinLines | None:
        fd = claim_pipe(0, lambda: os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
        return None if fd is None else await cls.of_fd(fd)

    @classmethod
    async def of_fd(cls, fd: int) -> StdinLines:
        """The lines read from `fd` (a pipe or a socket, which it now owns): stdin's private
        duplicate, or a pipe of a session served in a test's process."""
        loop = asyncio.get_running_loop()
        reader, ended = asyncio.StreamReader(limit=MAX_LINE), asyncio.Event()
        pipe = os.fdopen(fd, "rb", buffering=0)
        transport, _ = await loop.connect_read_pipe(lambda: _Ending(reader, ended), pipe)
        return cls(reader, transport, ended)

    def answer_to(self, write: Any, owed: Owed | None = None) -> None:
        """Send the errors answered here on `write`, the SDK's stream of SessionMessages to
        stdout (until this is called, they wait); tell `owed` of each message handed on, and
        read none while it has no room."""
        self._write, self._owed = write, owed
        self._writable.set()

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> str:
        while True:
            if self._owed is not None:
                await self._owed.room()
            if self._closed:  # (what was read and not handed on yet is not)
                raise StopAsyncIteration
            data, overlong = await self._line()
            if not data:
                if self._owed is not None:  # (the SDK cancels what it is still handling at
                    await self._owed.none()  # EOF: it gets EOF once all is answered or `close`)
                raise StopAsyncIteration
            if overlong:
                await self._answer((head_id(data.decode("utf-8", errors="replace")),
                                    types.INVALID_REQUEST, f"the message is longer than "
                                    f"{MAX_LINE} bytes ({MAX_LINE >> 20} MiB); it was not read"))
                continue
            line, error, message = vet(data.decode("utf-8", errors="replace"))
            if error is None:
                if self._owed is not None and message is not None:
                    self._owed.read(message)
                return line
            await self._answer(error)

    async def _line(self) -> tuple[bytes, bool]:
        """The next line (b"" at EOF), and whether it was longer than MAX_LINE: then only its
        first HEAD bytes are kept, and the rest is read and discarded up to its newline."""
        try:
            return await self.reader.readuntil(b"\n"), False
        except asyncio.IncompleteReadError as exc:  # EOF: the last line has no newline
            return exc.partial, False
        except asyncio.LimitOverrunError as exc:
            head = (await self.reader.read(exc.consumed))[:HEAD]
        while True:
            try:
                await self.reader.readuntil(b"\n")
                return head, True
            except asyncio.IncompleteReadError:
                return head, True
            except asyncio.LimitOverrunError as exc:
                await self.reader.read(exc.consumed)

    async def _answer(self, error: Error) -> None:
        rid, code, message = error
        await self._writable.wait()
        reply = types.JSONRPCError(jsonrpc="2.0", id=rid,
                                   error=types.ErrorData(code=code, message=message))
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self._write.send(SessionMessage(reply))

    def close(self) -> None:
        """End the lines now (EOF for the SDK: the session ends) and close the descriptor."""
        self._closed = True
        if self._owed is not None:
            self._owed.close()  # (a wait for room ends)
        self.ended.set()
        self.reader.feed_eof()
        if not self.transport.is_closing():
            self.transport.close()


def claim_pipe(fd: int, diversion: Callable[[], int]) -> int | None:
    """When `fd` (stdin or stdout) is a pipe or a socket: the client's end moved to a private
    close-on-exec descriptor (returned), and `fd` pointed at `diversion()` (which is closed
    then), so a child or a stray read or print never touches the client's messages. None for
    a terminal or a file (left as it is: a terminal's non-blocking flag would be shared)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return None
    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    other = diversion()
    try:
        os.dup2(other, fd)
    finally:
        os.close(other)
    return private


class _Ending(asyncio.StreamReaderProtocol):
    """Says when the pipe ended (`ended`), before its buffered lines are read."""

    def __init__(self, reader: asyncio.StreamReader, ended: asyncio.Event) -> None:
        super().__init__(reader)
        self._ended = ended

    def eof_received(self) -> bool:
        self._ended.set()
        return bool(super().eof_received())

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended.set()
        super().connection_lost(exc)
