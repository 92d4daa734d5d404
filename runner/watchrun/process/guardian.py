"""The guardian process, and the ending of process groups it shares with the runner.

The guardian is a tiny process that outlives a SIGKILLed runner just long enough to end every
process group the runner started (PR_SET_PDEATHSIG reaches only each group's leader). The
runner holds the write end of a pipe that is its stdin and tells it `+PGID START SPAWN_ID` /
`-PGID` as groups come and go (`guard.py`, the runner's side). A clean exit sends `.` first;
end of file without it means the runner died, and the guardian SIGKILLs what is left of each
group (verified in /proc, see `members`). A runner that starts ends a dead predecessor's groups
with the same `end_groups` (`groups.py`).

Every runner with children starts one, so it starts light: `guard.command()` runs `main` in an
interpreter without site and with the environment ignored, and this module imports only os,
errno, time and `procstat.py` (tests/test_guard_imports.py).
"""

from __future__ import annotations

import errno
import os
import time

from watchrun.process.procstat import LINUX, Plain, Stat, read_table, spawn_id_of

TYPE_CHECKING = False  # (typing.TYPE_CHECKING would load typing; mypy reads this one the same)
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["KILL_ROUNDS_S", "Group", "end_groups", "main", "members"]

KILL_ROUNDS_S = 2.0
"""How long SIGKILL is repeated while a killed tree still forks or has members."""
SIGTERM, SIGKILL = 15, 9
"""(Their numbers: the `signal` module would load enum, functools and collections, ~10 ms.)"""


class Group(Plain):
    """A process group the runner started: its id and its leader's start time (pid reuse cannot
    fake both; for a leader that exited before it was recorded, the time just before its fork),
    plus the spawn id its members inherit (which also finds those that left the group with
    setsid). A plain class: the guardian imports neither typing nor msgspec."""

    __slots__ = ("pgid", "spawn_id", "start")

    def __init__(self, pgid: int, start: int, spawn_id: str) -> None:
        self.pgid, self.start, self.spawn_id = pgid, start, spawn_id  # start: clock ticks

    def told(self) -> str:
        """The line that registers it with the guardian."""
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
    _kill(hit, SIGTERM)
    deadline = time.monotonic() + grace_s
    while hit and time.monotonic() < deadline:
        sleep(0.05)
        hit = live()
    deadline = time.monotonic() + KILL_ROUNDS_S
    while hit and time.monotonic() < deadline:
        signalled |= hit
        _kill(hit, SIGKILL)
        sleep(0.01)
        hit = live()
    return len(signalled)


def _kill(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:  # noqa: SIM105 (contextlib would load collections and functools)
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def main() -> int:
    """The guardian: read the runner's lines until `.` (a clean exit) or end of file (the runner
    died: end what is left of every group it told, with no grace period)."""
    groups: dict[int, Group] = {}
    buf = b""
    while True:
        try:
            data = os.read(0, 65536)
        except OSError as exc:
            if exc.errno == errno.EINTR:
                continue
            data = b""
        if not data:
            break
        buf += data
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if line == b".":
                return 0  # the runner stopped cleanly and ended its groups itself
            if line.startswith(b"+"):
                pgid, start, spawn_id = line[1:].decode().split(" ", 2)
                groups[int(pgid)] = Group(int(pgid), int(start), spawn_id)
            elif line.startswith(b"-"):
                groups.pop(int(line[1:]), None)
    end_groups(list(groups.values()), grace_s=0.0)  # the runner died: no grace period
    return 0
