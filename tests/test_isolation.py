"""Backtracking patterns run in a worker process under a per-line budget (issue #10): the same
lines as the in-process matcher, a hostile line skipped and recorded (`regex-timeout`), never a
stalled loop; and the loop-lag monitor that measures stalls."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from liverunner import lag_limit
from recordcheck import validate_records

from watchrun.clock import SystemClock
from watchrun.config.model import GateSpec, Limits, WatcherSpec
from watchrun.events import Chunk
from watchrun.match.matcher import Matcher
from watchrun.output.runlog import RunLog
from watchrun.output.sink import JsonlSink
from watchrun.output.writer import AsyncWriter
from watchrun.process.spawn import SPAWNED, Spawner
from watchrun.runtime.isolation import IsolatedMatcher, WorkerError
from watchrun.runtime.lag import LoopLag
from watchrun.runtime.pipeline import WatcherPipeline

HOSTILE = b"a" * 40 + b"!"
CHUNK = b"\n".join([b"abab", b"aa", b"", b"xyzzy", b"ab ab", b"ERROR 42 42", b"aaa", b"b"]) + b"\n"


def spec(pattern: str, exclude: tuple[str, ...] = (), require: str | None = None) -> WatcherSpec:
    gate = GateSpec(require=require) if require else None
    return WatcherSpec("w", "w", pattern, exclude, path=Path("/x.log"), gate=gate,
                       backtracking=True)


@pytest.mark.parametrize(("pattern", "exclude"), [
    (r"(ab)\1", ()),
    (r"(\w+) \1", ()),
    (r"a(?=b)", (r"(?<=b)b",)),
    (r"(?<!a)a", ()),
    (r"^(a+)+$(?<=a)", ()),
    (r"(?>a|ab)b", ("xyz",)),
    (r"^$|(?(1)x)(y)?z", ()),
])
def test_the_worker_finds_exactly_the_lines_the_matcher_finds(pattern: str,
                                                               exclude: tuple[str, ...]) -> None:
    async def main() -> None:
        isolated = IsolatedMatcher(spec(pattern, exclude, require=r"(\d+) \1"), Spawner())
        try:
            found = await isolated.scan(CHUNK)
            assert found.spans == Matcher(pattern, exclude).find(CHUNK)
            assert found.require_hit and found.slow == []
            assert (await isolated.scan(b"no digits\n")).require_hit is False
        finally:
            await isolated.close()

    asyncio.run(main())
    assert not SPAWNED


def test_a_hostile_line_is_skipped_and_the_rest_of_its_chunk_matched() -> None:
    data = b"aaaa\n" + HOSTILE + b"\naa\nbbb\n" + HOSTILE + b"\n"

    async def main() -> None:
        isolated = IsolatedMatcher(spec(r"^(a+)+$(?<=a)"), Spawner(), budget_s=0.2)
        loop = asyncio.get_running_loop()
        lag = LoopLag(0.01)
        monitor = asyncio.ensure_future(lag.run())
        try:
            started = loop.time()
            found = await isolated.scan(data)
            took = loop.time() - started
        finally:
            monitor.cancel()
            await isolated.close()
        lines = data.split(b"\n")
        assert [data[s:e] for s, e in found.spans] == [b"aaaa", b"aa"]
        assert [data[s:e] for s, e in found.slow] == [HOSTILE, HOSTILE]
        assert lines[1] == HOSTILE and isolated.restarts == 3  # the chunk, then each line
        assert took < 10.0
        assert lag.max_s < lag_limit()  # the loop went on meanwhile

    asyncio.run(main())
    assert not SPAWNED


def test_a_pattern_the_worker_refuses_is_a_worker_error() -> None:
    async def main() -> None:
        isolated = IsolatedMatcher(spec("[é]"), Spawner())  # non-ASCII class: refused
        with pytest.raises(WorkerError, match="refused the pattern"):
            await isolated.scan(b"x\n")
        await isolated.close()

    asyncio.run(main())


def test_a_line_over_budget_is_an_error_record_and_the_chunk_completes(tmp_path: Path) -> None:
    s = spec(r"^(a+)+$(?<=a)")
    sink = JsonlSink(tmp_path / "w.jsonl", "w", max_bytes=1 << 20, keep=1, clock=SystemClock())

    async def main() -> None:
        isolated = IsolatedMatcher(s, Spawner(), budget_s=0.2)
        pipe = WatcherPipeline(s, Limits(), sink, AsyncWriter(sink), Matcher(s.pattern),
                               RunLog(quiet=True), isolated=isolated)
        data = b"aa\n" + HOSTILE + b"\naaa\n"
        try:
            await pipe.chunk(Chunk(data, 100, 7, 100 + len(data), inode=5, path="/x.log"))
        finally:
            await isolated.close()
        assert pipe.lines_in_last_chunk() == 3

    asyncio.run(main())
    sink.close()
    records = validate_records(tmp_path / "w.jsonl")
    assert [(r["kind"], r.get("lineNo")) for r in records] == [
        ("error", 8), ("match", 7), ("match", 9)]
    err = records[0]
    assert err["code"] == "regex-timeout" and err["offset"] == 103 and err["inode"] == 5
    assert err["bytes"] == len(HOSTILE)
    assert err["message"] == ("line 8 was not matched within 200 ms; skipped (the pattern "
                              "backtracks on it)")


def test_the_lag_monitor_records_the_worst_stall() -> None:
    async def main() -> float:
        lag = LoopLag(0.01)
        monitor = asyncio.ensure_future(lag.run())
        await asyncio.sleep(0.05)
        time.sleep(0.3)  # a stall, as a blocking call on the loop would make
        await asyncio.sleep(0.05)
        monitor.cancel()
        return lag.max_s

    assert 0.25 < asyncio.run(main()) < 1.0


def test_the_worst_stall_is_forgotten_once_older_than_the_window() -> None:
    """The gauge an alert watches (`watchrun_loop_lag_max_seconds`, `loopLagMaxS`) was the worst
    since the start, so one stall kept it up, and an alert on it firing, until a restart. It is
    the worst of the last WINDOW_S (300 s; 0.5 s here): a stall shows, then clears."""
    async def main() -> tuple[float, float]:
        lag = LoopLag(0.01, window_s=0.5)
        monitor = asyncio.ensure_future(lag.run())
        await asyncio.sleep(0.05)
        time.sleep(0.3)  # a stall, as a blocking call on the loop would make
        await asyncio.sleep(0.05)
        seen = lag.max_s
        end = time.monotonic() + 20
        while lag.max_s >= 0.25 and time.monotonic() < end:
            await asyncio.sleep(0.05)
        monitor.cancel()
        return seen, lag.max_s

    seen, later = asyncio.run(main())
    assert 0.25 < seen < 1.0
    assert later < 0.25


@pytest.mark.parametrize(("pattern", "require", "case"), [
    (r"(err|fat)(or|al)\b(?<!xfatal)", None, False),  # literals {err, fat}, folded
    (r"(?<=\[)(\w)\1", r"ERROR \d+", True),  # no literal of 2+ bytes: every line goes
    (r"time(?:out|d out) (\d+) \1", r"(?i)FATAL", True),  # require's literals join the pattern's
])
def test_only_lines_with_a_required_literal_are_sent_to_the_worker(
        pattern: str, require: str | None, case: bool) -> None:
    """The lines the worker finds, and `require`, are what the in-process matcher finds when the
    lines without the pattern's required literals are dropped in the runner first; what crosses
    the pipe is those lines only (all of them when a pattern has no literal to look for)."""
    filler = [f"GET /static/{i} 200 ok" for i in range(60)]
    lines = [*filler[:20], "ERROR 42 timeout 7 7", "Fatal: x", "[ab] ab", "xfatal", "timed out 5 5",
             *filler[20:], "FATAL 3", "error", "ERRORS", *filler[40:]]
    data = "\n".join(lines).encode() + b"\n"
    s = WatcherSpec("w", "w", pattern, (), path=Path("/x.log"), case_sensitive=case,
                    gate=GateSpec(require=require) if require else None, backtracking=True)

    async def main() -> tuple[list[tuple[int, int]], bool, int]:
        isolated = IsolatedMatcher(s, Spawner())
        try:
            found = await isolated.scan(data)
            return found.spans, found.require_hit, isolated.sent
        finally:
            await isolated.close()

    spans, hit, sent = asyncio.run(main())
    assert spans == Matcher(pattern, (), case).find(data)
    assert hit == (require is not None and bool(Matcher(require, (), case).find(data)))
    if pattern.startswith("(?<=\\["):
        assert sent == len(data)
    else:
        assert sent < len(data) // 3
    assert not SPAWNED


def test_a_hostile_line_without_the_literal_never_reaches_the_worker() -> None:
    """`(a+)+bad`: a line of a's and no "bad" would backtrack for ages; it holds none of the
    pattern's required literal, so the runner drops it in linear time, and the line that does
    hold it is matched in the worker."""
    data = b"x\n" * 40 + HOSTILE + b"\n" + b"aaabad\n" + b"y\n" * 40

    async def main() -> tuple[list[tuple[int, int]], list[tuple[int, int]], int, int]:
        isolated = IsolatedMatcher(spec(r"(a+)+bad"), Spawner(), budget_s=0.2)
        try:
            found = await isolated.scan(data)
            return found.spans, found.slow, isolated.restarts, isolated.sent
        finally:
            await isolated.close()

    spans, slow, restarts, sent = asyncio.run(main())
    assert [data[s:e] for s, e in spans] == [b"aaabad"]
    assert slow == [] and restarts == 0 and sent == len(b"aaabad\n")
    assert not SPAWNED
