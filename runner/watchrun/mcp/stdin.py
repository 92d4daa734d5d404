"""The MCP client's messages on stdin, read on the event loop: no thread blocked in a read, so the
session can end at once (a signal ends it as EOF does), which the SDK's threaded reader cannot.
Every request gets an answer: one the SDK would drop unanswered is answered here instead
(`vet.py`), and the SDK sees the end of stdin only once every answer owed went out (it cancels
what it still handles then). While the session owes MAX_OWED answers, no more is read
(`owed.py`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from watchrun.mcp.owed import Owed
from watchrun.mcp.pipes import claim_pipe, feed
from watchrun.mcp.vet import HEAD, Error, head_id, vet

__all__ = ["StdinLines"]

MAX_LINE = 4 << 20
"""A longer message is not read: it is discarded up to its newline and answered with an error
(-32600), with its `id` when that is found in its first HEAD bytes, else `null`."""
_HANGUP = select.POLLHUP | getattr(select, "POLLRDHUP", 0)


class StdinLines:
    """An async iterator of stdin's lines (str), for `mcp.server.stdio.stdio_server(stdin=…)`.

    Stdin is read from a private descriptor in non-blocking mode, and fd 0 is pointed at
    /dev/null, so a child or a stray read gets EOF instead of the client's messages (as the SDK
    does): a pipe or a socket (what MCP clients give) itself, a file or a terminal through a pipe
    a thread fills (`pipes.feed`: a terminal's non-blocking flag would be shared with stdout
    and stderr), so each gets the same answers.
    """

    def __init__(self, reader: asyncio.StreamReader, transport: asyncio.ReadTransport,
                 ended: asyncio.Event) -> None:
        self.reader, self.transport = reader, transport
        self._write: Any = None
        self._writable = asyncio.Event()
        self._owed: Owed | None = None
        self._closed = self._ending = False
        self.ended = ended
        """Set when the client's messages end (stdin closed, or `close`), however many of them
        are still to be handled (`hung_up` tells when reading is paused)."""

    @classmethod
    async def open(cls) -> StdinLines:
        def devnull() -> int:
            return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        fd = claim_pipe(0, devnull)
        if fd is not None:
            return await cls.of_fd(fd)
        fd, whole = feed(0, devnull)
        lines = await cls.of_fd(fd)
        if whole:  # (a file's messages are all there: they end at its end)
            lines.ended.set()
        return lines

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
            data, overlong = (b"", False) if self._ending else await self._line()
            if not data or self._ending:  # (after `end`: what was read since is dropped)
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

    def end(self) -> None:
        """The client's messages end here (a signal), as at stdin's end: no more is read (what
        was read and not handed on yet is not), and the SDK gets EOF once no answer is owed."""
        if self._ending or self._closed:
            return
        self._ending = True
        if self._owed is not None:
            self._owed.ended()  # (a wait for room ends)
        self._stop_reading()

    @property
    def ending(self) -> bool:
        """Whether `end` was called."""
        return self._ending

    @property
    def closed(self) -> bool:
        """Whether `close` was called: the SDK has its EOF, or will at its next line."""
        return self._closed

    def hung_up(self) -> bool:
        """Whether the client's messages have ended (`ended`). While reading is paused (more
        than twice MAX_LINE read and not handed on, as the answers owed are not taken), the
        pipe's end cannot be read: it is looked for as a hang-up then (POLLHUP: no writer is
        left, whatever data is still in the pipe)."""
        if not (self.ended.is_set() or self.transport.is_closing()
                or self.transport.is_reading()):
            poll = select.poll()
            poll.register(self.transport.get_extra_info("pipe").fileno(), _HANGUP)
            if any(events & _HANGUP for _, events in poll.poll(0)):
                self.ended.set()
        return self.ended.is_set()

    def close(self) -> None:
        """End the lines now (EOF for the SDK: the session ends) and close the descriptor."""
        self._closed = True
        if self._owed is not None:
            self._owed.close()  # (a wait for room ends)
        self._stop_reading()

    def _stop_reading(self) -> None:
        self.ended.set()
        self.reader.feed_eof()
        if not self.transport.is_closing():
            self.transport.close()


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
