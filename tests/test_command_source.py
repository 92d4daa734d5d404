"""CommandSource: runs, output framing, restarts, start limit, schedule, stop, flood."""

from __future__ import annotations

import asyncio
import random
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.procs import (
    TREE_SIZE,
    Counter,
    FakeClock,
    FakeSleep,
    GatedSleep,
    Recorder,
    fd_holder,
    read_pids,
    run_to_end,
    source,
    spec,
    state,
    survivors,
    tree_command,
    until,
    vm_hwm_kib,
)

from watchrun.config.model import Limits, RestartPolicy
from watchrun.process.spawn import ExitInfo, become_subreaper
from watchrun.runtime.ending import finish
from watchrun.sources.command import CommandSource, ProcState
from watchrun.sources.restarts import BACKOFF_CAP_MS, START_LIMIT, backoff_ms, should_restart


@pytest.fixture(autouse=True)
def subreaper() -> Iterator[None]:
    assert become_subreaper(True)
    yield
    become_subreaper(False)


# --- pure parts -------------------------------------------------------------------------


@pytest.mark.parametrize(("base", "attempt", "nominal"), [
    (1000, 1, 1000), (1000, 2, 2000), (1000, 3, 4000), (1000, 6, 32000), (1000, 7, 60000),
    (1000, 40, 60000), (100, 1, 100), (100, 4, 800), (0, 5, 0), (90000, 1, 60000),
])
def test_backoff_doubles_to_the_cap_with_ten_percent_jitter(base: int, attempt: int,
                                                            nominal: int) -> None:
    rng = random.Random(attempt)
    for _ in range(50):
        d = backoff_ms(base, attempt, rng)
        assert nominal * 0.9 - 1 <= d <= nominal * 1.1 + 1
    assert backoff_ms(base, attempt, rng) <= BACKOFF_CAP_MS * 1.1


@pytest.mark.parametrize(("policy", "info", "restart"), [
    (RestartPolicy.NEVER, ExitInfo(1, None, "exited"), False),
    (RestartPolicy.NEVER, None, False),
    (RestartPolicy.ON_FAILURE, ExitInfo(0, None, "exited"), False),
    (RestartPolicy.ON_FAILURE, ExitInfo(1, None, "exited"), True),
    (RestartPolicy.ON_FAILURE, ExitInfo(None, "SIGSEGV", "signaled"), True),
    (RestartPolicy.ON_FAILURE, None, True),
    (RestartPolicy.ALWAYS, ExitInfo(0, None, "exited"), True),
])
def test_restart_policy(policy: RestartPolicy, info: ExitInfo | None, restart: bool) -> None:
    assert should_restart(policy, info) is restart


# --- one run ----------------------------------------------------------------------------


def test_last_line_without_newline_is_delivered_at_exit() -> None:
    ctx, echoed = Recorder(), list[bytes]()

    async def echo(data: bytes, wait: bool) -> None:
        echoed.append(data)

    src = source(spec("printf 'first\\nsecond'; exit 3"), echo=echo)
    run_to_end(src, ctx)
    assert ctx.lines() == [(1, 1, b"first"), (1, 2, b"second")]
    assert b"".join(echoed) == b"first\nsecond\n"
    assert ctx.kinds() == ["start", "exit"]
    start, exit_ = ctx.of("start")[0], ctx.of("exit")[0]
    assert start["run"] == 1 and start["command"] == "printf 'first\\nsecond'; exit 3"
    assert exit_.pop("durationMs") >= 0
    assert exit_ == {"run": 1, "exitCode": 3, "signal": None, "status": "exited"}
    assert src.state is ProcState.EXITED and src.last_exit == ExitInfo(3, None, "exited")


def test_argv_command_and_signal_exit() -> None:
    ctx = Recorder()
    run_to_end(source(spec(("sh", "-c", "echo $0; kill -TERM $$", "a;b"))), ctx)
    assert ctx.lines() == [(1, 1, b"a;b")]
    assert ctx.of("start")[0]["command"] == ["sh", "-c", "echo $0; kill -TERM $$", "a;b"]
    assert ctx.of("exit")[0]["signal"] == "SIGTERM"
    assert ctx.of("exit")[0]["status"] == "signaled"


def test_long_lines_are_cut_to_max_line_bytes() -> None:
    ctx = Recorder()
    run_to_end(source(spec("head -c 5000 /dev/zero | tr '\\0' a; echo; echo short"),
                      limits=Limits(max_line_bytes=256)), ctx)
    assert [line for _, _, line in ctx.lines()] == [b"a" * 256, b"short"]
    assert sum(c.cut_at(0) for c in ctx.chunks) + sum(
        cut.omitted for c in ctx.chunks for cut in c.cuts if cut.pos) == 5000 - 256


def test_exit_with_a_child_holding_the_output_open_is_not_a_hang() -> None:
    ctx = Recorder()
    src = source(spec("trap '' TERM; sleep 1000 & echo bye"), limits=Limits(stop_timeout_ms=300))
    run_to_end(src, ctx)
    assert ctx.lines() == [(1, 1, b"bye")]
    assert ctx.kinds() == ["start", "error", "exit"]
    assert ctx.of("error")[0]["code"] == "output-held-open"
    exit_ = ctx.of("exit")[0]
    assert (exit_["exitCode"], exit_["status"], exit_["stragglers"]) == (0, "exited", 1)
    assert exit_["signals"] == ["SIGTERM", "SIGKILL"]


def test_output_held_open_counts_the_processes_stopped_as_left_running_does() -> None:
    """`count` said how many needed SIGKILL (0 here): a consumer read that nothing was
    stopped, while `left-running`'s `count` is every process stopped."""
    ctx = Recorder()
    src = source(spec("sleep 1000 & echo bye"), limits=Limits(stop_timeout_ms=300))
    run_to_end(src, ctx)
    [error] = ctx.of("error")
    assert (error["code"], error["count"]) == ("output-held-open", 1)
    assert "stopped it (0 needed SIGKILL)" in str(error["message"])
    [exit_] = ctx.of("exit")
    assert (exit_["signals"], exit_["stragglers"]) == (["SIGTERM"], 0)


# --- restarts ---------------------------------------------------------------------------


def test_restart_storm_ends_fatal_at_the_start_limit() -> None:
    ctx = Recorder()
    src = source(spec("echo boom; exit 1", restart=RestartPolicy.ALWAYS, restart_delay_ms=100))
    run_to_end(src, ctx)
    assert src.state is ProcState.FATAL
    assert ctx.kinds() == ["start", "exit", "restart"] * 4 + ["start", "exit", "stop"]
    assert ctx.of("stop") == [
        {"reason": "start-limit", "message": "5 starts in 10 minutes; giving up"}]
    assert [e["run"] for e in ctx.of("start")] == [1, 2, 3, 4, 5]
    assert [e["run"] for e in ctx.of("restart")] == [2, 3, 4, 5]
    delays = [e["delayMs"] for e in ctx.of("restart")]
    for got, nominal in zip(delays, [100, 200, 400, 800], strict=True):
        assert nominal * 0.9 <= got <= nominal * 1.1
    # Every run's output starts again at offset 0 and line 1, tagged with its run.
    assert [(c.run, c.offset, c.line_no) for c in ctx.chunks] == [(n, 0, 1) for n in range(1, 6)]


def test_backoff_sequence_with_injected_clock() -> None:
    clock = FakeClock()
    sleep = FakeSleep(clock)
    ctx = Recorder()
    # stopTimeout 0: a normal exit must still not be mistaken for output held open.
    src = source(spec("echo hi; exit 1", restart=RestartPolicy.ON_FAILURE), clock, sleep,
                 limits=Limits(stop_timeout_ms=0))
    run_to_end(src, ctx)
    assert "error" not in ctx.kinds() and len(ctx.lines()) == 5
    assert [e["attempt"] for e in ctx.of("restart")] == [1, 2, 3, 4]
    assert [e["delayMs"] / 1000 for e in ctx.of("restart")] == sleep.delays
    for got, nominal in zip(sleep.delays, [1, 2, 4, 8], strict=True):
        assert nominal * 0.9 <= got <= nominal * 1.1
    assert src.state is ProcState.FATAL and ctx.of("stop")[0]["reason"] == "start-limit"


def test_a_healthy_run_resets_the_backoff_but_not_the_start_window() -> None:
    clock = FakeClock()
    sleep = FakeSleep(clock)
    ctx = Recorder()
    # Run 3 "lasts" 61 s: the clock moves while it runs.
    ctx.on_event = lambda kind, f: clock.advance(61) if kind == "start" and f["run"] == 3 else None
    src = source(spec("exit 1", restart=RestartPolicy.ALWAYS), clock, sleep)
    run_to_end(src, ctx)
    nominal = [1, 2, 1, 2]  # reset after run 3; FATAL once 5 starts fit in the window
    assert len(sleep.delays) == len(nominal)
    for got, want in zip(sleep.delays, nominal, strict=True):
        assert want * 0.9 <= got <= want * 1.1
    assert len(ctx.of("start")) == 5 and ctx.of("stop")[0]["reason"] == "start-limit"
    assert [e["durationMs"] for e in ctx.of("exit")][:4] == [0, 0, 61000, 0]


def test_a_command_that_crashes_just_after_the_reset_still_goes_fatal() -> None:
    """The loophole of a reset-after-uptime design: every run lasts 61 s (so the backoff is
    reset each time) and then fails. The start window, longer than the reset, still catches it."""
    clock = FakeClock()
    sleep = FakeSleep(clock)
    ctx = Recorder()
    ctx.on_event = lambda kind, f: clock.advance(61) if kind == "start" else None
    src = source(spec("exit 1", restart=RestartPolicy.ALWAYS), clock, sleep)
    run_to_end(src, ctx)
    assert len(ctx.of("start")) == 5 and src.state is ProcState.FATAL
    assert all(0.9 <= d <= 1.1 for d in sleep.delays)  # never backed off: each run was healthy


def test_success_is_not_restarted_on_failure_policy_and_once_never_restarts() -> None:
    ctx = Recorder()
    run_to_end(source(spec("true", restart=RestartPolicy.ON_FAILURE)), ctx)
    assert ctx.kinds() == ["start", "exit"]
    ctx = Recorder()
    src = source(spec("exit 1", restart=RestartPolicy.ALWAYS, schedule="* * * * *"), once=True)
    run_to_end(src, ctx)
    assert ctx.kinds() == ["start", "exit"] and src.state is ProcState.EXITED


# --- spawn failures ---------------------------------------------------------------------


def test_spawn_failure_backs_off_and_gives_up(tmp_path: Path) -> None:
    clock = FakeClock()
    sleep = FakeSleep(clock)
    ctx = Recorder()
    src = source(spec(("no-such-program-xyz",), restart=RestartPolicy.ALWAYS), clock, sleep)
    run_to_end(src, ctx)
    assert ctx.kinds() == ["error", "restart"] * 4 + ["error", "stop"]
    assert {e["code"] for e in ctx.of("error")} == {"ENOENT"}
    assert "no-such-program-xyz" in ctx.of("error")[0]["message"]
    assert sleep.delays[-1] > sleep.delays[0] * 4  # growing delays, not a tight loop
    assert src.state is ProcState.FATAL


def test_spawn_failures_are_distinct_and_never_policy_stops_at_once(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\n")
    codes = []
    for s in (spec(("no-such-program-xyz",)), spec((str(plain),)),
              spec("true", cwd=plain), spec("true", cwd=tmp_path / "missing")):
        ctx = Recorder()
        src = source(s)
        run_to_end(src, ctx)
        assert ctx.kinds() == ["error"] and src.state is ProcState.FATAL
        codes.append((ctx.of("error")[0]["code"], ctx.of("error")[0]["message"]))
    assert [c for c, _ in codes] == ["ENOENT", "EACCES", "ENOTDIR", "ENOENT"]
    assert len({m for _, m in codes}) == 4
    assert "working directory" in codes[2][1] and "working directory" in codes[3][1]


# --- schedule ---------------------------------------------------------------------------


def test_schedule_runs_at_ticks_and_skips_a_tick_while_running(tmp_path: Path) -> None:
    clock = FakeClock(wall=1_700_000_010.0)  # 30 s past a whole minute (UTC and local)
    go = tmp_path / "go"
    cmd = f"echo tick; while [ ! -e {shlex.quote(str(go))} ]; do sleep 0.01; done"
    ctx = Recorder()

    async def scenario() -> CommandSource:
        sleep = GatedSleep(clock)
        src = source(spec(cmd, schedule="* * * * *"), clock, sleep)
        task = asyncio.ensure_future(src.run(ctx))
        await until(lambda: len(sleep.delays) == 1, "the wait for the first tick")
        assert sleep.delays == [30.0] and src.state is ProcState.WAITING
        sleep.gate.release()  # tick 1: run 1 starts
        await until(lambda: len(ctx.lines()) == 1, "run 1's output")
        await until(lambda: len(sleep.delays) == 2, "the wait for tick 2")
        assert sleep.delays[1] == 60.0 and state(src) is ProcState.RUNNING
        sleep.gate.release()  # tick 2: run 1 is still going
        await until(lambda: "error" in ctx.kinds(), "the skipped tick")
        go.touch()
        await until(lambda: "exit" in ctx.kinds(), "run 1's exit")
        await until(lambda: state(src) is ProcState.WAITING, "WAITING again")
        go.unlink()
        sleep.gate.release()  # tick 3: run 2
        await until(lambda: len(ctx.of("start")) == 2, "run 2")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return src

    src = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert ctx.kinds() == ["start", "error", "exit", "start", "exit"]
    skipped = ctx.of("error")[0]
    assert skipped["code"] == "tick-skipped" and "run 1 is still running" in skipped["message"]
    assert ctx.of("exit")[1]["status"] == "killed" and src.state is ProcState.STOPPED


async def every_minute_after_run_1(clock: FakeClock, ctx: Recorder
                                   ) -> tuple[GatedSleep, asyncio.Future[None]]:
    """An every-minute `echo tick` source running on `clock`, its first tick run and its wait
    for the second begun: its sleeps (each held until released) and its task."""
    sleep = GatedSleep(clock)
    src = source(spec("echo tick", schedule="* * * * *"), clock, sleep)
    task = asyncio.ensure_future(src.run(ctx))
    await until(lambda: len(sleep.delays) == 1, "the wait for the first tick")
    sleep.gate.release()  # tick 1: run 1
    await until(lambda: len(ctx.of("exit")) == 1 and len(sleep.delays) == 2, "run 1")
    return sleep, task


def test_a_schedule_follows_the_wall_clock_set_back(tmp_path: Path) -> None:
    """The next tick was counted from the last one: a clock set back a day (a VM restored, NTP
    correcting a clock that ran ahead) held an every-minute schedule for a day, with no run
    and no record. It counts from the new time, and a tick that ran is not run again."""
    clock = FakeClock(wall=1_700_000_010.0)  # 30 s past a whole minute (UTC and local)
    ctx = Recorder()

    async def scenario() -> None:
        sleep, task = await every_minute_after_run_1(clock, ctx)
        assert sleep.delays[1] == 60.0
        clock.wall -= 86_400 + 15  # set back a day and 15 s, while it waits for tick 2
        sleep.gate.release()  # the wait ends 45 s past a minute of the day before
        await until(lambda: len(sleep.delays) == 3, "the wait for the next tick")
        assert sleep.delays[2] == 15.0  # the next minute of the new time, not a day on
        sleep.gate.release()
        await until(lambda: len(ctx.of("exit")) == 2 and len(sleep.delays) == 4, "run 2")
        clock.wall -= 61  # set back past the tick that just ran
        sleep.gate.release()
        await until(lambda: len(sleep.delays) == 5, "the wait after the small step back")
        assert sleep.delays[4] == 60.0  # toward the tick after it (1 s on): not rerun at once
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(scenario(), 30))
    assert ctx.kinds() == ["start", "exit"] * 2


def test_a_schedule_runs_once_after_the_wall_clock_set_forward(tmp_path: Path) -> None:
    """docs/config.md: a clock set forward (a VM resumed, NTP correcting a slow clock) gives
    one run, not one per tick passed, then the schedule goes on from the new time."""
    clock = FakeClock(wall=1_700_000_010.0)  # 30 s past a whole minute (UTC and local)
    ctx = Recorder()

    async def scenario() -> None:
        sleep, task = await every_minute_after_run_1(clock, ctx)
        clock.wall += 600 + 20  # set forward past ten ticks, while it waits for tick 2
        sleep.gate.release()
        await until(lambda: len(ctx.of("exit")) == 2 and len(sleep.delays) == 3, "run 2")
        assert 0 < sleep.delays[2] <= 60.0  # toward the next minute of the new time
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(scenario(), 30))
    assert ctx.kinds() == ["start", "exit"] * 2  # one run for the ten ticks passed


def test_a_schedule_keeps_no_record_per_run(tmp_path: Path) -> None:
    """Every run's start time was kept for the restart limit, which a schedule never asks: an
    every-minute command held half a million of them a year. Only the last START_LIMIT stay."""
    clock = FakeClock(wall=1_700_000_010.0)
    ctx = Recorder()
    runs = START_LIMIT + 3

    async def scenario() -> CommandSource:
        sleep = GatedSleep(clock)
        src = source(spec("true", schedule="* * * * *"), clock, sleep)
        task = asyncio.ensure_future(src.run(ctx))
        for n in range(1, runs + 1):
            await until(lambda n=n: len(sleep.delays) == n, f"the wait for tick {n}")
            sleep.gate.release()
            await until(lambda n=n: len(ctx.of("exit")) == n, f"run {n}")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return src

    src = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert len(ctx.of("start")) == runs and "stop" not in ctx.kinds()
    assert len(src._starts) == START_LIMIT


# --- stopping and flooding --------------------------------------------------------------


def test_a_second_cancel_during_the_stop_still_gets_the_exit_record(tmp_path: Path) -> None:
    """The command ignores SIGTERM and hands its stdout to a process outside its tree (the
    test's listener), so its stop takes stopTimeout, SIGKILL, then a wait for the output's
    end. The runner's stop cancels again when its budget is spent: that second cancel, in the
    wait, lost the run's `exit` record."""
    ctx = Recorder()

    async def scenario(script: str) -> None:
        src = source(spec((sys.executable, "-c", script)), limits=Limits(stop_timeout_ms=300))
        task = asyncio.ensure_future(src.run(ctx))
        await until(lambda: len(ctx.lines()) == 1, "its first line")
        await finish(task, 0.6)  # (the stop's budget: cancelled again after 0.6 s)

    with fd_holder() as (address, held):
        asyncio.run(asyncio.wait_for(scenario(
            "import signal, socket, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            f"s = socket.socket(socket.AF_UNIX); s.connect({address!r}); "
            "socket.send_fds(s, [b'x'], [1]); s.recv(1); print('up', flush=True); "
            "time.sleep(1000)"), 30))
    assert held, "the listener held the command's stdout"
    [exit_] = ctx.of("exit")
    assert (exit_["status"], exit_["signal"]) == ("killed", "SIGKILL")


def test_cancel_stops_the_whole_tree_and_records_it(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    cmd = tree_command(pidfile, "--spew")
    ctx = Recorder()

    async def scenario() -> CommandSource:
        src = source(spec(cmd), limits=Limits(stop_timeout_ms=300))
        task = asyncio.ensure_future(src.run(ctx))
        await until(lambda: len(read_pids(pidfile)) == TREE_SIZE and len(ctx.lines()) > 3, "spew")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return src

    src = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert survivors(read_pids(pidfile)) == {}
    assert ctx.kinds()[-1] == "exit" and src.state is ProcState.STOPPED
    exit_ = ctx.of("exit")[0]
    assert exit_["status"] == "killed" and exit_["signals"] == ["SIGTERM", "SIGKILL"]
    assert exit_["stragglers"] == TREE_SIZE
    assert ctx.of("stop") == []  # written by whoever cancelled, with its reason
    assert ctx.lines()[0][2] == b"ready" and ctx.lines()[1][2] == b"spew 1"


def test_a_flood_is_all_counted_in_bounded_memory() -> None:
    before = vm_hwm_kib()
    ctx = Counter()
    line = "x" * 99  # 1,000,000 lines of 100 bytes: 100 MB through the pipe
    run_to_end(source(spec(f"yes {line} | head -n 1000000; echo end")), ctx)
    assert (ctx.lines, ctx.bytes, ctx.last) == (1_000_001, 100_000_004, b"end\n")
    assert vm_hwm_kib() - before < 50 * 1024  # peak RSS grew by less than 50 MiB


def test_a_slow_sink_blocks_the_child_on_its_pipe() -> None:
    ctx = Counter(hold=True)

    async def scenario() -> None:
        src = source(spec(("seq", "3000000")))
        task = asyncio.ensure_future(src.run(ctx))
        await asyncio.wait_for(ctx.held.wait(), 20)
        pid = src.pid
        assert pid is not None

        def blocked() -> bool:
            return "pipe_write" in Path(f"/proc/{pid}/wchan").read_text()

        await until(blocked, "seq to block writing its full pipe")
        written = int(next(line.split()[1] for line in
                           Path(f"/proc/{pid}/io").read_text().splitlines()
                           if line.startswith("wchar:")))
        assert written < 1024 * 1024  # of ~20 MB: pipe + one read buffer, not the whole output
        ctx.release.set()
        await asyncio.wait_for(task, 60)

    asyncio.run(scenario())
    assert ctx.lines == 3_000_000
