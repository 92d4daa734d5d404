"""Backtracking patterns run in a worker process under a per-line budget (issue #10): the same
lines as the in-process matcher, a hostile line skipped and recorded (`regex-timeout`), never a
stalled loop; and the loop-lag monitor that measures stalls."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
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
        assert lag.max_s < 0.1  # the loop went on meanwhile

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
