"""An agent's `schedule` on a wall clock that steps (NTP, a VM restored from a snapshot) or
jumps ahead while the machine slept: its ticks are the command watcher's (`cron.Ticks`), so a
step shows within a minute (RECHECK_S, shortened here), as docs/config.md says."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from test_agent_hub import Harness, config, hub_test, spec
from test_agent_turn import of

from watchrun import cron
from watchrun.clock import SystemClock

EVERY_5_MIN = "*/5 * * * *"


class StepClock(SystemClock):
    """The machine's monotonic time; wall time the test sets (`before_tick`) and then moves."""

    def __init__(self) -> None:
        self.shift = 0.0

    def now(self) -> float:
        return time.time() + self.shift

    def before_tick(self, lead: float, days: int = 0) -> None:
        """Wall time `lead` seconds before a whole five minutes, `days` days from today."""
        now = time.time()
        self.shift = days * 86_400 + (300 - now % 300) - lead


@pytest.fixture(autouse=True)
def quick_recheck(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step shows at the next look, RECHECK_S (60 s) at most: 0.2 s here."""
    monkeypatch.setattr(cron, "RECHECK_S", 0.2)


def schedule_turns(h: Harness) -> list[str]:
    return [r["turnId"] for r in of(h.records(), "dispatch-start") if r["trigger"] == "schedule"]


def test_a_wall_clock_set_back_is_followed(tmp_path: Path) -> None:
    """A VM that booted a day ahead, corrected by NTP after its agent's first scheduled turn:
    the next tick had been counted from the old time, a day ahead, and the agent waited a
    whole day with no turn and no record. The ticks are counted again from the new time."""
    clock = StepClock()
    clock.before_tick(0.5, days=1)

    async def body(h: Harness) -> None:
        await h.wait_for("dispatch-finished")  # the tick of the day ahead ran
        clock.before_tick(1.0)  # set back a day: a tick of the new time is 1 s away
        await h.wait_for("dispatch-finished", 2)

    agent = spec(tmp_path, schedule=EVERY_5_MIN, prompt="cron|")
    h = hub_test(tmp_path, config(tmp_path, agent), body, clock=clock)
    assert len(schedule_turns(h)) == 2
    assert [f["status"] for f in of(h.records(), "dispatch-finished")] == ["done", "done"]


def test_a_wall_clock_set_forward_gives_one_turn_at_once(tmp_path: Path) -> None:
    """A laptop that slept an hour (the monotonic clock asyncio waits on stood still) or NTP
    correcting a slow clock: the agent waited out the rest of its monotonic wait, its turn up
    to the whole schedule period late (an hour for `0 * * * *`). It comes within a minute, one
    turn for the twelve ticks passed, and the ticks go on from the new time."""
    clock = StepClock()
    clock.before_tick(0.5)

    async def body(h: Harness) -> None:
        await h.wait_for("dispatch-finished")
        clock.shift += 3600 + 10  # twelve ticks passed while it waited for the next one
        await h.wait_for("dispatch-finished", 2)
        await h.hub.idle()

    agent = spec(tmp_path, schedule=EVERY_5_MIN, prompt="cron|")
    h = hub_test(tmp_path, config(tmp_path, agent), body, clock=clock)
    assert len(schedule_turns(h)) == 2  # not one per tick passed
