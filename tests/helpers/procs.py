"""Helpers for process tests: condition waits, /proc checks, recording contexts, fake time."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shlex
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from recordcheck import record_errors

from watchrun.clock import SystemClock
from watchrun.config.model import Limits, WatcherSpec
from watchrun.events import Chunk, SourceContext
from watchrun.process.spawn import Spawner
from watchrun.sources.command import CommandSource, ProcState

PROGS = Path(__file__).resolve().parent.parent / "progs"
PYTHON = sys.executable
DEADLINE_S = 20.0


async def until(cond: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    """Poll `cond` until it holds, yielding to the loop; fail naming `what` after `timeout`."""
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.01)


def proc_state(pid: int) -> str | None:
    """The /proc state letter of `pid` (Z = zombie), or None when no such process exists."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return raw[raw.rindex(b")") + 2 :].split()[0].decode()


def read_pids(path: Path) -> list[int]:
    if not path.exists():
        return []
    return [int(x) for x in path.read_text().split()]


def survivors(pids: list[int]) -> dict[int, str]:
    """Recorded pids that still exist, with their state (a zombie counts: nobody reaped it)."""
    return {p: s for p in pids if (s := proc_state(p)) is not None}


class Recorder:
    """A SourceContext that keeps every chunk and event, in order, checking each event
    against the record schema."""

    def __init__(self) -> None:
        self.chunks: list[Chunk] = []
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.on_event: Callable[[str, dict[str, Any]], None] | None = None

    async def chunk(self, chunk: Chunk) -> None:
        self.chunks.append(chunk)

    async def event(self, kind: str, **fields: Any) -> None:
        """Keeps the event; fails the test if, as a record, it would not match the schema."""
        seq = len(self.events) + 1
        envelope = {"schema": 1, "seq": seq, "cursor": f"cmd:{seq:016x}",
                    "ts": "2026-05-16T12:00:00.000Z", "kind": kind}
        assert not (errors := record_errors({**envelope, **fields})), (kind, fields, errors)
        self.events.append((kind, fields))
        if self.on_event is not None:
            self.on_event(kind, fields)

    def kinds(self) -> list[str]:
        return [k for k, _ in self.events]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [f for k, f in self.events if k == kind]

    def lines(self) -> list[tuple[int | None, int, bytes]]:
        """(run, line number, line) for every line delivered."""
        out = []
        for c in self.chunks:
            for i, line in enumerate(c.data.split(b"\n")[:-1]):
                out.append((c.run, c.line_no + i, line))
        return out


class FakeClock:
    """A clock the test moves by hand: `advance` moves monotonic, elapsed and wall time;
    `suspend` elapsed and wall time only (the machine slept: Linux's monotonic clock stood
    still)."""

    def __init__(self, wall: float = 1_700_000_000.0) -> None:
        self.mono = 1000.0
        self.wall = wall
        self.slept = 0.0

    def monotonic(self) -> float:
        return self.mono

    def elapsed(self) -> float:
        return self.mono + self.slept

    def now(self) -> float:
        return self.wall

    def advance(self, seconds: float) -> None:
        self.mono += seconds
        self.wall += seconds

    def suspend(self, seconds: float) -> None:
        self.slept += seconds
        self.wall += seconds


class FakeSleep:
    """Records requested delays and moves the fake clock instead of waiting."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        self.clock.advance(seconds)
        await asyncio.sleep(0)


class GatedSleep:
    """A sleep that records the delay and returns only when the test lets it."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.delays: list[float] = []
        self.gate = asyncio.Semaphore(0)

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await self.gate.acquire()
        self.clock.advance(seconds)


class Counter:
    """Counts lines without keeping them; can hold the first chunk until released."""

    def __init__(self, hold: bool = False) -> None:
        self.lines = self.bytes = 0
        self.last = b""
        self.release = asyncio.Event()
        if not hold:
            self.release.set()
        self.held = asyncio.Event()

    async def chunk(self, chunk: Chunk) -> None:
        self.held.set()
        await self.release.wait()
        self.lines += chunk.data.count(b"\n")
        self.bytes += len(chunk.data)
        self.last = chunk.data[chunk.data.rfind(b"\n", 0, -1) + 1 :]

    async def event(self, kind: str, **fields: Any) -> None:
        pass


def vm_hwm_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc/self/status")


def tree_command(pidfile: Path, *flags: str) -> str:
    """A shell that ignores TERM and leaves: a TERM-ignoring child, a setsid'd child, a python
    child that ignores TERM and double-forks a setsid'd daemon (orphaned at once)."""
    p = shlex.quote(str(pidfile))
    prog = shlex.quote(str(PROGS / "unkillable.py"))
    return (f"trap '' TERM; echo $$ >> {p}; sleep 1000 & echo $! >> {p}; "
            f"setsid sleep 1000 & echo $! >> {p}; "
            f"{shlex.quote(PYTHON)} {prog} {p} --daemon {' '.join(flags)}; wait")


TREE_SIZE = 5  # sh, sleep, setsid sleep, unkillable.py, its daemon


def spec(command: str | tuple[str, ...], **kw: Any) -> WatcherSpec:
    return WatcherSpec(id="cmd", label="cmd", pattern="x", command=command, **kw)


def source(s: WatcherSpec, clock: Any = None, sleep: Any = None, **kw: Any) -> CommandSource:
    extra = {"sleep": sleep} if sleep is not None else {}
    return CommandSource(s, kw.pop("limits", Limits()), clock or SystemClock(), Spawner(),
                         rng=random.Random(7), **extra, **kw)


def state(src: CommandSource) -> ProcState:
    return src.state  # read through a call: mypy would narrow the attribute across awaits


def run_to_end(src: CommandSource, ctx: SourceContext, timeout: float = 20) -> None:
    asyncio.run(asyncio.wait_for(src.run(ctx), timeout))


@contextlib.contextmanager
def fd_holder(timeout_s: float = 30.0) -> Iterator[tuple[str, list[int]]]:
    """A unix socket (an abstract address: no path limit) whose listener takes the one fd a
    process sends it and holds it open until the block ends: a process outside every tree the
    runner knows, keeping a pipe open. Yields the address and the fds received."""
    address = f"\0watchrun-test-{os.getpid()}-{time.monotonic_ns()}"
    held: list[int] = []
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(address)
        server.listen(1)
        server.settimeout(timeout_s)

        def hold() -> None:
            conn, _ = server.accept()
            with conn:
                held.extend(socket.recv_fds(conn, 1, 1)[1])

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            yield address, held
        finally:
            holder.join()
            for fd in held:
                os.close(fd)
