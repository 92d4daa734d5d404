"""An agent's history is read without holding the event loop: a long one, at start or when a
reload adds the agent, stalls neither the loop (`loopLagMaxS`) nor a watcher tailing beside it;
an open cut short, or a hub that cannot open every agent, leaves no stream open."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from filehelpers import open_fds_to
from liverunner import DEADLINE_S, LiveRunner, read_records, wait_for, write_config
from test_agent_turn import MOCK

from watchrun.agents import history, recorder
from watchrun.agents.hub import AgentHub
from watchrun.clock import SystemClock
from watchrun.config.model import AgentSpec, Config, Limits, OutputSpec
from watchrun.output.backward import last_records
from watchrun.output.outdir import prepare_output_dir
from watchrun.output.records import iter_records
from watchrun.output.runlog import RunLog
from watchrun.output.sink import JsonlSink, SinkWriteError
from watchrun.process.spawn import Spawner

RECORDS = 200_000
"""~66 MB of `output` records: reading them back takes ~0.5 s here, past `lag_limit()`."""


def _history(out: Path, name: str, records: int = RECORDS) -> Path:
    """A long stream for agent `name`, ending in a turn a stopped runner left open."""
    path = prepare_output_dir(out).jsonl("agent", name)
    with JsonlSink(path, name, max_bytes=1 << 30, keep=1, clock=SystemClock()) as sink:
        sink.write("dispatch-start", {"turnId": "t-old", "trigger": "wake", "pid": 1})
        for _ in range(records // 10_000):
            sink.write_lines([sink.record("output", {"text": "x" * 200, "turnId": "t-old"})
                              for _ in range(10_000)])
    return path


@pytest.mark.parametrize("phase", ["opening", "reading"])
def test_an_open_cancelled_midway_closes_the_stream(tmp_path: Path, phase: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = _history(tmp_path / "out", "triage", records=20_000)
    out = OutputSpec(dir=tmp_path / "out", max_bytes=1 << 30)
    reached, go_on = threading.Event(), threading.Event()

    class HeldSink(JsonlSink):  # opened in the worker thread, then held there
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            if phase == "opening":
                reached.set()
                go_on.wait(DEADLINE_S)

    def reading(path: Path, **kwargs: Any) -> Iterator[dict[str, Any]]:
        reached.set()
        yield from iter_records(path, **kwargs)

    monkeypatch.setattr(recorder, "JsonlSink", HeldSink)
    monkeypatch.setattr(history, "iter_records", reading)
    held: list[list[str]] = []

    async def go() -> None:
        opening = asyncio.create_task(recorder.open_recorder(
            path, "triage", out, 1024, RunLog(quiet=True), SystemClock()))
        assert await asyncio.to_thread(reached.wait, DEADLINE_S)
        held.append(open_fds_to(path))
        opening.cancel()
        go_on.set()
        with pytest.raises(asyncio.CancelledError):
            await opening

    asyncio.run(go())  # (which waits for the worker threads: the close among them)
    assert held[0] and open_fds_to(path) == []
    assert not any(r["kind"] == "dispatch-finished" for r in read_records(path))


@pytest.mark.parametrize("when", ["start", "reload"])
def test_a_long_agent_history_does_not_stall_the_loop(tmp_path: Path, when: str) -> None:
    log = tmp_path / "app.log"
    log.write_text("")
    agent = {"name": "triage", "provider": "mock", "prompt": "{matches}"}
    conf: dict[str, Any] = {
        "output": {"dir": ".watchrun", "maxBytes": "1GiB"},
        "watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR"}],
        "agents": [agent] if when == "start" else []}
    config = write_config(tmp_path, conf)
    stream = _history(tmp_path / ".watchrun", "triage")
    r = LiveRunner(config)
    try:
        r.wait_log("running")
        if when == "reload":
            conf["agents"] = [agent]
            write_config(tmp_path, conf)
            r.send(signal.SIGHUP)
            with open(log, "a") as fh:  # matched while the history is read
                fh.write("ERROR during the reload\n")
            r.wait_log("reloaded")
            wait_for(lambda: r.matches("app"), "the watcher's match")
        closed = wait_for(lambda: [x for x in last_records(stream, 200)  # (read from the end:
                                   if x["kind"] == "dispatch-finished"],  # not all 66 MB)
                          "the left-open turn closed")
        assert closed[0]["turnId"] == "t-old"
        assert closed[0]["error"]["code"] == "runner-restarted"
        r.assert_lag_ok()
    finally:
        assert r.stop() == 0
    assert "Traceback" not in r.stderr()


def test_a_hub_that_cannot_open_an_agent_closes_the_ones_it_opened(tmp_path: Path) -> None:
    layout = prepare_output_dir(tmp_path / "out")
    layout.jsonl("agent", "second").mkdir()  # its stream cannot be opened
    agents = tuple(AgentSpec(name=n, provider="mock", command=MOCK, prompt="{matches}",
                             cwd=tmp_path) for n in ("first", "second"))
    cfg = Config(Limits(), OutputSpec(dir=tmp_path / "out"), agents=agents)

    async def go() -> None:
        with pytest.raises(SinkWriteError, match="second"):
            await AgentHub.open(cfg, layout, RunLog(quiet=True), SystemClock(), Spawner())

    asyncio.run(go())
    first = layout.jsonl("agent", "first")
    assert open_fds_to(first) == []
    assert [r["kind"] for r in read_records(first)][-1] == "status"  # idle, then closed
