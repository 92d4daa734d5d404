"""The MCP client's messages on stdin, read on the event loop: no thread blocked in a read, so the
session can end at once (a signal ends it as EOF does), which the SDK's threaded reader cannot."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import re
import stat

from watchrun.output.jsonl import valid_value

__all__ = ["StdinLines"]

MAX_LINE = 4 << 20
"""A longer message is cut: what reaches the SDK is not JSON, which it drops unanswered (as it
drops any line that is not a JSON-RPC message)."""
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class StdinLines:
    """An async iterator of stdin's lines (str), for `mcp.server.stdio.stdio_server(stdin=…)`.

    Only for a pipe or a socket (what MCP clients give): stdin is duplicated onto a private
    descriptor read in non-blocking mode, and fd 0 is pointed at /dev/null, so a child or a stray
    read gets EOF instead of the client's messages (as the SDK does). A terminal or a file is left
    to the SDK's own reader (`open` returns None): a terminal's non-blocking flag would be
    shared with stdout and stderr.
    """

    def __init__(self, reader: asyncio.StreamReader, transport: asyncio.ReadTransport) -> None:
        self.reader, self.transport = reader, transport

    @classmethod
    async def open(cls) -> StdinLines | None:
        try:
            mode = os.fstat(0).st_mode
        except OSError:
            return None
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
            return None
        fd = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
        null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.dup2(null, 0)
        finally:
            os.close(null)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=MAX_LINE)
        pipe = os.fdopen(fd, "rb", buffering=0)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), pipe)
        return cls(reader, transport)

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> str:
        try:
            line = await self.reader.readline()
        except ValueError:  # longer than MAX_LINE: the part read so far is dropped
            return "\n"
        if not line:
            raise StopAsyncIteration
        return _valid_line(line.decode("utf-8", errors="replace"))

    def close(self) -> None:
        """End the lines now (EOF for the SDK: the session ends) and close the descriptor."""
        self.reader.feed_eof()
        if not self.transport.is_closing():
            self.transport.close()


def _valid_line(line: str) -> str:
    """`line` with each lone surrogate in its JSON (`"\\udcff"`, legal JSON but not Unicode) made
    U+FFFD: the SDK's parser refuses such a message, and drops it unanswered, so its client
    would wait for the reply forever; cleaned, the request is answered like any other."""
    if _SURROGATE_ESCAPE.search(line) is None:
        return line
    try:
        value = json.loads(line)
    except ValueError:
        return line
    valid = valid_value(value)
    return line if valid == value else json.dumps(valid, ensure_ascii=False) + "\n"
