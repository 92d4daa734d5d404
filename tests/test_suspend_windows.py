"""Windows of time across a suspend (a laptop's lid closed overnight): Linux's monotonic clock,
asyncio's, stands still while the machine sleeps, so an hour measured on it was an hour the
machine was awake. maxTurns' hour, a command's start limit and an action's throttle are on the
clock seam's `elapsed` (CLOCK_BOOTTIME), which counts the night; the tests move it through the
seam, the monotonic clock left where it was."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from actionrig import FakeClock, Rig, watcher, webhook
from helpers.procs import FakeClock as CommandClock
from helpers.procs import FakeSleep, Recorder, run_to_end, source, spec
from test_agent_hub import Harness, config, deliveries, hub_test, m
from test_agent_hub import spec as agent
from test_agent_hub import watcher as waking
from test_agent_turn import of
from webhook_server import receiver

from watchrun.actions import hub as action_hub
from watchrun.clock import SystemClock
from watchrun.config.model import Limits, RestartPolicy
from watchrun.sources.restarts import START_LIMIT

NIGHT_S = 8 * 3600.0


class SleepingMachine(SystemClock):
    """The machine's clocks, but for the nights it slept (`slept`): wall and elapsed time count
    them, the monotonic clock does not."""

    slept = 0.0

    def elapsed(self) -> float:
        return super().elapsed() + self.slept

    def now(self) -> float:
        return super().now() + self.slept


def test_max_turns_counts_an_hour_of_the_day_not_of_the_machine_awake(tmp_path: Path) -> None:
    """`maxTurns: 1`, a turn, the lid closed for the night: the morning's first match was
    dropped (`max-turns`, "1 turns in the last hour") for a turn its own record showed 8 h
    old, while a runner started that morning would have run it."""
    clock = SleepingMachine()

    async def body(h: Harness) -> None:
        h.hub.deliver(waking(), m("before the lid was closed"))
        await h.wait_for("dispatch-finished")
        clock.slept += NIGHT_S
        h.hub.deliver(waking(), m("next morning"))
        await h.hub.idle()

    h = hub_test(tmp_path, config(tmp_path, agent(tmp_path, max_turns=1)), body,
                 once=True, clock=clock)
    assert [f["status"] for f in of(h.records(), "dispatch-finished")] == ["done", "done"]
    assert deliveries(h.records(), "dropped") == []
    assert "refused" not in h.stream.getvalue()


def test_starts_before_a_suspend_do_not_count_toward_the_start_limit() -> None:
    """A command that failed four times, then the machine slept 8 h: its fifth start was the
    fifth "in 10 minutes" and the watcher went FATAL. After the night it has the limit's five
    starts in ten minutes again (the ninth start is the fifth since)."""
    clock = CommandClock()

    class NightSleep(FakeSleep):
        async def __call__(self, seconds: float) -> None:
            await super().__call__(seconds)
            if len(self.delays) == START_LIMIT - 1:  # the lid closed in the 4th backoff
                clock.suspend(NIGHT_S)

    ctx = Recorder()
    src = source(spec("exit 1", restart=RestartPolicy.ALWAYS), clock, NightSleep(clock),
                 limits=Limits(stop_timeout_ms=0))
    run_to_end(src, ctx)
    assert [e["run"] for e in ctx.of("start")] == list(range(1, 2 * START_LIMIT))
    assert ctx.of("stop") == [
        {"reason": "start-limit", "message": "5 starts in 10 minutes; giving up"}]


def test_a_throttle_window_a_suspend_outlasted_is_over(tmp_path: Path) -> None:
    """`throttle: 1h`, a page, the night: the morning's first match was suppressed (its window
    said to end in 3 590 s) instead of paging."""
    clock = FakeClock()
    with receiver(200) as rx:
        async def body() -> None:
            spec = watcher(webhook(rx.url, throttle_ms=3_600_000))
            async with Rig(tmp_path, spec, clock=clock) as rig:
                rig.deliver("ERROR before the night")
                await rig.wait("action-result")
                clock.advance(10)
                clock.suspend(NIGHT_S)
                rig.deliver("ERROR next morning")
                await rig.wait("action-result", 2)
                assert rig.records("action-suppressed") == []
                assert [f["reason"] for f in rig.records("action-fired")] == ["match", "match"]
        asyncio.run(body())
    assert rx.count() == 2


def test_what_a_throttle_held_goes_out_after_a_suspend_outlasted_its_window(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A match held by a one-minute throttle, then the night: the firing that says it waited
    for the rest of the minute on the monotonic clock, which the night did not move. It goes
    out at the next look (RECHECK_S, 60 s at most; 0.2 s here), nothing poking the hub."""
    monkeypatch.setattr(action_hub, "RECHECK_S", 0.2)
    clock = FakeClock()
    with receiver(200) as rx:
        async def body() -> None:
            async with Rig(tmp_path, watcher(webhook(rx.url, throttle_ms=60_000)),
                           clock=clock) as rig:
                rig.deliver("ERROR 1")
                await rig.wait("action-result")
                rig.deliver("ERROR 2")
                await rig.wait("action-suppressed")
                clock.suspend(NIGHT_S)
                await rig.wait("action-result", 2)
                assert [f["reason"] for f in rig.records("action-fired")] == [
                    "match", "throttle-end"]
        asyncio.run(body())
    assert rx.count() == 2
