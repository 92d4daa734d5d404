"""Status snapshots are written by a worker thread (never on the loop), yet what is on disk at
the end is always the newest snapshot: an older write that lands late is skipped, and a
snapshot `watchrun clear` removed is not brought back."""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from watchrun.clock import SystemClock
from watchrun.config.model import Limits, WatcherSpec
from watchrun.events import Chunk
from watchrun.match.matcher import Matcher
from watchrun.output import tailfile
from watchrun.output.runlog import RunLog
from watchrun.output.sink import JsonlSink
from watchrun.output.writer import AsyncWriter
from watchrun.runtime.pipeline import WatcherPipeline
from watchrun.runtime.status import StatusBoard


def _pipeline(tmp_path: Path) -> WatcherPipeline:
    spec = WatcherSpec(id="w", label="w", pattern="ERROR", path=tmp_path / "app.log")
    sink = JsonlSink(tmp_path / "w.jsonl", "w", max_bytes=1 << 30, keep=1, clock=SystemClock())
    return WatcherPipeline(spec, Limits(max_log_lines=3), sink, AsyncWriter(sink),
                           Matcher("ERROR"), RunLog(quiet=True))  # fmt: skip


def _chunk(text: bytes, offset: int, line_no: int) -> Chunk:
    return Chunk(text, offset, line_no, offset + len(text), inode=1, path="/app.log")


def _blocked_executor(loop: asyncio.AbstractEventLoop) -> threading.Event:
    """One worker thread, busy until the returned event is set: writes queue up behind it."""
    loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
    gate = threading.Event()
    loop.run_in_executor(None, gate.wait)
    return gate


def test_the_final_snapshot_wins_over_an_older_write_that_lands_later(tmp_path: Path) -> None:
    pipe = _pipeline(tmp_path)
    state = tmp_path / "state"
    state.mkdir()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        gate = _blocked_executor(loop)
        board = StatusBoard(state, SystemClock())
        board.add(pipe.spec, pipe, object(), "hyperscan")
        await pipe.chunk(_chunk(b"ERROR one\nINFO a\n", 0, 1))
        board.flush()  # queued behind the blocked worker: the older snapshot
        await pipe.chunk(_chunk(b"ERROR two\nINFO b\n", 17, 3))
        board.close()  # written now, synchronously: the newest snapshot
        gate.set()
        await loop.shutdown_default_executor()  # the older write runs now, and must be skipped

    asyncio.run(main())
    snap = json.loads((state / "w.status.json").read_text())
    assert snap["matchCount"] == 2 and snap["linesRead"] == 4
    tail = tailfile.parse((state / "w.tail").read_bytes())
    assert tail.lines == ["INFO a", "ERROR two", "INFO b"] and tail.end == 4  # its last line
    pipe.sink.close()


def test_a_cleared_snapshot_is_not_revived_by_a_queued_write(tmp_path: Path) -> None:
    pipe = _pipeline(tmp_path)
    state = tmp_path / "state"
    state.mkdir()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        gate = _blocked_executor(loop)
        board = StatusBoard(state, SystemClock())
        board.add(pipe.spec, pipe, object(), "re")
        await pipe.chunk(_chunk(b"ERROR one\n", 0, 1))
        board.flush()  # queued
        board.stopped("w")  # to be written at once, by the worker (never on the loop)
        await asyncio.sleep(0.01)
        assert not (state / "w.status.json").exists()  # the worker is still blocked
        assert board.forget_stopped() == ["w"]  # `watchrun clear`
        gate.set()
        await board.aclose()
        await loop.shutdown_default_executor()

    asyncio.run(main())
    assert not (state / "w.status.json").exists()
    assert not (state / "w.tail").exists()
    pipe.sink.close()


def test_a_stopped_snapshot_is_written_by_the_worker_without_waiting_a_second(
        tmp_path: Path) -> None:
    pipe = _pipeline(tmp_path)
    state = tmp_path / "state"
    state.mkdir()

    async def main() -> None:
        board = StatusBoard(state, SystemClock())
        board.add(pipe.spec, pipe, object(), "re")
        await asyncio.sleep(1.2)  # the first snapshot (running) is out
        written: list[str] = []

        def status() -> str:
            return str(json.loads((state / "w.status.json").read_text())["status"])

        board.stopped("w")
        deadline = loop_time() + 0.5  # well under the 1 s debounce of ordinary changes
        while loop_time() < deadline and not written:
            await asyncio.sleep(0.01)
            if status() == "stopped":
                written.append(status())
        assert written == ["stopped"]
        await board.aclose()

    def loop_time() -> float:
        return asyncio.get_running_loop().time()

    asyncio.run(main())
    pipe.sink.close()
