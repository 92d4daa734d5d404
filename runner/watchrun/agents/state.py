"""One agent's state in the hub and its queue of waiting work: deliveries, sends, plan steps,
cron ticks."""

from __future__ import annotations

import asyncio
from collections import deque

from msgspec import Struct, field

from watchrun.agents.prompt import Delivery, TurnWindow, render_prompt, render_turn_prompt
from watchrun.agents.providers.usage import UsageTracker
from watchrun.agents.recorder import Recorder
from watchrun.agents.turn import PROMPT_BYTES, TurnRunner
from watchrun.clock import Clock
from watchrun.config.model import AgentSpec, Limits, WatcherSpec
from watchrun.cron import Ticks
from watchrun.match.sanitize import sanitize
from watchrun.output.runlog import RunLog

__all__ = ["REFUSED_LOG_S", "REFUSED_S", "UPDATE_S", "AgentState", "PlanStep", "StepOutcome"]

UPDATE_S = 1.0
"""A waiting delivery that grows is recorded `queued` again with its count at most this often:
a runner that dies (SIGKILL) leaves the count the next runner records it `dropped` with."""
REFUSED_S = 1.0
"""After a turn `maxTurns` refused, its loop takes no work for this long: the matches that come
meanwhile join one waiting delivery per watcher, dropped together (not a refusal per line)."""
REFUSED_LOG_S = 60.0
"""Refusals are said in the log at most this often, with how many came since the last line."""


class StepOutcome(Struct, frozen=True):
    """How one agent's step of a plan ended."""

    status: str
    """`done`, `failed`, `cancelled` (a turn that ran), `dropped` (it never ran: max-turns, the
    runner stopped) or `skipped` (an agent it depends on did not finish with an answer)."""
    answer: str = ""
    why: str = ""
    answer_cut: bool = False
    """Only the start of the answer was kept (REPLY_BYTES): its dependents are told so."""


class PlanStep(Struct, eq=False):
    """An agent's turn in a plan, waiting in its queue: the prompt is rendered (its
    dependencies' answers in it); `done` is resolved when the turn ends or is dropped."""

    plan: str
    delivery: Delivery
    prompt: str
    done: asyncio.Future[StepOutcome]

    def resolve(self, outcome: StepOutcome) -> None:
        if not self.done.done():
            self.done.set_result(outcome)


class AgentState(Struct, eq=False):
    """One agent of a live runner: its records, its waiting work, its running turn, totals."""

    spec: AgentSpec
    rec: Recorder
    tracker: UsageTracker
    window: TurnWindow
    pending: dict[str, Delivery] = field(default_factory=dict)
    sends: deque[Delivery] = field(default_factory=deque)
    steps: deque[PlanStep] = field(default_factory=deque)
    waiting: list[PlanStep] = field(default_factory=list)
    """Its plan steps whose dependencies have not ended yet: not in its queue, but their
    deliveries are recorded `queued` (agents/plan.py), so `drop_all` drops them too."""
    schedule_due: int | None = None
    ticks: Ticks | None = None
    """Its schedule's ticks, from its loop's first look (None: not yet, or no schedule)."""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    working: bool = False
    turn: TurnRunner | None = None
    turn_end: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    turns: int = 0
    tokens: int = 0
    last_reply: str = ""
    unstartable: str | None = None
    """Why its last turn's process could not be started (ENOENT, EACCES, …); None once a turn's
    process started, or its config changed."""
    unstarted: int = 0
    """Turns in a row whose process could not be started."""
    taken: PlanStep | None = None
    """The plan step `next_work` gave out last (its turn resolves it)."""
    refused: tuple[int, int, int] = (0, 0, 0)
    """Refused turns, their deliveries and matches (or prompts) not said in the log yet."""
    refusal_said: float | None = None
    """When the log last said a refusal (`Clock.elapsed`); None: the next one is said at once."""
    recorded: dict[str, tuple[float, asyncio.TimerHandle | None]] = field(default_factory=dict)
    """Per waiting delivery: when its count was last recorded (the loop's clock), and the timer
    that records it when its second is up."""

    @property
    def busy(self) -> bool:
        return self.working or bool(self.pending or self.sends or self.steps) \
            or self.schedule_due is not None

    # -- queueing ---------------------------------------------------------------------------
    def queue_matches(self, watcher: WatcherSpec, lines: list[str], limits: Limits) -> None:
        """Add a watcher's (sanitized) match lines to its waiting delivery, or queue a new one."""
        d = self.pending.get(watcher.id)
        if d is None:
            seq = self.rec.next_seq
            d = Delivery(f"d-{seq}", watcher.label, limits.max_matches, watcher.id, seq=seq)
            d.add(lines)
            self.pending[watcher.id] = d
            self.rec.emit("delivery", d.record("queued", limits.match_lines))
            self.recorded[d.id] = (asyncio.get_running_loop().time(), None)
        else:
            d.add(lines)
            self._record_count(d, limits.match_lines)
        self.wake.set()

    def _record_count(self, d: Delivery, match_lines: int) -> None:
        """Record a grown delivery `queued` again with its count: now, when its last record is
        UPDATE_S old, else by a timer when it is (once; later growth rides along)."""
        loop = asyncio.get_running_loop()
        at, timer = self.recorded.get(d.id, (0.0, None))
        if timer is not None:
            return
        if loop.time() - at >= UPDATE_S:
            self.rec.emit("delivery", d.record("queued", match_lines))
            self.recorded[d.id] = (loop.time(), None)
            return
        later = loop.call_at(at + UPDATE_S, self._recount, d, match_lines)
        self.recorded[d.id] = (at, later)

    def _recount(self, d: Delivery, match_lines: int) -> None:
        self.recorded[d.id] = (self.recorded[d.id][0], None)
        if d.watcher is not None and self.pending.get(d.watcher) is d:  # (still waiting)
            self._record_count(d, match_lines)

    def forget_counts(self) -> None:
        """The waiting deliveries were taken or dropped: no count of theirs is due."""
        for _, timer in self.recorded.values():
            if timer is not None:
                timer.cancel()
        self.recorded.clear()

    def queue_send(self, text: str, match_lines: int, redacted: dict[str, int]) -> str:
        """Queue a manual prompt (trigger `send`); returns its delivery id. `redacted`: the
        secrets already taken out of `text`, by kind (recorded with it)."""
        seq = self.rec.next_seq
        d = Delivery(f"d-{seq}", "send", 1, source="send", seq=seq)
        d.add([sanitize(text, PROMPT_BYTES)[0]])
        self.sends.append(d)
        self.rec.emit("delivery", d.record("queued", match_lines,
                                           **({"redacted": redacted} if redacted else {})))
        self.wake.set()
        return d.id

    def queue_step(self, step: PlanStep) -> None:
        """Queue a plan step (its delivery was recorded `queued` when the plan started)."""
        self.steps.append(step)
        self.wake.set()

    def tick(self, clock: Clock) -> float | None:
        """Mark a due cron tick (one for however many passed: a turn is due, or not); seconds
        to sleep before asking again (None: no schedule). The ticks are the command watcher's
        (`cron.Ticks`): a clock set back or forward, or a resume, is followed within a minute."""
        expr = self.spec.schedule
        if not expr:
            return None
        if self.ticks is None:
            self.ticks = Ticks(expr, clock)
        while not (wait := self.ticks.wait()):
            self.ticks.take()
            if self.schedule_due is None:
                self.schedule_due = self.rec.next_seq
        return wait

    def prompt_for(self, trigger: str, batch: list[Delivery], step: PlanStep | None,
                   match_lines: int) -> str:
        """The prompt of a turn: a plan step's (rendered when its dependencies ended), a sent
        text, the template with the woken deliveries, or (schedule) with none."""
        if step is not None:
            return step.prompt
        if trigger == "send":
            return batch[0].lines[0]
        if trigger == "wake":
            return render_turn_prompt(self.spec.prompt, batch, match_lines)
        return render_prompt(self.spec.prompt, {"matches": "", "watcher": "",
                                                "label": "schedule", "count": "0"})

    def allow_turn(self, clock: Clock, trigger: str, batch: list[Delivery], limits: Limits,
                   log: RunLog) -> bool:
        """maxTurns: True when a turn may start (it counts once its process started:
        `started`); else its deliveries are recorded dropped (reason max-turns) and the log says
        when the next one may: at once for the first refusal, then at most every
        REFUSED_LOG_S, counting the refusals between."""
        spec, now = self.spec, clock.elapsed()
        wait = self.window.retry_in(now)
        if not wait:
            if self.refused[0]:  # (refusals the log has not said yet)
                self._say_refused(log, trigger, "maxTurns was reached")
            self.refusal_said = None
            return True
        why = (f"maxTurns reached ({spec.max_turns} turns in the last hour; the next is "
               f"allowed in {wait:.0f} s)")
        self.drop(batch, "max-turns", limits.match_lines)
        if not batch:
            self.rec.emit("dropped", {"count": 1, "reason": "max-turns",
                                      "message": f"{trigger} turn refused: {why}"})
        turns, deliveries, count = self.refused
        self.refused = (turns + 1, deliveries + len(batch),
                        count + sum(d.count for d in batch))
        if self.refusal_said is None or now - self.refusal_said >= REFUSED_LOG_S:
            self._say_refused(log, trigger, why)
            self.refusal_said = now
        return False

    def _say_refused(self, log: RunLog, trigger: str, why: str) -> None:
        turns, deliveries, count = self.refused
        self.refused = (0, 0, 0)
        more = f" ({turns} turns refused since the last such line)" if turns > 1 else ""
        log.warning(f"{trigger} turn refused: {why}; {deliveries} delivery(ies) of {count} "
                    f"match(es) or prompt(s) dropped{more}", self.spec.name,
                    event="turn-refused", turns=turns, deliveries=deliveries, count=count)

    def started(self, clock: Clock) -> None:
        """A turn's process started: it counts against maxTurns now."""
        self.window.allow(clock.elapsed())
        self.unstartable, self.unstarted = None, 0

    def not_started(self, error: str) -> None:
        """A turn's process could not be started: not counted against maxTurns (it used
        nothing); `status` lists the agent as a problem until a turn's process starts."""
        self.unstartable, self.unstarted = error, self.unstarted + 1

    # -- taking and dropping ----------------------------------------------------------------
    def next_work(self) -> tuple[str, list[Delivery]] | None:
        """The oldest waiting work: all pending wake deliveries at once, a send, or a tick."""
        options: list[tuple[int, str]] = []
        if self.pending:
            options.append((min(d.seq for d in self.pending.values()), "wake"))
        if self.sends:
            options.append((self.sends[0].seq, "send"))
        if self.steps:
            options.append((self.steps[0].delivery.seq, "plan"))
        if self.schedule_due is not None:
            options.append((self.schedule_due, "schedule"))
        if not options:
            return None
        trigger = min(options)[1]
        if trigger == "wake":
            batch = sorted(self.pending.values(), key=lambda d: d.seq)
            self.pending = {}
            self.forget_counts()
            return trigger, batch
        if trigger == "send":
            return trigger, [self.sends.popleft()]
        if trigger == "plan":
            self.taken = self.steps.popleft()
            return trigger, [self.taken.delivery]
        self.schedule_due = None
        return trigger, []

    def drop(self, batch: list[Delivery], reason: str, match_lines: int,
             message: str | None = None) -> None:
        """Record each delivery of `batch` as dropped for `reason`."""
        for d in batch:
            self.rec.emit("delivery", d.record("dropped", match_lines, reason=reason,
                                               message=message))

    def drop_all(self, reason: str, match_lines: int, why: str) -> None:
        """Drop everything that waits (recorded, oldest first; the log says how many and
        `why`), forget a due tick, and tell each waiting plan step's plan (also of steps still
        waiting for their dependencies)."""
        steps = [*self.steps, *self.waiting]
        batch = sorted([*self.pending.values(), *self.sends, *(s.delivery for s in steps)],
                       key=lambda d: d.seq)
        self.drop(batch, reason, match_lines)
        self.rec.say_dropped([d.count for d in batch], why, reason)
        for step in steps:
            step.resolve(StepOutcome("dropped", why=reason))
        self.pending, self.sends, self.steps, self.schedule_due = {}, deque(), deque(), None
        self.waiting = []
        self.forget_counts()
