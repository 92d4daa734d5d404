"""Processes re-parented to the runner that no child's tree claims, ended when the runner stops."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable

from watchrun.process.tree import HELPERS, LINUX, SPAWNED, Stat, read_table, reap_adopted

__all__ = ["end_strays", "strays"]

KILL_ROUNDS_S = 2.0
"""How long SIGKILL is repeated while strays still fork or have members."""


def strays(table: dict[int, Stat]) -> set[int]:
    """Live processes re-parented to us (as subreaper) from a session not ours that are neither
    a spawned child nor a helper, and their descendants: what a child's tree left with nothing
    to name it by (a setsid'd orphan that wiped its environment, so no WATCHRUN_SPAWN_ID)."""
    me, my_sid = os.getpid(), os.getsid(0)
    found = {p for p, st in table.items()
             if st.ppid == me and st.state != "Z" and st.sid != my_sid
             and p not in SPAWNED and p not in HELPERS}
    kids: dict[int, list[int]] = {}
    for p, st in table.items():
        kids.setdefault(st.ppid, []).append(p)
    stack = list(found)
    while stack:
        for kid in kids.get(stack.pop(), []):
            if kid not in found and kid != me and kid not in SPAWNED and kid not in HELPERS \
                    and table[kid].state != "Z":
                found.add(kid)
                stack.append(kid)
    return found


async def end_strays(grace_s: float, hurry: Callable[[], bool]) -> int:
    """SIGTERM the strays, wait up to `grace_s` (until `hurry()` says a second stop signal
    came), SIGKILL what is left, reap them. Only once every child is stopped: then whatever is
    left re-parented to us came from one of them. Returns how many were signalled."""
    if not LINUX:
        return 0
    loop = asyncio.get_running_loop()
    live = await _live()
    signalled = set(live)
    _send(live, signal.SIGTERM)
    deadline = loop.time() + grace_s
    while live and loop.time() < deadline and not hurry():
        await asyncio.sleep(min(0.05, max(0.0, deadline - loop.time())))
        live = await _live()
    deadline = loop.time() + KILL_ROUNDS_S
    while live and loop.time() < deadline:
        signalled |= live
        _send(live, signal.SIGKILL)
        await asyncio.sleep(0.01)
        live = await _live()
    return len(signalled)


async def _live() -> set[int]:
    """The strays now (the /proc scan in a thread); adopted zombies reaped on the loop."""
    table = await asyncio.to_thread(read_table)
    me = os.getpid()
    reap_adopted({p: st for p, st in table.items() if st.state == "Z" and st.ppid == me})
    return strays(table)


def _send(pids: set[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
