"""The host's process table read from /proc, with `os` alone: each process's state, parent,
group, session and start time, and the spawn id in its environment.

The guardian process (`guardian.py`) imports it, so it imports nothing else: no typing (a
NamedTuple would load it, ~10 ms of an interpreter start), no collections, no ctypes. The
runner's side of the table (`tree.py`: indexing, reaping) builds on it.
"""

from __future__ import annotations

import os
import sys

__all__ = ["LINUX", "SPAWN_ID", "Plain", "Stat", "read_table", "spawn_id_of", "start_time",
           "stat_fields"]

LINUX = sys.platform.startswith("linux")
SPAWN_ID = "WATCHRUN_SPAWN_ID"  # in every child's env; inherited, so escapees stay attributable


class Plain:
    """A value made of its `__slots__`: compared, hashed and shown by them (a NamedTuple would
    load typing; `Stat` here, the guardian's `Group`)."""

    __slots__: tuple[str, ...] = ()

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in type(self).__slots__)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Plain) and type(other) is type(self)
                and self._fields() == other._fields())

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in type(self).__slots__)
        return f"{type(self).__name__}({shown})"


class Stat(Plain):
    """What the table keeps of one process's /proc/<pid>/stat."""

    __slots__ = ("pgid", "ppid", "sid", "start", "state")

    def __init__(self, state: str, ppid: int, pgid: int, sid: int, start: int) -> None:
        self.state, self.ppid, self.pgid, self.sid, self.start = state, ppid, pgid, sid, start


def stat_fields(path: str) -> list[bytes] | None:
    """The fields of a /proc `stat` file (`/proc/<pid>/stat`, `/proc/self/task/<tid>/stat`)
    after the command's name, which may hold spaces and parens: its state first. None when it
    cannot be read (the process or thread is gone)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return raw[raw.rindex(b")") + 2 :].split()


def start_time(pid: int) -> int | None:
    """The start time of `pid` (clock ticks since boot, /proc/<pid>/stat field 22): with the pid
    it names one process for good, even after the pid is reused. None when it is gone."""
    r = stat_fields(f"/proc/{pid}/stat")
    return None if r is None else int(r[19])


def read_table() -> dict[int, Stat]:
    """Every process on the host, from /proc/<pid>/stat."""
    out: dict[int, Stat] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (r := stat_fields(f"/proc/{name}/stat")) is not None:
            out[int(name)] = Stat(r[0].decode(), int(r[1]), int(r[2]), int(r[3]), int(r[19]))
    return out


def spawn_id_of(pid: int) -> str | None:
    """The WATCHRUN_SPAWN_ID a process was started with: "" if none, None if unreadable."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
    except OSError:
        return None
    key = SPAWN_ID.encode() + b"="
    return next((e[len(key) :].decode() for e in env.split(b"\0") if e.startswith(key)), "")
