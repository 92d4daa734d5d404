"""A command watcher: runs a command, frames its merged output, restarts or schedules it."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import deque
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import Any

from watchrun.clock import Clock, iso_ts
from watchrun.config.model import Limits, WatcherSpec
from watchrun.cron import Ticks
from watchrun.events import Chunk, SourceContext
from watchrun.match.framing import LineFramer
from watchrun.process.spawn import ExitInfo, Proc, Spawner, SpawnError
from watchrun.sources.leftovers import TreeStop, end_holders, end_rest
from watchrun.sources.long_line import growing, say
from watchrun.sources.restarts import (
    HEALTHY_S,
    START_LIMIT,
    START_WINDOW_S,
    backoff_ms,
    should_restart,
)
from watchrun.sources.unreadable import Beginning

READ_SIZE = 64 * 1024
DRAIN_MIN_S = 0.5  # after the exit, wait at least this long for EOF before stopping the tree

Echo = Callable[[bytes, bool], Awaitable[None]]
"""`echo(lines, wait)`: where a once run shows its commands' output as it comes. Awaited, so a
reader that does not keep up holds the command (its pipe fills), never the event loop; with
`wait` false (the run is stopping) what the reader has no room for is left out instead."""


class ProcState(StrEnum):
    STOPPED = "stopped"
    STARTING = "starting"
    RUNNING = "running"
    BACKOFF = "backoff"
    EXITED = "exited"
    FATAL = "fatal"
    WAITING = "waiting"


class CommandSource:
    """Runs `spec.command` once, under a restart policy, or on a cron schedule."""

    def __init__(self, spec: WatcherSpec, limits: Limits, clock: Clock, spawner: Spawner, *,
                 once: bool = False, echo: Echo | None = None,
                 rng: random.Random | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        if spec.command is None:
            raise ValueError(f"watcher {spec.id!r} has no command")
        self.spec, self.limits, self.clock, self.spawner = spec, limits, clock, spawner
        self.once, self.echo, self.sleep = once, echo, sleep
        self.rng = rng or random.Random()
        self.state = ProcState.STOPPED
        self.run_no = 0
        self.last_exit: ExitInfo | None = None
        self.pid: int | None = None
        self._starts: deque[float] = deque(maxlen=START_LIMIT)  # the last starts (elapsed)
        self._started = 0.0  # monotonic start of the current run
        self._beginning = Beginning()  # (the current run's output's)
        self._framer: LineFramer | None = None  # (the current run's output's)
        self.ready = asyncio.Event()
        """Set once the first start has been attempted (its `start` or `error` record is
        written), or at once for a schedule. The runner sends READY=1 after every source."""
        self.start_error: str | None = None
        """Why the first start failed (a spawn error: ENOENT, EACCES, a missing `cwd` …), set
        before `ready`: `add` and `start` answer `start_failed` with it (runtime/manage.py)."""
        self.could_not_start = False
        """The last start failed: the spawner said the command could not be started, whatever
        the errno (a once run's verdict: ERROR, "could not be started")."""

    @property
    def _grace(self) -> float:
        """stopTimeout in seconds, as `limits` says when it is needed (a reload sets them)."""
        return self.limits.stop_timeout_ms / 1000

    @property
    def long_line(self) -> dict[str, Any] | None:
        """`status`'s `longLine`: a line growing past limits.maxLineBytes (`long_line.py`)."""
        return None if self._framer is None else growing(self._framer, run=self.run_no)

    async def run(self, ctx: SourceContext) -> None:
        """Until cancelled, or until the command is done for good (EXITED or FATAL; a FATAL
        start limit writes its own `stop` record)."""
        try:
            if self.once or self.spec.schedule is None:
                await self._supervise(ctx)
            else:
                self.ready.set()  # waiting for the first tick is where a schedule starts
                await self._schedule(ctx, self.spec.schedule)
        except asyncio.CancelledError:
            # any -> STOPPED. The canceller writes the `stop` record: it knows the reason
            # (shutdown, reload, removed, requested); the run's `exit` record is already out.
            self.state = ProcState.STOPPED
            raise

    async def _supervise(self, ctx: SourceContext) -> None:
        attempt = 0
        while True:
            started = self.clock.monotonic()
            info = await self._one(ctx, attempt)
            if self.once or not should_restart(self.spec.restart, info):
                # STARTING -> FATAL: could not start and may not retry.
                # RUNNING -> EXITED: done, the policy does not restart this exit.
                self.state = ProcState.FATAL if info is None else ProcState.EXITED
                return
            if info is not None and self.clock.monotonic() - started >= HEALTHY_S:
                attempt = 0  # a healthy run resets the backoff; the start window stays
            if self._start_limited():
                self.state = ProcState.FATAL  # EXITED -> FATAL: too many starts, give up
                await ctx.event("stop", reason="start-limit",
                                message=f"{START_LIMIT} starts in {START_WINDOW_S / 60:g} minutes; "
                                        "giving up")
                return
            attempt += 1
            delay = backoff_ms(self.spec.restart_delay_ms, attempt, self.rng)
            self.state = ProcState.BACKOFF  # EXITED (or failed start) -> BACKOFF
            await ctx.event("restart", attempt=attempt, delayMs=delay, run=self.run_no + 1)
            await self.sleep(delay / 1000)  # BACKOFF -> STARTING when it returns

    def _start_limited(self) -> bool:
        now = self.clock.elapsed()  # (a window: the time the machine slept counts)
        while self._starts and now - self._starts[0] >= START_WINDOW_S:
            self._starts.popleft()
        return len(self._starts) >= START_LIMIT

    async def _schedule(self, ctx: SourceContext, cron: str) -> None:
        """Run at every cron tick (wall clock, local time); skip a tick while a run is on."""
        ticks = Ticks(cron, self.clock)
        task: asyncio.Task[ExitInfo | None] | None = None
        try:
            while True:
                if task is None or task.done():
                    self.state = ProcState.WAITING  # STOPPED/EXITED -> WAITING
                while wait := ticks.wait():
                    await self._sleep_or_finish(wait, task)
                tick = ticks.take()  # (run or skipped)
                if task is not None and not task.done():
                    await ctx.event("error", code="tick-skipped", run=self.run_no, message=(
                        f"tick {iso_ts(tick)} skipped: run {self.run_no} is still running"))
                    continue
                if task is not None:
                    task.result()  # a run that failed (not the command: the pipeline) raises
                task = asyncio.ensure_future(self._one(ctx))  # WAITING -> STARTING
        finally:
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _sleep_or_finish(self, seconds: float,
                               task: asyncio.Task[ExitInfo | None] | None) -> None:
        sleeper: asyncio.Future[Any] = asyncio.ensure_future(self.sleep(seconds))
        try:
            if task is not None and not task.done():
                await asyncio.wait([sleeper, task], return_when=asyncio.FIRST_COMPLETED)
                if task.done():
                    task.result()
                    self.state = ProcState.WAITING  # EXITED -> WAITING: run ended between ticks
            await sleeper
        finally:
            sleeper.cancel()

    async def _one(self, ctx: SourceContext, attempt: int = 0) -> ExitInfo | None:
        """One run: start, read to EOF and exit, record. None if it could not start. `attempt`:
        the restart (policy) this run is, said on its `start` record (0: not a restart)."""
        self.run_no += 1
        n = self.run_no
        self.state = ProcState.STARTING  # STOPPED/BACKOFF/WAITING -> STARTING
        self._starts.append(self.clock.elapsed())
        spec = self.spec
        assert spec.command is not None
        try:
            proc = await self.spawner.spawn(spec.command, cwd=spec.cwd, env=spec.env)
        except SpawnError as exc:
            self.could_not_start = True
            await ctx.event("error", code=exc.errno_name, message=exc.message, run=n)
            if not self.ready.is_set():
                self.start_error = exc.message
            self.ready.set()
            return None  # the caller moves STARTING -> BACKOFF or FATAL
        self.could_not_start = False
        self.pid = proc.pid
        self._started = self.clock.monotonic()
        self.state = ProcState.RUNNING  # STARTING -> RUNNING
        try:
            command = spec.command if isinstance(spec.command, str) else list(spec.command)
            again = {"attempt": attempt} if attempt else {}
            await ctx.event("start", run=n, pid=proc.pid, command=command, **again)
            self.ready.set()
            info = await self._pump(proc, ctx, n)
        except BaseException:
            await asyncio.shield(proc.terminate(self._grace))  # never leave a tree behind
            raise
        finally:
            self.pid = None
            proc.close()
        self.last_exit = info
        self.state = ProcState.EXITED  # RUNNING -> EXITED
        return info

    async def _pump(self, proc: Proc, ctx: SourceContext, n: int) -> ExitInfo:
        framer = self._framer = LineFramer(self.limits.max_line_bytes)
        self._beginning = Beginning()
        framer.stamp(run=n)
        stop, eof = TreeStop(), False  # (eof: the output was read to its end)
        try:
            stopped = await self._read(proc, framer, ctx, n, stop)
            eof = True
            info = stopped or await proc.wait()
            self.last_exit = info  # (it exited: a stop now may end what it left, not the run)
            await self._deliver(ctx, framer.finish())  # the last line, even without a newline
            if stopped is None:
                info = await stop.run(end_rest(proc, self._grace, ctx, n, info))
        except asyncio.CancelledError:  # stopping: the echo no longer waits for its reader
            # (a stop of the tree under way goes on: its grace, its record; see TreeStop)
            stopping = stop.under_way or asyncio.ensure_future(proc.terminate(self._grace))
            try:
                await asyncio.shield(stopping)
                if not eof or stop.under_way is None:
                    with contextlib.suppress(TimeoutError):  # the tree is dead: EOF is near
                        await asyncio.wait_for(self._read(proc, framer, ctx, n, stop,
                                                          wait=False), self._grace + 1)
                    await self._deliver(ctx, framer.finish(), wait=False)
            finally:  # (also when the stop's owner, its budget spent, cancels again)
                with contextlib.suppress(asyncio.CancelledError):  # (but not a third time)
                    self.last_exit = info = await asyncio.shield(stopping)
                    await self._finish(ctx, n, info)
            raise
        await self._finish(ctx, n, info)
        return info

    async def _finish(self, ctx: SourceContext, n: int, info: ExitInfo) -> None:
        """The run's `exit` record."""
        extra = {"signals": list(info.signals_sent), "stragglers": info.stragglers}
        duration = round((self.clock.monotonic() - self._started) * 1000)
        await ctx.event("exit", run=n, exitCode=info.exit_code, signal=info.signal,
                        status=info.status, durationMs=duration,
                        **(extra if info.signals_sent else {}))

    async def _read(self, proc: Proc, framer: LineFramer, ctx: SourceContext, n: int,
                    stop: TreeStop, *, wait: bool = True) -> ExitInfo | None:
        """Read to EOF, one read at a time: while a chunk is being written nothing is read, so
        a flooding child blocks on its full pipe. If the command exits but what it started
        keeps the output open for stopTimeout, stop the tree by `stop` (returns that info)."""
        loop = asyncio.get_running_loop()
        exited = asyncio.ensure_future(proc.wait())
        reading: asyncio.Future[bytes] | None = None
        stopped: ExitInfo | None = None
        deadline: float | None = None
        drain_s = max(self._grace, DRAIN_MIN_S)
        try:
            while True:
                reading = reading or asyncio.ensure_future(proc.read(READ_SIZE))
                timeout = None
                if exited.done():
                    deadline = deadline or loop.time() + drain_s
                    timeout = max(0.0, deadline - loop.time())
                waits: list[asyncio.Future[Any]] = [reading]
                if not exited.done():
                    waits.append(exited)
                done, _ = await asyncio.wait(waits, timeout=timeout,
                                             return_when=asyncio.FIRST_COMPLETED)
                if reading.done():
                    data, reading = reading.result(), None
                    for code, why in self._beginning.feed(data):  # (never matched)
                        await ctx.event("error", code=code, run=n,
                                        message=f"run {n}: the command's output {why}")
                    if not data:
                        return stopped
                    await self._deliver(ctx, framer.feed(data), wait=wait)
                    if len(data) < READ_SIZE:  # (all it printed so far is read)
                        await say(ctx, framer, run=n)
                elif not done and stopped is None:
                    stopped = await stop.run(end_holders(proc, self._grace, ctx, n, drain_s))
                    deadline = loop.time() + drain_s
                elif not done:
                    await ctx.event("error", code="output-held-open", run=n, unread=True,
                                    message=(f"run {n}: output still open {drain_s:g}s after "
                                             "stopping every process of the command; stopped "
                                             "reading it"))
                    return stopped
        finally:
            for task in (reading, exited):
                if task is not None:
                    task.cancel()

    async def _deliver(self, ctx: SourceContext, chunk: Chunk | None, *,
                       wait: bool = True) -> None:
        if chunk is not None:  # (stamped with run n by its framer)
            await ctx.chunk(chunk)
            if self.echo is not None:
                await self.echo(chunk.data, wait)
