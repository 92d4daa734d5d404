"""Test helper: a running ActionHub over a real watcher JSONL (sink + writer), a fake clock for
windows, and condition waits with a deadline."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recordcheck import validate_records

from watchrun.actions.hub import ActionHub
from watchrun.clock import SystemClock
from watchrun.config.model import ActionSpec, Config, Limits, OutputSpec, WatcherSpec
from watchrun.events import MatchInfo
from watchrun.match.redact import Rule
from watchrun.output.outdir import prepare_output_dir
from watchrun.output.runlog import RunLog
from watchrun.output.sink import JsonlSink
from watchrun.output.writer import AsyncWriter
from watchrun.process.spawn import Spawner

DEADLINE_S = 20.0


class FakeClock:
    """Time moves only when told: `advance` moves monotonic, elapsed and wall time; `suspend`
    elapsed and wall time only (the machine slept: Linux's monotonic clock stood still)."""

    def __init__(self) -> None:
        self.mono = 1000.0
        self.slept = 0.0

    def monotonic(self) -> float:
        return self.mono

    def elapsed(self) -> float:
        return self.mono + self.slept

    def now(self) -> float:
        return 1_760_000_000.0 + self.mono + self.slept

    def advance(self, seconds: float) -> None:
        self.mono += seconds

    def suspend(self, seconds: float) -> None:
        self.slept += seconds


@dataclass
class Stream:
    sink: JsonlSink
    writer: AsyncWriter


async def until(cond: Callable[[], Any], what: str, timeout: float = DEADLINE_S) -> Any:
    end = time.monotonic() + timeout
    while not (value := cond()):
        assert time.monotonic() < end, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)
    return value


def watcher(*actions: ActionSpec, wid: str = "app") -> WatcherSpec:
    return WatcherSpec(id=wid, label="the app", pattern="ERROR", path=Path("/x.log"),
                       actions=actions)


def webhook(url: str, **kw: Any) -> ActionSpec:
    kw.setdefault("timeout_ms", 5000)
    return ActionSpec(name=kw.pop("name", "hook"), type="webhook", url=url, **kw)


def program(tmp_path: Path, *argv: str, **kw: Any) -> ActionSpec:
    return ActionSpec(name=kw.pop("name", "run"), type="exec", command=argv, cwd=tmp_path, **kw)


@dataclass
class Rig:
    """An ActionHub running over one watcher's JSONL under `tmp_path/out`."""

    tmp_path: Path
    spec: WatcherSpec
    clock: Any = field(default_factory=SystemClock)
    limits: Limits = field(default_factory=lambda: Limits(stop_timeout_ms=500))
    redact: tuple[Rule, ...] = ()
    once: bool = False

    def __post_init__(self) -> None:
        layout = prepare_output_dir(self.tmp_path / "out")
        self.path = layout.jsonl("watcher", self.spec.id)
        sink = JsonlSink(self.path, self.spec.id, max_bytes=1 << 30, keep=1, clock=self.clock)
        self.stream = Stream(sink, AsyncWriter(sink))
        self.log = io.StringIO()
        config = Config(self.limits, OutputSpec(dir=self.tmp_path / "out"),
                        watchers=(self.spec,), redact=self.redact)
        self.hub = ActionHub(config, RunLog(stream=self.log), self.clock, Spawner(),
                             once=self.once, backoff_s=0.01)
        self._seq = 0

    async def __aenter__(self) -> Rig:
        self.task = asyncio.create_task(self.hub.run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.hub.shutdown()
        await asyncio.wait_for(self.task, DEADLINE_S)
        self.stream.sink.close()

    def matches(self, *lines: str) -> list[MatchInfo]:
        out = []
        for line in lines:
            self._seq += 1
            out.append(MatchInfo(line, self._seq, self._seq * 10, f"/x.log:{self._seq}",
                                 f"{self.spec.id}:{self._seq:016x}"))
        return out

    def deliver(self, *lines: str) -> float:
        """Hand matches to the hub; returns how long that took (seconds)."""
        found = self.matches(*lines)
        start = time.monotonic()
        self.hub.deliver(self.spec, found, self.stream)
        return time.monotonic() - start

    def records(self, kind: str | None = None) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        recs = validate_records(self.path, contiguous=False)
        return [r for r in recs if kind is None or r["kind"] == kind]

    async def wait(self, kind: str, n: int = 1, **match: Any) -> list[dict[str, Any]]:
        def found() -> list[dict[str, Any]]:
            recs = [r for r in self.records(kind)
                    if all(r.get(k) == v for k, v in match.items())]
            return recs if len(recs) >= n else []
        return list(await until(found, f"{n} {kind} record(s) {match or ''}"))
