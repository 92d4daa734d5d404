"""The answers to the MCP client on stdout, written on the event loop: a client that stops
reading holds no thread in a write (the SDK's writer, a thread blocked on a full pipe, kept the
session and everything it started alive for as long as the client kept its end open), so the
session can still end when stdin closes or a signal comes."""

from __future__ import annotations

import asyncio
import os

from watchrun.mcp.pipes import claim_pipe

__all__ = ["StdoutLines"]


class StdoutLines:
    """An async text file for `mcp.server.stdio.stdio_server(stdout=…)`: `write` queues, `flush`
    waits until the pipe takes it, `abort` drops what is queued (a `flush` waiting then raises
    ConnectionResetError). Only for a pipe or a socket: stdout is duplicated onto a private
    descriptor written in non-blocking mode, and fd 1 is pointed at stderr, so a child's or a
    stray print goes there, never between the answers (as the SDK does). A terminal or a file
    is left to the SDK's own writer (`open` returns None)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._given = 0
        self.aborted = False
        """Whether `abort` cut the answers (then a write that fails is no sign of the client)."""
        # (by asyncio's default a `drain` returns with up to 64 KiB still queued: answers the
        # pipe never took, lost unsaid when the session ends)
        writer.transport.set_write_buffer_limits(high=0)

    @classmethod
    async def open(cls) -> StdoutLines | None:
        fd = claim_pipe(1, lambda: os.dup(2))
        return None if fd is None else await cls.of_fd(fd)

    @classmethod
    async def of_fd(cls, fd: int) -> StdoutLines:
        """Answers written to `fd` (a pipe or a socket, which it now owns)."""
        loop = asyncio.get_running_loop()
        pipe = os.fdopen(fd, "wb", buffering=0)
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                            pipe)
        return cls(asyncio.StreamWriter(transport, protocol, None, loop))

    async def write(self, text: str) -> None:
        data = text.encode("utf-8")
        self._given += len(data)
        self._writer.write(data)

    @property
    def waiting(self) -> bool:
        """Whether bytes written are waiting for the pipe to take them."""
        return self._writer.transport.get_write_buffer_size() > 0

    @property
    def taken(self) -> int:
        """How many bytes the pipe has taken so far (it grows while the client reads)."""
        return self._given - self._writer.transport.get_write_buffer_size()

    async def flush(self) -> None:
        await self._writer.drain()

    def abort(self) -> None:
        self.aborted = True
        if not self._writer.transport.is_closing():  # (the client may have closed its end)
            self._writer.transport.abort()
