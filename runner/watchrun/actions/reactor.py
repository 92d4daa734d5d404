"""One action of one watcher at run time: its gate, its bounded queue of firings, the workers
that carry them out (at most `concurrency`), and the records and counts of all of it."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from watchrun.actions.payload import Context, Outgoing, build
from watchrun.actions.results import Result
from watchrun.actions.windows import Firing, Gate, Suppression
from watchrun.clock import Clock, iso_ts
from watchrun.config.model import ActionSpec, WatcherSpec
from watchrun.events import MatchInfo
from watchrun.match.redact import Redactor
from watchrun.output.runlog import RunLog

__all__ = ["DROP_RECORD_S", "ActionRuntime", "Host", "Record"]

DROP_RECORD_S = 1.0
"""While a queue overflows, at most one `action-dropped` record per this many seconds."""
Record = Callable[[str, dict[str, Any]], None]
"""Queue a record for the watcher's JSONL (kind, fields); never blocks."""


class Host(Protocol):
    """What an action needs from its owner (the watcher's actions, in `actions/hub.py`)."""

    clock: Clock
    log: RunLog
    redactor: Redactor

    @property
    def running(self) -> bool: ...

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]: ...

    async def execute(self, spec: ActionSpec, outgoing: Outgoing, on_retry: Callable[
                      [int, float, str], None]) -> Result: ...


ENDED = {"runner-stopped": "the runner stopped",
         "action-removed": "a reload removed or changed the action",
         "watcher-stopped": "the watcher was stopped (`watchrun stop`, `restart`, `clear`)",
         "watcher-restarted": "a reload restarted the watcher or made its actions anew (its "
                              "own config, a limit it reads at its start or limits.matchLines "
                              "changed; the action did not)"}
"""Why an action's firings ended before they went out, by the reason code its records carry."""


def _cancelled(reason: str) -> Result:
    return Result("cancelled", error={"code": "cancelled",
                                      "message": f"{ENDED.get(reason, reason)} while it ran"})


@dataclass(slots=True)
class _Begun:
    """A firing that went out (`action-fired` written): its number, payload and start."""

    n: int
    outgoing: Outgoing
    started: float
    carried: bool = False
    """Its worker ran it (and records its `action-result`, cancelled too)."""


class ActionRuntime:
    """One action: `offer` is called with each batch of matches and never blocks."""

    def __init__(self, watcher: WatcherSpec, spec: ActionSpec, host: Host, record: Record,
                 counts: dict[str, int], keep: int) -> None:
        self.watcher, self.spec, self.host, self.record = watcher, spec, host, record
        self.counts = counts
        """fired, suppressed, dropped and one count per result status (outlive a reload)."""
        self.gate = Gate(spec.threshold, spec.throttle_ms, keep, spec.max_body_bytes)
        self.queue: deque[Firing] = deque()
        self.workers: set[asyncio.Task[None]] = set()
        self._dropped = [0, 0]  # firings, matches: since the last firing that went out
        self._unrecorded = [0, 0]  # dropped but not in an `action-dropped` record yet
        self._drop_recorded_at = float("-inf")
        self._who = f"action {spec.name}"
        self._starting = False
        self.closing = False
        self.ended_by = "runner-stopped"
        """Why it closes (`ENDED`): said of the firings it cancels and drops."""
        """Set when its watcher's actions close: no firing starts from then on (a record of
        another action's cancelled firing kicks the workers)."""

    @property
    def busy(self) -> bool:
        return bool(self.queue or self.workers)

    def _fields(self, **extra: Any) -> dict[str, Any]:
        return {"action": self.spec.name, "type": self.spec.type, **extra}

    def _count(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    # -- input ------------------------------------------------------------------------------
    def offer(self, found: Sequence[MatchInfo]) -> None:
        self.take(self.gate.offer(self.host.clock.elapsed(), found))

    def tick(self) -> float | None:
        """Send what a throttle window held once it ended, record drops the last second held
        back; when to tick next (`Clock.elapsed`, as the windows: a suspend counts)."""
        now = self.host.clock.elapsed()
        due = self.gate.due(now)
        if due is not None:
            self.take([due])
        self._record_dropped(now)
        ahead = self.gate.next_due()
        if self._unrecorded[0]:  # (the owner ticks again after a drop: `deliver`, `idle`)
            at = self._drop_recorded_at + DROP_RECORD_S
            ahead = at if ahead is None else min(ahead, at)
        return ahead

    def take(self, events: list[Firing | Suppression]) -> None:
        for event in events:
            if isinstance(event, Suppression):
                self._suppressed(event)
            elif len(self.queue) + len(self.workers) >= self.spec.queue + self.spec.concurrency:
                self._drop(event)
            else:
                self.queue.append(event)
                self.start_workers()

    def _suppressed(self, s: Suppression) -> None:
        self._count("suppressed")
        left_ms = max(0, round((s.window_end - self.host.clock.elapsed()) * 1000))
        self.record("action-suppressed", self._fields(count=s.count, suppressed=s.suppressed,
                                                      windowEndsInMs=left_ms))
        if s.suppressed == 1:
            self.host.log.info(f"{self._who}: throttled; what matches until the window ends "
                               f"(in {left_ms / 1000:.0f} s) goes out then as one firing",
                               self.watcher.id, event="action-suppressed")

    def _drop(self, firing: Firing) -> None:
        self._count("dropped")
        self._dropped[0] += 1
        self._dropped[1] += firing.count
        self._unrecorded[0] += 1
        self._unrecorded[1] += firing.count
        self._record_dropped(self.host.clock.elapsed())

    def _record_dropped(self, now: float) -> None:
        """The `action-dropped` record of queue-full drops, at most one a DROP_RECORD_S."""
        if self._unrecorded[0] and now - self._drop_recorded_at >= DROP_RECORD_S:
            self.record_drops("queue-full")

    def record_drops(self, reason: str) -> None:
        """Write what was dropped and not recorded yet (queue-full drops, or what a stop left)."""
        n, matches = self._unrecorded
        if not n:
            return
        self._unrecorded = [0, 0]
        self._drop_recorded_at = self.host.clock.elapsed()
        why = f"its queue was full ({self.spec.queue} waiting, {self.spec.concurrency} " \
            "running)" if reason == "queue-full" else ENDED.get(reason, reason)
        self.record("action-dropped", self._fields(count=n, matches=matches, reason=reason,
                                                   message=f"{n} firing(s) dropped: {why}"))
        self.host.log.warning(f"{self._who}: {n} firing(s) ({matches} matches) dropped: {why}",
                              self.watcher.id, event="action-dropped")

    def abandon(self, reason: str) -> None:
        """Count what waits (queued, or held by the throttle) as dropped for `reason`, after a
        record of the queue-full drops not recorded yet (under their own reason)."""
        self.record_drops("queue-full")
        held = self.gate.due(float("inf"))
        for firing in [*self.queue, *([held] if held is not None else [])]:
            self._count("dropped")
            self._unrecorded[0] += 1
            self._unrecorded[1] += firing.count
        self.queue.clear()
        self.record_drops(reason)

    # -- carrying firings out ----------------------------------------------------------------
    def start_workers(self) -> None:
        """Up to `concurrency` workers while firings wait (once the owner runs). A worker's
        first firing is taken from the queue here, its `action-fired` record written now: a
        firing dropped because of it is recorded after it, and a free worker is never counted
        as taken by a firing still in the queue."""
        if self._starting:  # (called again from within: the fired record kicks the workers)
            return
        self._starting = True
        try:
            while self.queue and len(self.workers) < self.spec.concurrency and \
                    self.host.running and not self.closing:
                first = self._begin(self.queue.popleft())
                task = self.host.spawn(self._work(first),
                                       f"action:{self.watcher.id}:{self.spec.name}")
                self.workers.add(task)
                task.add_done_callback(partial(self._worker_done, first))
        finally:
            self._starting = False

    def _worker_done(self, first: _Begun, task: asyncio.Task[None]) -> None:
        """A worker cancelled before it ran (a stop right after a match): its first firing
        still gets its `action-result`, and the worker no longer counts as busy."""
        self.workers.discard(task)
        if not first.carried:
            first.carried = True
            self._result(first.n, _cancelled(self.ended_by), first.started)

    async def _work(self, first: _Begun) -> None:
        try:
            await self._carry(first)
            while self.queue:
                await self._carry(self._begin(self.queue.popleft()))
        finally:  # at once, so a firing queued from now on starts a worker of its own
            task = asyncio.current_task()
            if task is not None:
                self.workers.discard(task)

    def _begin(self, firing: Firing) -> _Begun:
        """A firing goes out: counted, its `action-fired` record written, its payload built."""
        self._count("fired")
        n, clock = self.counts["fired"], self.host.clock  # (counts outlive a reload)
        self._record_dropped(clock.elapsed())  # (before the firing that says how many)
        dropped, self._dropped = self._dropped, [0, 0]
        ctx = Context(self.watcher.id, self.watcher.label, self.spec.name, n, iso_ts(clock.now()),
                      dropped[0], dropped[1])
        outgoing = build(ctx, firing, self.host.redactor, self.spec.max_body_bytes)
        fields = self._fields(
            firing=n, reason=firing.reason, count=firing.count,
            shown=outgoing.shown(self.spec.type == "webhook" and self.spec.format == "slack"),
            suppressed=firing.suppressed, suppressedMatches=firing.suppressed_matches,
            dropped=dropped[0], firstCursor=firing.first_cursor, lastCursor=firing.last_cursor,
            target=self.spec.origin())
        if outgoing.redacted:
            fields["redacted"] = outgoing.redacted
        self.record("action-fired", fields)
        many = "es" if firing.count != 1 else ""
        self.host.log.info(f"{self._who} fired ({firing.reason}, {firing.count} match{many})",
                           self.watcher.id, event="action-fired", action=self.spec.name)
        return _Begun(n, outgoing, clock.monotonic())

    async def _carry(self, begun: _Begun) -> None:
        """Send a begun firing and record its `action-result`."""
        begun.carried = True
        n, outgoing, started = begun.n, begun.outgoing, begun.started

        def retry(attempt: int, delay: float, why: str) -> None:
            self.host.log.warning(f"{self._who} firing {n}: {why}; attempt {attempt} in "
                                  f"{delay:.1f} s", self.watcher.id, event="action-retry")

        try:
            result = await self.host.execute(self.spec, outgoing, retry)
        except asyncio.CancelledError:
            self._result(n, _cancelled(self.ended_by), started)
            raise
        except Exception as exc:  # a bug must not stop the other firings
            result = Result("failed", error={"code": "internal", "message": repr(exc)})
        self._result(n, result, started)

    def _result(self, n: int, result: Result, started: float) -> None:
        duration = max(0, round((self.host.clock.monotonic() - started) * 1000))
        self._count(result.status)
        fields = self._fields(firing=n, **result.fields(), durationMs=duration)
        if self.spec.type == "exec":  # always said for a program, null when it did not exit
            fields.setdefault("exitCode", None)
            fields.setdefault("signal", None)
        self.record("action-result", fields)
        how = result.status
        if result.http_status is not None:
            how += f", HTTP {result.http_status}"
        if result.exit_code is not None:
            how += f", exit code {result.exit_code}"
        message = f"{self._who} firing {n}: {how} in {duration} ms"
        if result.error is not None:
            message += f": {result.error['message']}"
        if result.left_running:
            many = result.left_running != 1
            message += (f"; {result.left_running} process{'es' if many else ''} it left "
                        f"running {'were' if many else 'was'} stopped")
        quiet = result.status == "ok" and not result.left_running
        self.host.log.log("info" if quiet else "warning", "action-result",
                          message, self.watcher.id, action=self.spec.name,
                          status=result.status, durationMs=duration)
