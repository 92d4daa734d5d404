"""The process groups a runner started, kept in `state/processes.json` and told to the guardian,
so that neither a SIGKILLed runner nor the next runner of the same output dir leaves them running.

A group is named by its id and its leader's start time (pid reuse cannot fake both; for a
leader that exited before it was recorded, the time just before its fork), plus the spawn id its
members inherit (which also finds those that left the group with setsid). Members are verified
in /proc before anything is signalled (`Group`, `members` and `end_groups` are the guardian
process's, `guardian.py`: the runner ends a dead predecessor's groups as the guardian would).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from watchrun.output import flocks, safefs
from watchrun.process.guardian import Group, end_groups, members
from watchrun.process.procstat import start_time

__all__ = ["PROCESSES", "Group", "GroupRegistry", "agent_processes", "end_groups",
           "end_leftovers", "leftover_groups", "members"]

PROCESSES = "processes.json"
"""The runner's groups file, in the output dir's `state/`."""

PROCESSES_BYTES = 16 << 20
"""A groups file is read up to this much (a runner's own holds a few hundred bytes a group)."""


def leftover_groups(path: Path, lock: Path | None = None) -> tuple[int | None, list[Group]]:
    """The groups recorded in `path` by a runner that is no longer alive: (its pid, groups).
    A live recorder (same pid and start time) leaves nothing to clean up; so does a missing or
    unreadable file. The file says whom to signal, so only the runner's own regular file is
    believed: a symlink, FIFO, hard link or another user's file raises `UnsafePathError`.
    `lock`: the lock the recorder holds for its life (an `agent run`'s stream lock), which the
    kernel tells held from any pid namespace, where the recorder's pid may be another process
    here: while a process holds it, nothing is left over. The file is read under a shared lock
    on it (`flocks.share`), so an `agent run` that starts meanwhile waits, and then writes
    its own; a lock that cannot be opened leaves nothing to end (it cannot be told)."""
    if lock is None:
        return _recorded(path)
    try:
        fd = safefs.open_read(lock)
    except FileNotFoundError:  # (no `agent run` of it ever took it)
        return _recorded(path)
    except OSError:
        return None, []
    try:
        return _recorded(path) if flocks.share(fd) else (None, [])
    finally:
        os.close(fd)


def _recorded(path: Path) -> tuple[int | None, list[Group]]:
    """`leftover_groups` by the recorder's pid and start time."""
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


def end_leftovers(path: Path, grace_s: float, lock: Path | None = None
                  ) -> tuple[int | None, int]:
    """End what a dead recorder of `path` left running: (its pid, processes signalled).
    Blocking: run it in a thread. `lock` and `UnsafePathError` as in `leftover_groups`."""
    pid, groups = leftover_groups(path, lock)
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
