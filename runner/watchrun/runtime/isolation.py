"""Backtracking patterns run in a worker process under a per-line time budget, never on the loop.

A thread cannot do this: CPython's `re` holds the GIL for the whole of one search, so a
backtracking search in a thread freezes the loop just the same (measured: a 0.45 s search
stalled the loop 0.45 s), and it cannot be interrupted. A process can be killed.

Only the lines that may match go to the worker: when the pattern (and `gate.require`) have
required literals, the lines that contain none of them are dropped here first, with `bytes.find`
(linear time: no regex runs in the runner). The worker gets the rest as one chunk, matched whole
under one budget. If that runs out, the worker is killed and the chunk's lines are matched one
by one in a fresh worker, each under the budget; a line that runs out is skipped and reported
(`regex-timeout`), so its watcher's checkpoint moves past it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any

from msgspec import Struct, field

from watchrun.config.model import WatcherSpec
from watchrun.events import Chunk
from watchrun.match.literals import candidate_lines
from watchrun.match.matcher import BACKTRACKING_BUDGET_S
from watchrun.match.regex import analyse
from watchrun.match.simd import count_newlines
from watchrun.process.helper_exit import KEEP_BYTES, ended
from watchrun.process.helper_start import helper_command
from watchrun.process.spawn import Proc, Spawner, SpawnError, end_now
from watchrun.runtime.regex_worker import FAILED, HEAD, INIT, SCAN, SPAN, SPANS

__all__ = ["IsolatedMatcher", "Scan", "WorkerError"]

START_TIMEOUT_S = 30.0
"""Time for a new worker to start and compile the patterns (an interpreter start, under load)."""
EXIT_WAIT_S = 5.0
"""Time for a worker that closed its pipes without answering to exit and say why."""


class WorkerError(Exception):
    """The worker could not be started or refused the patterns."""


class _OverBudget(Exception):
    pass


class Scan(Struct):
    """What a chunk's matching found."""

    spans: list[tuple[int, int]]
    """Matching lines, as `Matcher.find` returns them."""
    require_hit: bool = False
    """`gate.require` matched a line of the chunk."""
    slow: list[tuple[int, int]] = field(default_factory=list)
    """Lines skipped because matching them took longer than the budget."""

    def timeouts(self, chunk: Chunk, budget_s: float) -> Iterator[dict[str, Any]]:
        """The fields of an `error{regex-timeout}` record for each `slow` line of `chunk`."""
        budget_ms = round(budget_s * 1000)
        where = {"path": chunk.path, "inode": chunk.inode} if chunk.path is not None \
            else {"run": chunk.run}
        for start, end in self.slow:
            line_no = chunk.line_no + count_newlines(chunk.data, 0, start)
            offset = chunk.source_offset(start) if chunk.cuts else chunk.offset + start
            yield {"code": "regex-timeout", "lineNo": line_no, "offset": offset,
                   "bytes": end - start, **where, "message": (
                       f"line {line_no} was not matched within {budget_ms} ms; "
                       "skipped (the pattern backtracks on it)")}


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
        try:
            self._candidates = candidate_lines([analyse(p, spec.case_sensitive)
                                                for p in (spec.pattern, require) if p])
        except ValueError:  # an invalid pattern: the worker refuses it, with its reason
            self._candidates = None
        self.sent = 0
        """Bytes sent to the worker (what the literal prefilter left of the chunks)."""

    async def scan(self, data: bytes) -> Scan:
        """The lines of `data` that match (excludes applied), and whether `require` did."""
        lines = self._candidates(data) if self._candidates is not None else None
        if lines is None or (lines and lines[-1][1] == len(data)) or \
                sum(e - s + 1 for s, e in lines) * 2 > len(data):  # fmt: skip
            return await self._scan(data)  # (most of it, or unterminated: the chunk as it is)
        if not lines:
            return Scan([])
        payload = b"".join([memoryview(data)[s : e + 1] for s, e in lines])
        starts, at = [], 0
        for s, e in lines:
            starts.append(at)
            at += e + 1 - s
        back = {p: s for p, (s, _) in zip(starts, lines, strict=True)}  # payload → data

        def mapped(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
            return [(back[p], back[p] + e - p) for p, e in spans]

        found = await self._scan(payload)
        return Scan(mapped(found.spans), found.require_hit, mapped(found.slow))

    async def _scan(self, data: bytes) -> Scan:
        self.sent += len(data)
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
        """A worker that has compiled the patterns. Its stderr is its own pipe: a worker that
        cannot start (its package replaced under the runner, a broken install) writes a
        traceback there, which is said, not read as the protocol's replies."""
        argv = helper_command("watchrun.runtime.regex_worker", packages=True)
        try:
            proc = await self.spawner.spawn(argv, cwd=None, env={}, stdin_pipe=True,
                                            separate_stderr=True)
        except SpawnError as exc:
            raise WorkerError(f"cannot start the regex worker: {exc}") from None
        self._proc = proc
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                status, body = await self._request(proc, INIT, self._init)
        except TimeoutError:
            await self._discard()
            raise WorkerError(f"the regex worker did not start: no answer in "
                              f"{START_TIMEOUT_S:g} s") from None
        except (asyncio.IncompleteReadError, ConnectionError):
            raise WorkerError(f"the regex worker did not start ({await self._ended()})"
                              ) from None
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

    async def _ended(self) -> str:
        """How a worker that closed its pipes ended: its exit status and the last line of its
        stderr (`helper_exit.ended`). It is ending: given EXIT_WAIT_S, then killed."""
        proc, said = self._proc, b""
        assert proc is not None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(EXIT_WAIT_S):
                while part := await proc.read_stderr(KEEP_BYTES):
                    said = (said + part)[-KEEP_BYTES:]
                await proc.wait()
        await self._discard()
        info = await proc.wait()
        return ended(info.exit_code, info.signal, said)

    async def _discard(self) -> None:
        """Kill the worker (it may be deep in a search) and reap it, even when cancelled."""
        proc, self._proc = self._proc, None
        if proc is not None:
            await end_now(proc)

    async def close(self) -> None:
        await self._discard()
