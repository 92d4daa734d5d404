"""Structured lifecycle (issue #10) with fault seams: a start that fails at any step is undone;
a spawn cancelled at any point leaves nothing; READY means every source holds its position; a
sink that fails at write, fsync or close never hangs a stop nor ends the runner at a reload."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from insupervisor import DEADLINE_S, Running, Sinks, load, until
from recordcheck import validate_records

from watchrun.clock import SystemClock
from watchrun.config.model import Config
from watchrun.output.outdir import OutputLayout, prepare_output_dir
from watchrun.output.runlog import RunLog
from watchrun.process.spawn import SPAWNED, Proc, Spawner
from watchrun.runtime.supervisor import RunnerState, StartupError, Supervisor


def alive_with(marker: str) -> list[int]:
    """Live processes whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                stat = (entry / "stat").read_text()
                if stat[stat.rindex(")") + 2] != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def sleeper(marker: str) -> list[str]:
    return [sys.executable, "-c", "import time, sys; time.sleep(1000)", marker]


@pytest.mark.parametrize("ticks", range(8))
def test_a_spawn_cancelled_at_any_point_ends_at_once_and_leaves_no_child(ticks: int) -> None:
    marker = f"watchrun-test-{uuid.uuid4().hex}"

    async def main() -> None:
        spawning = asyncio.ensure_future(Spawner().spawn(sleeper(marker), cwd=None, env={}))
        for _ in range(ticks):
            await asyncio.sleep(0)
        spawning.cancel()
        done, _ = await asyncio.wait({spawning}, timeout=DEADLINE_S)
        assert done, "a cancelled spawn hung"
        if not spawning.cancelled():  # it had finished before the cancel
            proc: Proc = spawning.result()
            await proc.terminate(0)
            proc.close()

    asyncio.run(main())
    assert alive_with(marker) == []
    assert not SPAWNED


class FaultySpawner(Spawner):
    """Spawns slowly (so a stop can catch a spawn in flight), and fails `boom` commands with
    an error no spawner should raise (a bug, not a missing program)."""

    async def spawn(self, command: Any, **kw: Any) -> Proc:
        if command == "boom":
            raise RuntimeError("injected spawn failure")
        await asyncio.sleep(0.05)
        return await super().spawn(command, **kw)


def test_a_start_that_fails_after_spawning_is_undone(tmp_path: Path) -> None:
    marker = f"watchrun-test-{uuid.uuid4().hex}"
    config = load(tmp_path, {"watchers": [
        {"id": "bad", "command": "boom", "pattern": "x"},
        {"id": "good", "command": sleeper(marker), "pattern": "x"},
        {"id": "log", "path": "app.log", "pattern": "ERROR"}]})
    layout = prepare_output_dir(config.output.dir)
    before = signal.getsignal(signal.SIGTERM)

    async def main() -> None:
        sup = Supervisor(config, layout, RunLog(quiet=True), SystemClock(), FaultySpawner())
        with pytest.raises(StartupError, match=r"^watcher bad: RuntimeError\('injected"):
            await asyncio.wait_for(sup.run(), DEADLINE_S)
        assert sup.state is RunnerState.STOPPED

    started = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - started < 5.0  # stopTimeout
    assert alive_with(marker) == []
    assert signal.getsignal(signal.SIGTERM) == before
    assert not layout.control_socket.exists()
    assert json.loads((layout.state / "processes.json").read_text())["groups"] == []
    for wid in ("bad", "good", "log"):  # every started watcher wrote its stop record
        records = validate_records(layout.jsonl("watcher", wid))
        assert records[-1]["kind"] == "stop" and records[-1]["reason"] == "startup-failed"


def test_a_sigterm_during_start_stops_what_started(tmp_path: Path) -> None:
    marker = f"watchrun-test-{uuid.uuid4().hex}"
    config = load(tmp_path, {"watchers": [{"id": "c", "command": sleeper(marker),
                                           "pattern": "x"}]})
    layout = prepare_output_dir(config.output.dir)

    class Stuck(Spawner):
        async def spawn(self, command: Any, **kw: Any) -> Proc:
            os.kill(os.getpid(), signal.SIGTERM)  # arrives while this spawn is in flight
            await asyncio.sleep(0.2)
            return await super().spawn(command, **kw)

    async def main() -> None:
        sup = Supervisor(config, layout, RunLog(quiet=True), SystemClock(), Stuck())
        await asyncio.wait_for(sup.run(), DEADLINE_S)

    asyncio.run(main())
    assert alive_with(marker) == []
    assert [r["kind"] for r in validate_records(layout.jsonl("watcher", "c"))] == ["stop"]


def test_ready_means_every_source_holds_its_start_position_20_times(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """READY=1 (and status `running`) only after every source took its start position: a line
    written right after READY is always recorded. Twenty runs, each from a fresh start."""
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_NONBLOCK)
    notify.bind(str(tmp_path / "notify.sock"))
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "notify.sock"))
    old = "".join(f"INFO old line {n}\n" for n in range(5000))

    async def once(folder: Path) -> None:
        loop = asyncio.get_running_loop()
        (folder / "app.log").write_text(old)
        config = load(folder, {"watchers": [
            {"id": "app", "path": "app.log", "pattern": "ERROR"},
            {"id": "late", "path": "logs/late.log", "pattern": "ERROR"},
            {"id": "cmd", "command": "exec sleep 1000", "pattern": "x"}]})
        layout = prepare_output_dir(config.output.dir)
        sup = Supervisor(config, layout, RunLog(quiet=True), SystemClock(), Spawner())
        run = asyncio.ensure_future(sup.run())
        try:
            await checks(loop, folder, sup, layout)
        finally:
            if not run.done():
                os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.wait_for(run, DEADLINE_S)
        app = [r for r in validate_records(layout.jsonl("watcher", "app")) if r["kind"] == "match"]
        assert [(m["line"], m["lineNo"]) for m in app] == [("ERROR right after READY", 5001)]

    async def checks(loop: asyncio.AbstractEventLoop, folder: Path, sup: Supervisor,
                     layout: OutputLayout) -> None:
        while "READY=1" not in (await asyncio.wait_for(loop.sock_recv(notify, 4096),
                                                       DEADLINE_S)).decode():
            pass  # the previous run's STOPPING=1
        assert sup.state is RunnerState.RUNNING  # no await between READY and here
        for wid in ("app", "late", "cmd"):  # late: start, then "waiting for it to appear"
            assert validate_records(layout.jsonl("watcher", wid))[0]["kind"] == "start"
        with open(folder / "app.log", "a") as fh:
            fh.write("ERROR right after READY\n")
        (folder / "logs").mkdir()
        (folder / "logs" / "late.log").write_text("ERROR in a file that appeared\n")

        def matched() -> bool:
            return all(any(r["kind"] == "match" for r in validate_records(
                layout.jsonl("watcher", w))) for w in ("app", "late"))

        await until(matched, "both lines written after READY")

    async def main() -> None:
        for n in range(20):
            folder = tmp_path / f"run{n}"
            folder.mkdir()
            await once(folder)

    try:
        asyncio.run(main())
    finally:
        notify.close()


def test_a_sink_that_cannot_write_does_not_hang_the_stop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import watchrun.runtime.watchers as watchers

    monkeypatch.setattr(watchers, "STOP_RECORD_S", 0.5)
    (tmp_path / "app.log").write_text("")
    sinks = Sinks()

    async def main() -> None:
        async with Running(tmp_path, {"watchers": [
                {"id": "app", "path": "app.log", "pattern": "ERROR"}]}, sinks=sinks) as r:
            sinks.opened["app"].fail_writes = True  # ENOSPC/EIO from now on: retried forever
            with open(tmp_path / "app.log", "a") as fh:
                fh.write("ERROR that cannot be recorded\n")
            await until(lambda: r.sup.watchers["app"].pipeline.writer.failing, "the failure")
            started = time.monotonic()
            await r.stop()
            assert time.monotonic() - started < 5.0
            assert any("the stop record could not be written" in p for p in r.sup.problems)

    asyncio.run(main())


def test_a_reload_whose_steps_fail_is_reported_and_the_runner_goes_on(tmp_path: Path) -> None:
    (tmp_path / "app.log").write_text("")
    first = {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR"},
                          {"id": "gone", "path": "app.log", "pattern": "WARN"}]}
    second: dict[str, Any] = {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR|FATAL"},  # changed: restarted
        {"id": "new", "path": "app.log", "pattern": "INFO"},  # its sink cannot be opened
        {"id": "cmd", "command": ["no-such-binary-watchrun"], "pattern": "x"}]}  # spawn error
    sinks = Sinks()
    nxt: list[Config] = []

    async def main() -> None:
        async with Running(tmp_path, first, sinks=sinks, reload=lambda: nxt[0]) as r:
            nxt.append(load(tmp_path, second))
            sinks.opened["app"].fail_close = True  # fsync fails when it is closed
            sinks.opened["gone"].fail_close = True
            sinks.refuse.add("new")
            os.kill(os.getpid(), signal.SIGHUP)
            await until(lambda: r.sup.config is nxt[0] and r.sup.state is RunnerState.RUNNING
                        and "cmd" in r.sup.watchers, "the reload")
            status = await r.sup.control({"cmd": "status"})
            assert status["state"] == "running" and status["watchers"] == ["app", "cmd"]
            problems = "\n".join(status["problems"])
            assert "app: closing its JSONL failed: EIO" in problems
            assert "gone: closing its JSONL failed: EIO" in problems
            assert "new: reload: could not be started: EACCES" in problems
            await until(lambda: [x for x in r.records("cmd") if x["kind"] == "error"],
                        "the spawn error record")
            with open(tmp_path / "app.log", "a") as fh:
                fh.write("FATAL after the reload\n")
            await until(lambda: [x for x in r.records("app") if x["kind"] == "match"],
                        "the restarted watcher's match")
        app = validate_records(r.layout.jsonl("watcher", "app"))
        told = [x for x in app if x["kind"] == "error" and x["code"] == "reload-problem"]
        assert len(told) == 1 and "closing its JSONL failed: EIO" in told[0]["message"]
        assert json.loads((r.layout.state / "gone.status.json").read_text())["lastError"] \
            .startswith("closing its JSONL failed: EIO")

    asyncio.run(main())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_that_comes_as_the_start_ends_is_not_lost(
        sig: signal.Signals, monkeypatch: pytest.MonkeyPatch) -> None:
    """The start and the wait for a signal finish in the same step (found by a once runner that
    ignored a SIGTERM sent just as it became ready): a SIGTERM still stops, a SIGHUP still
    reloads once started."""
    from watchrun.runtime import startup
    from watchrun.runtime.signals import SignalInbox

    class Sup:
        reload_pending = False
        log = RunLog("text", quiet=True)

    async def started_at_once(sup: Any, undo: Any) -> None:
        return None

    monkeypatch.setattr(startup, "_start", started_at_once)

    sup = Sup()

    async def main() -> str | None:
        import contextlib

        inbox = SignalInbox(asyncio.get_running_loop())
        try:
            os.kill(os.getpid(), sig)  # queued before the first wait: both are done at once
            await asyncio.sleep(0)
            async with contextlib.AsyncExitStack() as undo:
                return await startup.start_or_stop(sup, undo, inbox)  # type: ignore[arg-type]
        finally:
            inbox.close()

    reason = asyncio.run(main())
    if sig == signal.SIGTERM:
        assert reason == "SIGTERM"
    else:
        assert reason is None and sup.reload_pending
