"""Test helper: a real Supervisor in the test's own event loop (real files, processes, sockets and
signals), with fault seams injected through its constructor: a spawner, a sink factory, a
checkpoint store."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from liverunner import read_records, write_config

from watchrun.clock import SystemClock
from watchrun.config import load_config
from watchrun.config.model import Config
from watchrun.output.outdir import prepare_output_dir
from watchrun.output.runlog import RunLog
from watchrun.output.sink import JsonlSink, SinkWriteError
from watchrun.process.spawn import Spawner
from watchrun.runtime.supervisor import RunnerState, Supervisor
from watchrun.runtime.wiring import open_sink
from watchrun.sources.checkpoints import CheckpointStore

DEADLINE_S = 20.0


def load(folder: Path, config: dict[str, Any]) -> Config:
    result = load_config([write_config(folder, config)])
    assert result.config is not None, [d.format() for d in result.diagnostics]
    return result.config


async def until(cond: Callable[[], Any], what: str, timeout: float = DEADLINE_S) -> Any:
    end = time.monotonic() + timeout
    while not (value := cond()):
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.005)
    return value


class FaultySink(JsonlSink):
    """A JSONL sink whose writes or close fail while its flag is set (EIO, as a dying disk)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.fail_writes = False
        self.fail_close = False

    def write_lines(self, lines: Any) -> None:
        if self.fail_writes:
            raise SinkWriteError("EIO", f"cannot write {self.path}: Input/output error")
        super().write_lines(lines)

    def close(self) -> None:
        if self.fail_close:
            super().close()
            raise SinkWriteError("EIO", f"cannot sync {self.path}: Input/output error")
        super().close()


class Sinks:
    """A sink factory that keeps every sink it opens (the newest per id), and can refuse ids."""

    def __init__(self) -> None:
        self.opened: dict[str, FaultySink] = {}
        self.refuse: set[str] = set()

    def __call__(self, path: Path, stream_id: str, **kw: Any) -> JsonlSink:
        if stream_id in self.refuse:
            raise SinkWriteError("EACCES", f"cannot open {path}: Permission denied")
        if path.parent.name != "watchers":
            return open_sink(path, stream_id, **kw)
        sink = FaultySink(path, stream_id, **kw)
        self.opened[stream_id] = sink
        return sink


class Running:
    """`async with Running(...) as r:` runs the supervisor as a task; leaving sends SIGTERM."""

    def __init__(self, folder: Path, config: dict[str, Any] | Config, *,
                 spawner: Spawner | None = None, sinks: Callable[..., JsonlSink] = open_sink,
                 reload: Callable[[], Config | None] | None = None, once: bool = False,
                 log: RunLog | None = None,
                 checkpoints: Callable[[Path], CheckpointStore] = CheckpointStore) -> None:
        self.folder = folder
        self.config = config if isinstance(config, Config) else load(folder, config)
        self.layout = prepare_output_dir(self.config.output.dir)
        self.sup = Supervisor(self.config, self.layout, log or RunLog(quiet=True), SystemClock(),
                              spawner or Spawner(), once=once, reload=reload, sinks=sinks,
                              checkpoints=checkpoints)
        self.task: asyncio.Task[None] | None = None

    def records(self, wid: str) -> list[dict[str, Any]]:
        return read_records(self.layout.jsonl("watcher", wid))

    async def __aenter__(self) -> Running:
        self.task = asyncio.create_task(self.sup.run())
        await until(lambda: self.sup.state is RunnerState.RUNNING or self.task.done(),  # type: ignore[union-attr]
                    "the runner to be running")
        if self.task.done():
            self.task.result()
        return self

    async def stop(self, sig: int = signal.SIGTERM) -> None:
        assert self.task is not None
        if not self.task.done():
            os.kill(os.getpid(), sig)
        await asyncio.wait_for(self.task, DEADLINE_S)

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        if exc[0] is None:
            await self.stop()
            return
        with contextlib.suppress(BaseException):
            await self.stop()
