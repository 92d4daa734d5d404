"""A file's flock: whether it is held (the kernel says), who holds it (/proc/locks), taking it."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from watchrun.output import safefs

__all__ = ["held", "holder", "holders", "holders_of", "is_process", "pid_said", "probe", "share",
           "take"]

_LOCKS_BYTES = 16 << 20
"""At most this much of /proc/locks is read (a line per lock held on the machine)."""
_TAKE_S = 0.25
"""How long `take` tries again when refused: a `probe` holds a shared lock for an instant."""
_TAKE_POLL_S = 0.002


def share(fd: int) -> bool:
    """A shared flock on `fd`, kept until it is let go (`LOCK_UN`, or the file closed), taken
    without waiting: False when another open file holds the file exclusively."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def probe(fd: int) -> bool:
    """Whether another open file holds an exclusive flock on the file of `fd`: a shared lock
    tried and let go at once is refused. The kernel answers, so a holder in any pid namespace
    counts (/proc/locks lists only the locks of processes its own pid namespace can see)."""
    if not share(fd):
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def held(path: Path) -> bool:
    """`probe` of the file at `path` (opened with no symlink followed); False when it is not
    there, OSError when it cannot be opened."""
    try:
        fd = safefs.open_read(path)
    except FileNotFoundError:
        return False
    try:
        return probe(fd)
    finally:
        os.close(fd)


def take(fd: int) -> None:
    """`flock(LOCK_EX)` on `fd` without waiting for its holder: BlockingIOError when another
    process holds it. A `probe` (of any process) holds it shared for an instant, and a
    `share` while it reads a small file, so a refusal is tried again for up to _TAKE_S before
    it stands."""
    until = time.monotonic() + _TAKE_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= until:
                raise
        time.sleep(_TAKE_POLL_S)


def holders_of(st: os.stat_result) -> list[int]:
    """The pids, as this process's /proc sees them, holding an exclusive flock on the file of
    `st` (none: [], also when their pid namespace is hidden from this one: `probe` tells);
    OSError when /proc/locks cannot be read. A shared lock (a `probe`) holds nothing. An entry
    names the file by device and inode; where no entry has the device stat gives (btrfs gives
    a subvolume's own device, /proc/locks the filesystem's), an entry with the inode alone
    counts only when its pid has the file itself open (the same inode on another file system,
    a tmpfs, is another file: a stranger's lock)."""
    with open("/proc/locks", "rb") as f:
        data = f.read(_LOCKS_BYTES)
    exact = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}".encode()
    inode = f":{st.st_ino}".encode()
    same, near = [], []
    for line in data.splitlines():
        parts = line.split()  # "1: FLOCK ADVISORY WRITE 1234 08:01:5678 0 EOF" ("->": a waiter)
        if (len(parts) < 6 or parts[1] != b"FLOCK" or parts[3] != b"WRITE"
                or not parts[4].isdigit()):
            continue
        if parts[5] == exact:
            same.append(int(parts[4]))
        elif parts[5].endswith(inode):
            near.append(int(parts[4]))
    return same or [pid for pid in near if _has_open(pid, st)]


def _has_open(pid: int, st: os.stat_result) -> bool:
    """Whether process `pid` has the file of `st` open (False when its fds cannot be read)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            other = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            return True
    return False


def holders(path: Path) -> list[int]:
    """`holders_of` the file at `path` (opened with no symlink followed); [] when it is not
    there."""
    try:
        fd = safefs.open_read(path)
    except FileNotFoundError:
        return []
    try:
        return holders_of(os.fstat(fd))
    finally:
        os.close(fd)


def holder(st: os.stat_result) -> int | None:
    """The first of `holders_of` the file of `st`; None when none is visible from here (a
    holder in a pid namespace this one cannot see) or /proc/locks cannot be read."""
    try:
        found = holders_of(st)
    except OSError:
        return None
    return found[0] if found else None


def pid_said(pid: int | None) -> str:
    """A holder's pid for a message: `pid N`, or `pid not visible from here` (never the pid a
    holder in another pid namespace wrote: here that may be another process, or init)."""
    return f"pid {pid}" if pid is not None else "pid not visible from here"


def is_process(holder: int, pid: int) -> bool:
    """Whether `holder` (a pid as this process sees it) is the process that calls itself `pid`:
    the same number, or `pid` in a pid namespace nested in this one (its `NSpid` line: a
    runner in a container, looked at from the host)."""
    if holder == pid:
        return True
    try:
        with open(f"/proc/{holder}/status", "rb") as f:
            for line in f:
                if line.startswith(b"NSpid:"):
                    return str(pid).encode() in line.split()[2:]
    except OSError:
        pass
    return False
