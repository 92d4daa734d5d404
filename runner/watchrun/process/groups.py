"""The process groups a runner started, kept in `state/processes.json` and told to the guardian,
so that neither a SIGKILLed runner nor the next runner of the same output dir leaves them running.

A group is named by its id and its leader's start time (pid reuse cannot fake both; for a
leader that exited before it was recorded, the time just before its fork), plus the spawn id its
members inherit (which also finds those that left the group with setsid). Members are verified
in /proc before anything is signalled.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from watchrun.output import safefs
from watchrun.process.tree import LINUX, Stat, read_table, spawn_id_of, start_time

__all__ = ["PROCESSES", "Group", "GroupRegistry", "agent_processes", "end_groups",
           "end_leftovers", "leftover_groups", "members"]

PROCESSES = "processes.json"
"""The runner's groups file, in the output dir's `state/`."""

PROCESSES_BYTES = 16 << 20
"""A groups file is read up to this much (a runner's own holds a few hundred bytes a group)."""
KILL_ROUNDS_S = 2.0
"""How long SIGKILL is repeated while a killed tree still forks or has members."""


class Group(NamedTuple):
    """A process group the runner started (a tuple: the guardian imports no msgspec)."""

    pgid: int
    start: int
    """Start time of the leader (clock ticks since boot)."""
    spawn_id: str

    def told(self) -> str:
        """The line that registers it with the guardian (`process/guard.py`)."""
        return f"+{self.pgid} {self.start} {self.spawn_id}\n"


def members(table: dict[int, Stat], group: Group, ids: Callable[[int], str | None]) -> set[int]:
    """Live processes of `group`, each started no earlier than its leader: those in its process
    group that carry no other spawn id, and those carrying its spawn id wherever they are (a
    setsid escapee keeps its environment). While a group has members its id cannot be reused, so
    a live process whose pid is the group id must be the leader itself (same start time);
    otherwise the group ended long ago and the id now names someone else's group: only the
    spawn id (random, one per child) then identifies members."""
    leader = table.get(group.pgid)
    reused = leader is not None and leader.start != group.start
    found = set()
    for pid, st in table.items():
        if st.start < group.start or st.state == "Z":
            continue
        if st.pgid == group.pgid and not reused:
            if ids(pid) in (None, "", group.spawn_id):  # unreadable, cleared, or ours
                found.add(pid)
        elif group.spawn_id and ids(pid) == group.spawn_id:
            found.add(pid)  # left the group (setsid) but is one of ours
    return found


def end_groups(groups: list[Group], grace_s: float, sleep: Callable[[float], None] = time.sleep
               ) -> int:
    """SIGTERM every verified member of `groups`, wait up to `grace_s`, SIGKILL what is left,
    repeating while the trees still have members. Blocking: run it in a thread. Returns how
    many processes were signalled."""
    if not LINUX or not groups:
        return 0
    ids: dict[tuple[int, int], str | None] = {}
    me = os.getpid()

    def live() -> set[int]:
        table = read_table()

        def owner(pid: int) -> str | None:
            key = (pid, table[pid].start)
            if key not in ids:
                ids[key] = spawn_id_of(pid)
            return ids[key]

        # never this process: a runner started by a predecessor's command carries its spawn id
        return set().union(*(members(table, g, owner) for g in groups)) - {me}

    hit = live()
    signalled = set(hit)
    _kill(hit, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while hit and time.monotonic() < deadline:
        sleep(0.05)
        hit = live()
    deadline = time.monotonic() + KILL_ROUNDS_S
    while hit and time.monotonic() < deadline:
        signalled |= hit
        _kill(hit, signal.SIGKILL)
        sleep(0.01)
        hit = live()
    return len(signalled)


def _kill(pids: set[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def leftover_groups(path: Path) -> tuple[int | None, list[Group]]:
    """The groups recorded in `path` by a runner that is no longer alive: (its pid, groups).
    A live recorder (same pid and start time) leaves nothing to clean up; so does a missing or
    unreadable file. The file says whom to signal, so only the runner's own regular file is
    believed: a symlink, FIFO, hard link or another user's file raises `UnsafePathError`."""
    try:
        doc = json.loads(safefs.read_bytes(path, PROCESSES_BYTES, owned=True))
        runner = doc["runner"]
        pid, start = int(runner["pid"]), int(runner["start"])
        groups = [Group(int(g["pgid"]), int(g["start"]), str(g["spawnId"]))
                  for g in doc["groups"]]
    except safefs.UnsafePathError:
        raise
    except (OSError, ValueError, KeyError, TypeError):
        return None, []
    if start_time(pid) == start:
        return pid, []
    return pid, groups


def agent_processes(name: str) -> str:
    """The groups file of `agent run NAME` (its own: it may run beside a runner whose config
    does not name the agent)."""
    return f"agent-{name}.{PROCESSES}"


def end_leftovers(path: Path, grace_s: float) -> tuple[int | None, int]:
    """End what a dead recorder of `path` left running: (its pid, processes signalled).
    Blocking: run it in a thread. Raises `UnsafePathError` as `leftover_groups` does."""
    pid, groups = leftover_groups(path)
    return pid, end_groups(groups, grace_s) if groups else 0


class GroupRegistry:
    """The live groups of this runner: every change rewrites `path` (tmp + rename) and goes to
    the guardian. No fsync: a power loss ends the processes too."""

    def __init__(self, path: Path | None, tell: Callable[[str], None] | None = None,
                 on_error: Callable[[str], None] | None = None,
                 prepare: Callable[[], None] | None = None) -> None:
        self.path, self._tell, self._on_error = path, tell, on_error
        self.prepare = prepare or (lambda: None)
        """Called before each child is spawned (the guardian is started on the first)."""
        self._failing = False
        self.groups: dict[int, Group] = {}
        me = os.getpid()
        self._runner = {"pid": me, "start": start_time(me) or 0}
        self._save()

    def add(self, pgid: int, spawn_id: str, forked_at: int) -> None:
        """`forked_at`: `boot_ticks()` taken before the leader was forked. A leader already
        exited (and reaped by asyncio) has no start time left to read, but its group may have
        members: they started after `forked_at`, which stands in for it."""
        group = Group(pgid, start_time(pgid) or forked_at, spawn_id)
        self.groups[pgid] = group
        if self._tell is not None:
            self._tell(group.told())
        self._save()

    def remove(self, pgid: int) -> None:
        if self.groups.pop(pgid, None) is None:
            return
        if self._tell is not None:
            self._tell(f"-{pgid}\n")
        self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        doc = {"runner": self._runner,
               "groups": [{"pgid": g.pgid, "start": g.start, "spawnId": g.spawn_id}
                          for g in self.groups.values()]}
        try:
            safefs.write_atomic(self.path, json.dumps(doc).encode(), sync=False)  # no link followed
        except OSError as exc:  # the guardian and pdeathsig still end the groups: say it once
            if not self._failing and self._on_error is not None:
                self._on_error(f"cannot record process groups in {self.path}: {exc.strerror}; "
                               "a later runner will not find what this one leaves")
            self._failing = True
        else:
            self._failing = False
