"""How a watcher ends: its task cancelled and awaited, its last records written, its sink
closed; and what the watchers need of the supervisor that owns them."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from msgspec.structs import replace

from watchrun.clock import Clock
from watchrun.config.model import Config, WatcherSpec
from watchrun.events import MatchInfo
from watchrun.offload import stop_left
from watchrun.output.outdir import OutputLayout
from watchrun.output.runlog import RunLog
from watchrun.process.spawn import Spawner
from watchrun.runtime.gate import STOPPED_BEFORE, Evidence, Trouble
from watchrun.runtime.status import StatusBoard
from watchrun.runtime.tally import Tally
from watchrun.runtime.wiring import WatcherRuntime, evidence_of

if TYPE_CHECKING:
    from watchrun.runtime.pipeline import WatcherPipeline

__all__ = ["AFTER_GRACE_S", "STOP_RECORD_S", "Owner", "end", "finish"]

STOP_RECORD_S = 5.0
"""How long a `stop` record may wait for its sink (a full disk) before the stop goes on (less
when the runner's stop has less left: `offload.stop_left`)."""
AFTER_GRACE_S = 5.0
"""A stopped watcher's task gets stopTimeout plus this to end (its tree's SIGKILL rounds, its
last records), then it is cancelled again."""


class Owner(Protocol):
    """What the watchers need of the supervisor (narrow, so this module does not import it)."""

    config: Config
    layout: OutputLayout
    log: RunLog
    clock: Clock
    spawner: Spawner
    once: bool
    board: StatusBoard
    runtime_errors: list[str]
    tally: Tally

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]: ...
    def matched(self, spec: WatcherSpec, found: Sequence[MatchInfo],
                stream: WatcherPipeline) -> None: ...
    async def record_unfired(self, wid: str, pipeline: WatcherPipeline) -> None: ...
    async def stop_actions(self, wid: str) -> None: ...
    def attach_actions(self, spec: WatcherSpec, pipeline: WatcherPipeline) -> None: ...
    def problem(self, message: str, wid: str | None = None) -> None: ...


async def finish(task: asyncio.Future[Any], budget_s: float | None = None) -> None:
    """Cancel `task` and wait until it is done, cancelling it again every `budget_s` while it
    is not (a write retrying on a full disk, say). Its own exception is not ours to raise."""
    task.cancel()
    while not task.done():
        await asyncio.wait({task}, timeout=budget_s)
        if not task.done():
            task.cancel()
    if not task.cancelled():
        task.exception()  # retrieved: its owner reported it already


async def end(sup: Owner, wid: str, rt: WatcherRuntime, reason: str) -> tuple[Evidence, list[str]]:
    """End one watcher: its task finished (stopTimeout and a grace) and its actions' running
    firings cancelled, what they did not fire and its `stop` recorded, its sink closed off the
    loop. Returns what it saw (once-mode evidence) and the problems met, which never stop the
    ending."""
    problems: list[str] = []
    if rt.task is None:
        ev = replace(evidence_of(rt), error=STOPPED_BEFORE, trouble=Trouble.NOT_RUN)
    else:
        cut_short = not rt.task.done() and sup.once and rt.spec.kind == "file"
        # (a command that had not exited now is killed: its exit is the stop's, not its own)
        running = rt.spec.kind == "command" and getattr(rt.source, "last_exit", 0) is None
        _, closing = await asyncio.gather(  # (its actions' running firings: cancelled and
            finish(rt.task, sup.config.limits.stop_timeout_ms / 1000 + AFTER_GRACE_S),
            sup.stop_actions(wid), return_exceptions=True)  # recorded meanwhile)
        if isinstance(closing, Exception):
            problems.append(f"stopping its actions failed: {closing!r}")
        ev = evidence_of(rt)  # after the stop: what it read while it was stopped counts too
        if cut_short:
            ev = replace(ev, error="the file was not read to its end (the run was "
                         "interrupted)", trouble=Trouble.INTERRUPTED)
        elif running:
            ev = replace(ev, interrupted=True)
        if rt.failure is not None:
            ev = replace(ev, error=rt.failure, trouble=Trouble.FAILED)
        elif rt.pipeline.writer.failing:
            ev = replace(ev, error="its records could not be written (see the log)",
                         trouble=Trouble.FAILED)
        if not rt.pipeline.stopped:  # what its actions did not fire, before the stop
            try:
                await asyncio.wait_for(sup.record_unfired(wid, rt.pipeline),
                                       stop_left(STOP_RECORD_S))
            except Exception as exc:  # (given up: the disk is full, say)
                problems.append(f"the records of matches its actions did not fire could "
                                f"not be written: {str(exc) or type(exc).__name__}")
        try:  # (one `stop` a start: a source that gave up wrote its own)
            if not rt.pipeline.stopped:
                await asyncio.wait_for(rt.pipeline.event("stop", reason=reason),
                                       stop_left(STOP_RECORD_S))
        except Exception as exc:  # (a once run: its JSONL is short of it, never a pass)
            problems.append("the stop record could not be written: "
                            f"{str(exc) or type(exc).__name__}")
            ev = ev if ev.error is not None else replace(
                ev, error=f"its records could not be written: the stop record: {exc}",
                trouble=Trouble.FAILED)
    if rt.pipeline.isolated is not None:
        await rt.pipeline.isolated.close()
    try:
        await rt.pipeline.writer.close()  # (its gap records, when it writes them: logged)
    except Exception as exc:  # (records given up that no gap or note keeps: the run fails)
        problems.append(f"closing its JSONL failed: {exc}")
        sup.runtime_errors.append(f"{wid}: closing its JSONL failed: {exc}")
    else:
        if n := sum(hi - lo + 1 for lo, hi in rt.sink.kept):  # (kept: nothing is lost)
            problems.append(f"{n} records (seq {rt.sink.kept[0][0]} to {rt.sink.kept[-1][1]}) "
                            "could not be written and were given up at the stop; the next "
                            "start records their gap")
    return ev, problems
