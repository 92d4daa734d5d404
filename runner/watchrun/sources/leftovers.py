"""What a command run left behind once it exited (a daemon, a holder of its output): stopped
as one task the run's own stop waits for, and recorded."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from watchrun.events import SourceContext
from watchrun.process.proc import left_behind
from watchrun.process.spawn import ExitInfo, Proc
from watchrun.process.tree import SPAWNED


class TreeStop:
    """The stop of a run's tree under way, if any. It runs as a task of its own: the
    watcher's stop, coming meanwhile, waits for it (`under_way`) instead of cancelling it and
    beginning another (one grace, its record, then the `exit` record)."""

    def __init__(self) -> None:
        self.under_way: asyncio.Future[ExitInfo] | None = None

    async def run(self, stop: Coroutine[Any, Any, ExitInfo]) -> ExitInfo:
        self.under_way = asyncio.ensure_future(stop)
        return await asyncio.shield(self.under_way)


async def end_rest(proc: Proc, grace_s: float, ctx: SourceContext, n: int,
                   info: ExitInfo) -> ExitInfo:
    """Run `n` is over (exit and EOF); stop what it left running, e.g. a daemon it forked (as
    systemd stops the rest of a service's control group), so that nothing outlives its run
    untracked and the next run starts clean. Orphans with nothing to name them (no spawn id)
    too, while no other child runs: then they cannot be another child's."""
    ended = await proc.terminate(grace_s, strays=not SPAWNED)
    if not ended.signals_sent:
        return info
    if proc.killed:  # a second stop signal killed the group, the command with it: it
        return ended  # left nothing running (its exit record says SIGKILL)
    left = proc.signalled
    await ctx.event("error", code="left-running", run=n, count=left, message=(
        f"run {n}: " + left_behind("the command", "kept running", left, ended.stragglers)))
    return ended


async def end_holders(proc: Proc, grace_s: float, ctx: SourceContext, n: int,
                      drain_s: float) -> ExitInfo:
    """The command of run `n` exited but what it started kept its output open `drain_s`:
    stop its tree."""
    stopped = await proc.terminate(grace_s)
    if stopped.signals_sent:
        left = proc.signalled
        kept = f"kept its output open for {drain_s:g}s"
        await ctx.event("error", code="output-held-open", run=n, count=left,
                        message=f"run {n}: " + left_behind(
                            "the command", kept, left, stopped.stragglers))
    return stopped
