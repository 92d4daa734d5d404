"""Backtracking patterns run in a worker process under a per-line time budget, never on the loop.

A thread cannot do this: CPython's `re` holds the GIL for the whole of one search, so a
backtracking search in a thread freezes the loop just the same (measured: a 0.45 s search
stalled the loop 0.45 s), and it cannot be interrupted. A process can be killed.

A chunk is first matched whole under one budget. If that runs out, the worker is killed and the
chunk's lines are matched one by one in a fresh worker, each under the budget; a line that runs
out is skipped and reported (`regex-timeout`), so its watcher's checkpoint moves past it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass, field

from watchrun.config.model import WatcherSpec
from watchrun.match.matcher import BACKTRACKING_BUDGET_S
from watchrun.process.spawn import Proc, Spawner, SpawnError, end_now
from watchrun.runtime.regex_worker import FAILED, HEAD, INIT, SCAN, SPAN, SPANS

__all__ = ["IsolatedMatcher", "Scan", "WorkerError"]

START_TIMEOUT_S = 30.0
"""Time for a new worker to start and compile the patterns (an interpreter start, under load)."""


class WorkerError(Exception):
    """The worker could not be started or refused the patterns."""


class _OverBudget(Exception):
    pass


@dataclass
class Scan:
    """What a chunk's matching found."""

    spans: list[tuple[int, int]]
    """Matching lines, as `Matcher.find` returns them."""
    require_hit: bool = False
    """`gate.require` matched a line of the chunk."""
    slow: list[tuple[int, int]] = field(default_factory=list)
    """Lines skipped because matching them took longer than the budget."""


class IsolatedMatcher:
    """One watcher's pattern, excludes and `gate.require`, matched in its own worker."""

    def __init__(self, spec: WatcherSpec, spawner: Spawner,
                 budget_s: float = BACKTRACKING_BUDGET_S) -> None:
        self.spawner, self.budget_s = spawner, budget_s
        require = spec.gate.require if spec.gate is not None else None
        self._init = json.dumps({"pattern": spec.pattern, "exclude": list(spec.exclude),
                                 "caseSensitive": spec.case_sensitive,
                                 "require": require}).encode()
        self._proc: Proc | None = None
        self.restarts = 0
        """Workers killed at the budget (or found dead) and replaced."""

    async def scan(self, data: bytes) -> Scan:
        try:
            spans, hit = await self._ask(data)
            return Scan(spans, hit)
        except _OverBudget:
            return await self._line_by_line(data)

    async def _line_by_line(self, data: bytes) -> Scan:
        out = Scan([])
        pos, n = 0, len(data)
        while pos < n:
            end = data.find(b"\n", pos)
            end = n if end < 0 else end
            try:
                spans, hit = await self._ask(data[pos:end] + b"\n")
            except _OverBudget:
                out.slow.append((pos, end))
            else:
                if spans:
                    out.spans.append((pos, end))
                out.require_hit |= hit
            pos = end + 1
        return out

    async def _ask(self, payload: bytes) -> tuple[list[tuple[int, int]], bool]:
        proc = self._proc or await self._start()
        try:
            async with asyncio.timeout(self.budget_s):
                status, body = await self._request(proc, SCAN, payload)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            await self._discard()
            self.restarts += 1
            raise _OverBudget from None
        if status == FAILED:
            raise WorkerError(body.decode(errors="replace"))
        hit, count = SPANS.unpack_from(body)
        spans = [SPAN.unpack_from(body, SPANS.size + i * SPAN.size) for i in range(count)]
        return spans, bool(hit)

    async def _start(self) -> Proc:
        argv = [sys.executable, "-m", "watchrun.runtime.regex_worker"]
        try:
            proc = await self.spawner.spawn(argv, cwd=None, env={}, stdin_pipe=True)
        except SpawnError as exc:
            raise WorkerError(f"cannot start the regex worker: {exc}") from None
        self._proc = proc
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                status, body = await self._request(proc, INIT, self._init)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError) as exc:
            await self._discard()
            raise WorkerError(f"the regex worker did not start: {exc!r}") from None
        if status == FAILED:
            await self._discard()
            raise WorkerError(f"the regex worker refused the pattern: {body.decode()}")
        return proc

    @staticmethod
    async def _request(proc: Proc, op: int, payload: bytes) -> tuple[int, bytes]:
        proc.stdin.write(HEAD.pack(op, len(payload)) + payload)
        await proc.stdin.drain()
        status, size = HEAD.unpack(await proc.read_exactly(HEAD.size))
        return status, await proc.read_exactly(size) if size else b""

    async def _discard(self) -> None:
        """Kill the worker (it may be deep in a search) and reap it, even when cancelled."""
        proc, self._proc = self._proc, None
        if proc is not None:
            await end_now(proc)

    async def close(self) -> None:
        await self._discard()
