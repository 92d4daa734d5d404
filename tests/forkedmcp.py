"""Test helper: `watchrun mcp` servers forked by tests/forkserver.py's `mcp` server (which has
imported the MCP SDK once), not started as new interpreters that each import it (~1.2 s of CPU
a server). `stdio_client` stays the SDK's own, with its framing, its shutdown (stdin closed, a
grace period, SIGTERM then SIGKILL to the process group) and its reading of the exit: only the
process it is given comes from the fork server, as an anyio `Process` (`install()`). A server
the fork server declines (another interpreter setting, a large request) is started by the SDK
as before. `spawn_mcp` is the same for a client that writes and reads the pipes itself."""

from __future__ import annotations

import errno
import os
import signal
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.abc
import forkserver
import mcp.client.stdio as sdk_stdio
from liverunner import watchrun_bin


class _PipeEnd:
    """One end of a pipe this process owns, non-blocking; closing it wakes whoever waits on it."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd

    async def aclose(self) -> None:
        if self._fd >= 0:
            anyio.notify_closing(self._fd)
            os.close(self._fd)
            self._fd = -1


class _PipeReceive(_PipeEnd, anyio.abc.ByteReceiveStream):
    """The read end, read as the event loop says it is ready."""

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            if self._fd < 0:
                raise anyio.ClosedResourceError
            try:
                data = os.read(self._fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if not data:
                raise anyio.EndOfStream
            return data


class _PipeSend(_PipeEnd, anyio.abc.ByteSendStream):
    """The write end, written as the event loop says it can."""

    async def send(self, item: bytes) -> None:
        view = memoryview(item)
        while view:
            if self._fd < 0:
                raise anyio.ClosedResourceError
            try:
                view = view[os.write(self._fd, view):]
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    raise anyio.BrokenResourceError from exc
                raise


class ForkedProcess(anyio.abc.Process):
    """A forked `watchrun mcp` as anyio's `Process`: its pid, its exit status (from the fork
    server, its parent), signals, and its stdin and stdout pipes."""

    def __init__(self, forked: forkserver.Forked, stdin: int, stdout: int) -> None:
        self.forked = forked
        self._stdin, self._stdout = _PipeSend(stdin), _PipeReceive(stdout)

    async def wait(self) -> int:
        while (code := self.forked.poll()) is None:
            await anyio.sleep(0.01)
        return code

    def terminate(self) -> None:
        self.forked.terminate()

    def kill(self) -> None:
        self.forked.kill()

    def send_signal(self, signal: signal.Signals) -> None:  # type: ignore[override]
        self.forked.send_signal(signal)

    @property
    def pid(self) -> int:
        return self.forked.pid

    @property
    def returncode(self) -> int | None:
        return self.forked.poll()

    @property
    def stdin(self) -> anyio.abc.ByteSendStream:
        return self._stdin

    @property
    def stdout(self) -> anyio.abc.ByteReceiveStream:
        return self._stdout

    @property
    def stderr(self) -> None:
        return None

    async def aclose(self) -> None:
        await self._stdin.aclose()
        await self._stdout.aclose()


def spawn_mcp(argv: list[str], env: dict[str, str], cwd: Path,
              errlog: IO[Any]) -> tuple[forkserver.Forked, int, int] | None:
    """`argv` (`watchrun mcp ...`) forked with pipes for stdin and stdout and `errlog` as its
    stderr: the child, the write end of its stdin and the read end of its stdout; None when
    the fork server declines it."""
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    try:
        forked = forkserver.spawn(argv, env=env, cwd=cwd, stdin=to_child_r, stdout=from_child_w,
                                  stderr=errlog.fileno(), kind="mcp")
    finally:
        os.close(to_child_r)
        os.close(from_child_w)
    if forked is None:
        os.close(to_child_w)
        os.close(from_child_r)
        return None
    return forked, to_child_w, from_child_r


_sdk_create = getattr(sdk_stdio, "_create_platform_compatible_process", None)
"""The SDK's process creation (a private function: an SDK without it keeps its own)."""


started: list[int] = []
"""The pid of each process `stdio_client` started in this process, in order."""


async def _create(command: str, args: list[str], env: dict[str, str] | None = None,
                  errlog: Any = None, cwd: Path | str | None = None) -> Any:
    """The SDK's process creation, through the fork server for `watchrun mcp`."""
    process: Any = None
    if command == watchrun_bin() and args[:1] == ["mcp"] and env is not None and cwd is not None:
        errlog.flush()
        got = spawn_mcp([command, *args], env, Path(cwd), errlog)
        process = None if got is None else ForkedProcess(*got)
    if process is None:
        assert _sdk_create is not None
        process = await _sdk_create(command=command, args=args, env=env, errlog=errlog, cwd=cwd)
    started.append(process.pid)
    return process


def install() -> None:
    """Make the SDK's `stdio_client` start `watchrun mcp` through the fork server (process-wide:
    the SDK looks the function up at each start)."""
    if _sdk_create is not None:
        sdk_stdio._create_platform_compatible_process = _create  # type: ignore[attr-defined]
