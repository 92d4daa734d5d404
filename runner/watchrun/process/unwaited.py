"""A child forked whose start then failed, so that no one waits for it (on Python 3.11 asyncio
starts a thread per child after the fork, which a process limit can refuse): found by its spawn
id, its process group killed and the child reaped, so none runs on untracked."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from watchrun.process.tree import scan

__all__ = ["REAP_S", "end_unwaited"]

REAP_S = 5.0
"""How long a killed child is waited for before it is left to the orphan reaper."""
_LOOK_S = 0.01
_NPROC = "the limit on processes and threads is reached: `ulimit -u`, or a cgroup's pids.max"


async def end_unwaited(spawn_id: str, exc: RuntimeError) -> str:
    """After `exc` escaped a spawn: SIGKILL the process group of every process started with
    `spawn_id`, reap those that are this process's children, and say why, as a spawn error
    does (EAGAIN: a process limit refused the thread that would wait for it). Raises `exc`
    when there is no such process (no fork happened: a bug, not a limit). The scan of /proc
    runs on the loop, as no thread may be had: rare, and a few ms."""
    table = scan()
    found = table.owners.get(spawn_id, [])
    if not found:
        raise exc
    for pid in found:
        with contextlib.suppress(OSError):
            os.killpg(table.stats[pid].pgid, signal.SIGKILL)
    me = os.getpid()
    await _reap({pid for pid in found if table.stats[pid].ppid == me})
    return f"{exc} to wait for it, so it was ended (EAGAIN; {_NPROC})"


async def _reap(children: set[int]) -> None:
    """waitpid() each of `children` (killed) as it ends, for at most REAP_S; those left then
    are the orphan reaper's (`tree.reap_orphans`: they are in no SPAWNED)."""
    deadline = asyncio.get_running_loop().time() + REAP_S
    while children:
        for pid in list(children):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # (reaped by the orphan reaper meanwhile)
                done = pid
            if done:
                children.discard(pid)
        if not children or asyncio.get_running_loop().time() >= deadline:
            return
        await asyncio.sleep(_LOOK_S)
