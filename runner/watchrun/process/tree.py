"""The host's process table from /proc (read by `procstat.py`): who belongs to a spawned tree,
reaping adoptees, and the runner's prctl and rlimit calls."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import resource
import signal
import threading
import time
from collections.abc import Iterator

from watchrun.process.procstat import LINUX, SPAWN_ID, Stat, read_table, spawn_id_of, start_time

__all__ = ["HELPERS", "LINUX", "SPAWNED", "SPAWN_ID", "Stat", "Table", "adopted_zombies",
           "become_subreaper", "boot_ticks", "die_with_parent", "family", "forking",
           "os_error_said", "raise_fd_limit", "read_table", "reap", "reap_adopted",
           "reap_orphans", "scan", "short_of_files", "spawn_id_of", "start_time"]

SPAWNED: set[int] = set()  # live pids we spawned: asyncio's child watcher reaps these, never us
HELPERS: set[int] = set()  # the runner's own children (the guardian): in no tree, reaped by theirs
_in_flight = 0  # spawns between fork and registration; reap_orphans() waits for zero
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_prctl = ctypes.CDLL(None, use_errno=True).prctl if LINUX else None


def become_subreaper(enable: bool = True) -> bool:
    """prctl(PR_SET_CHILD_SUBREAPER): orphaned descendants are re-parented to us, not init."""
    if _prctl is None:
        return False
    return bool(_prctl(_PR_SET_CHILD_SUBREAPER, int(enable), 0, 0, 0) == 0)


_child_nofile: tuple[int, int] | None = None
"""The RLIMIT_NOFILE the runner started with, once it raised its own: its children get it back,
as systemd asks of a program that raises its soft limit (a program that sizes a table by the
limit, closes every descriptor up to it, or uses select() is not handed the hard limit)."""


def die_with_parent(parent: int) -> None:
    """In a child between fork and exec: SIGKILL when the thread that forked it dies (the
    runner's loop thread, i.e. the runner). If the parent is already gone, exit now: the
    signal would never come. The child also gets back the descriptor limit the runner started
    with (`raise_fd_limit`). One setrlimit, one prctl and one getppid: no allocation, no lock."""
    if _child_nofile is not None:
        resource.setrlimit(resource.RLIMIT_NOFILE, _child_nofile)
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(137)


def raise_fd_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit (every watcher, generation, pipe and client
    holds descriptors); return (old soft, new soft)."""
    global _child_nofile
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            _child_nofile = (soft, hard)
            return soft, hard
    return soft, soft


def short_of_files(errno_name: str | None) -> str | None:
    """What to add to an error of a step (opening a JSONL, starting a command) that ran out of
    descriptors: the limit and where to raise it (EMFILE), the system's table (ENFILE); None for
    another errno."""
    if errno_name == "ENFILE":
        return "the system's open-file table is full"
    if errno_name != "EMFILE":
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return (f"this runner may have {soft} files open; each watcher needs a few: raise the "
            "limit with `ulimit -n`, or LimitNOFILE= in its systemd unit")


def limit_hint(exc: BaseException) -> str:
    """` (short_of_files' hint)` for an error of a step that ran out of descriptors (an OSError,
    or a sink's error naming its errno in `errno_name`); "" for any other."""
    name = getattr(exc, "errno_name", None) or errno.errorcode.get(getattr(exc, "errno", 0) or 0)
    hint = short_of_files(name)
    return "" if hint is None else f" ({hint})"


def os_error_said(exc: OSError) -> str:
    """An OS error where none was looked for, as one line: its errno's name, the file and why
    (`EMFILE: /x/state: Too many open files`), with `short_of_files`' hint: never a repr."""
    name = errno.errorcode.get(exc.errno or 0)
    why = exc.strerror or str(exc)
    if exc.filename is not None and str(exc.filename) not in why:
        why = f"{exc.filename}: {why}"
    return f"{name or type(exc).__name__}: {why}{limit_hint(exc)}"


def boot_ticks() -> int:
    """Now, in the units of `start_time` (clock ticks since boot, CLOCK_BOOTTIME as the kernel
    counts it), less one tick: no process started after this call has an earlier start time."""
    return max(0, int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK")) - 1)


@contextlib.contextmanager
def forking() -> Iterator[None]:
    """Marks a spawn in flight (forked, not yet in SPAWNED or HELPERS) for as long as the block
    runs."""
    global _in_flight
    _in_flight += 1
    try:
        yield
    finally:
        _in_flight -= 1


def reap(pids: set[int], table: dict[int, Stat]) -> None:
    """waitpid() adopted zombies by their own pid (never waitpid(-1): asyncio owns the rest)."""
    me = os.getpid()
    for pid in pids:
        st = table.get(pid)
        if st and st.state == "Z" and st.ppid == me and pid not in SPAWNED and pid not in HELPERS:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def adopted_zombies() -> dict[int, Stat]:
    """Zombies whose parent is us (the /proc scan of `reap_orphans`; safe in a thread)."""
    if not LINUX:
        return {}
    me = os.getpid()
    return {p: s for p, s in read_table().items() if s.state == "Z" and s.ppid == me}


def reap_adopted(zombies: dict[int, Stat]) -> int:
    """Reap the zombies of a scan that we did not spawn. On the loop's thread, right after the
    scan: no spawn may be in flight (its fresh child is not in SPAWNED yet)."""
    if _in_flight:
        return 0
    found = set(zombies) - SPAWNED - HELPERS
    reap(found, zombies)
    return len(found)


def reap_orphans() -> int:
    """Reap zombies re-parented to us (as subreaper) that we did not spawn. Call it now and
    then; it relies on every fork in this process going through `Spawner`."""
    if _in_flight:
        return 0
    return reap_adopted(adopted_zombies())


class Table:
    """One scan of the host's processes, indexed for `family`: by parent, session, group and
    spawn id (from each process's environ, read once per process for the whole runner)."""

    __slots__ = ("kids", "owners", "pgids", "sids", "stats")

    def __init__(self, stats: dict[int, Stat]) -> None:
        self.stats = stats
        self.kids: dict[int, list[int]] = {}
        self.sids: dict[int, list[int]] = {}
        self.pgids: dict[int, list[int]] = {}
        self.owners: dict[str | None, list[int]] = {}
        with _ENVIRONS_LOCK:  # (one scan at a time per loop; a second loop may scan too)
            seen = {}
            for p, st in stats.items():
                self.kids.setdefault(st.ppid, []).append(p)
                self.sids.setdefault(st.sid, []).append(p)
                self.pgids.setdefault(st.pgid, []).append(p)
                key = (p, st.start)
                if key in _ENVIRONS:
                    owner = _ENVIRONS[key]  # a zombie too: read while it was alive
                elif st.state != "Z":
                    owner = spawn_id_of(p)  # (a zombie's environ is empty)
                else:
                    continue
                seen[key] = owner
                self.owners.setdefault(owner, []).append(p)
            _ENVIRONS.clear()  # what left the table is gone for good
            _ENVIRONS.update(seen)


_ENVIRONS: dict[tuple[int, int], str | None] = {}
"""(pid, start time) -> the spawn id of its environ, for every process a scan has seen alive."""
_ENVIRONS_LOCK = threading.Lock()


def scan() -> Table:
    """`read_table`, indexed (in a thread: it reads every process's stat, and the environ of
    each new one)."""
    return Table(read_table())


def family(table: Table, pid: int, pgid: int, spawn_id: str, exited: bool,
           members: set[tuple[int, int]], strays: bool = True) -> set[int]:
    """The tree of child `pid`: the child, everything in its session or group, everything
    carrying its spawn id, unattributed orphans re-parented to us (unless `strays` is false:
    they may be another child's), and all descendants of those. `members` remembers the
    (pid, start time) of members across calls (as a zombie one has no environ left to
    recognise it by); `exited`: the child was reaped. Indexed: the cost is the tree's size."""
    me, my_sid, stats = os.getpid(), os.getsid(0), table.stats
    # A reaped child's pid is free except as the id of a live group or session: after the
    # exit match by membership only, never by the bare pid.
    found = {*table.sids.get(pid, ()), *table.pgids.get(pgid, ()), *table.owners.get(spawn_id, ()),
             *(p for p, start in members if p in stats and stats[p].start == start)}
    if not exited and pid in stats:
        found.add(pid)
    if strays and not _in_flight:  # not while a spawn is in flight: its fresh child has our
        # environ until it execs. An unattributed adoptee: a setsid'd orphan that wiped its
        # environment.
        found.update(p for p in table.owners.get("", ()) if stats[p].state != "Z"
                     and stats[p].ppid == me and stats[p].sid != my_sid)
    fam = {p for p in found
           if p not in (me, 1) and p not in HELPERS and (p not in SPAWNED or p == pid)}
    stack = list(fam)
    while stack:
        for kid in table.kids.get(stack.pop(), ()):
            if kid not in fam and kid != me and kid not in SPAWNED and kid not in HELPERS:
                fam.add(kid)
                stack.append(kid)
    members.update((p, stats[p].start) for p in fam)
    return fam
