"""Helpers for the file-source tests: a recording SourceContext and a running-source harness."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from test_inode_generation import generation_of

from watchrun.clock import SystemClock
from watchrun.config.model import Limits, WatcherSpec
from watchrun.events import Chunk
from watchrun.notify import Notifier
from watchrun.sources.checkpoints import CheckpointStore
from watchrun.sources.file import FileSource

MODES = ["inotify", "poll"]
POLL_MS = 20
LIMITS = Limits(rotate_wait_ms=500)
"""Tests release rotated-away files sooner than the default 5 s."""


def open_fds_to(path: Path) -> list[str]:
    """Targets of this process's descriptors that point at `path` (deleted or not)."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(path)):
            out.append(target)
    return out


MADE: list[Notifier] = []
"""The notifiers `notifier_for` made: conftest closes them after each test (left to the
collector, each held an inotify instance, and one worker running test_file_tail.py held 43 of
the user's 128 to its end: the runners other tests started then polled, `inotify_init1: Too
many open files`)."""


def notifier_for(mode: str, poll_ms: int = POLL_MS) -> Notifier:
    n = Notifier(poll_ms, force_poll=(mode == "poll"))
    assert n.mode == mode
    MADE.append(n)
    return n


def close_notifiers() -> None:
    """Close what `notifier_for` made."""
    while MADE:
        MADE.pop().close()


def spec_for(path: Path, *, from_start: bool = False, wid: str = "w") -> WatcherSpec:
    return WatcherSpec(id=wid, label=wid, pattern="x", path=path, from_start=from_start)


class Recorder:
    """A SourceContext that keeps everything it is given."""

    def __init__(self) -> None:
        self.chunks: list[Chunk] = []
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def chunk(self, chunk: Chunk) -> None:
        self.chunks.append(chunk)

    async def event(self, kind: str, **fields: Any) -> None:
        self.events.append((kind, fields))

    def lines(self) -> list[bytes]:
        out: list[bytes] = []
        for c in self.chunks:
            assert c.data.endswith(b"\n"), c
            out.extend(c.data[:-1].split(b"\n"))
        return out

    def texts(self) -> list[str]:
        return [b.decode() for b in self.lines()]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [f for k, f in self.events if k == kind]


async def wait_for(cond: Callable[[], bool], timeout: float = 15.0, what: str = "") -> None:
    """Wait for a condition, polling it; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or cond}")
        await asyncio.sleep(0.005)


class Tail:
    """A FileSource running as a task, with its recorder; `async with` stops it."""

    def __init__(
        self,
        path: Path,
        notifier: Notifier,
        store: CheckpointStore,
        *,
        from_start: bool = False,
        once: bool = False,
        rec: Recorder | None = None,
        read_size: int = 256 * 1024,
        limits: Limits | None = None,
        wid: str = "w",
    ) -> None:
        self.rec = rec or Recorder()
        self.source = FileSource(
            spec_for(path, from_start=from_start, wid=wid),
            limits or LIMITS,
            store,
            notifier,
            SystemClock(),
            once=once,
            read_size=read_size,
        )
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Tail:
        self.task = asyncio.create_task(self.source.run(self.rec))
        await self.until(lambda: bool(self.rec.of("start")), "start record")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task

    async def until(self, cond: Callable[[], bool], what: str = "", timeout: float = 15) -> None:
        def check() -> bool:
            if self.task is not None and self.task.done() and not self.task.cancelled():
                self.task.result()  # a crashed source fails the test with its exception
            return cond()

        await wait_for(check, timeout, what)

    async def lines(self, n: int) -> list[str]:
        await self.until(lambda: len(self.rec.lines()) >= n, f"{n} lines")
        return self.rec.texts()


def numbered(path: Path) -> dict[str, int]:
    """The `inodeGen` field of a `rotate` record into `path`'s file (none where its file system
    keeps no inode generation numbers, as tmpfs)."""
    gen = generation_of(path)
    return {} if gen is None else {"inodeGen": gen}


def append(path: Path, *lines: str, end: str = "\n") -> None:
    with open(path, "a") as f:
        f.write("".join(line + end for line in lines))


def write_fd(fd: int, text: str) -> None:
    os.write(fd, text.encode())


def run(coro: Any) -> Any:
    return asyncio.run(coro)
