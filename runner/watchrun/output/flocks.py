"""Who holds a file's flock: read from /proc/locks, so no lock is taken to find out."""

from __future__ import annotations

import os
from pathlib import Path

from watchrun.output import safefs

__all__ = ["holders", "holders_of", "is_process"]

_LOCKS_BYTES = 16 << 20
"""At most this much of /proc/locks is read (a line per lock held on the machine)."""


def holders_of(st: os.stat_result) -> list[int]:
    """The pids holding a flock on the file of `st` (none: []); OSError when /proc/locks cannot
    be read. An entry names the file by device and inode; where no entry has the device stat
    gives (btrfs gives a subvolume's own device, /proc/locks the filesystem's), entries with the
    inode alone count: `is_process` then tells a runner from a stranger."""
    with open("/proc/locks", "rb") as f:
        data = f.read(_LOCKS_BYTES)
    exact = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}".encode()
    inode = f":{st.st_ino}".encode()
    same, near = [], []
    for line in data.splitlines():
        parts = line.split()  # "1: FLOCK ADVISORY WRITE 1234 08:01:5678 0 EOF" ("->": a waiter)
        if len(parts) < 6 or parts[1] != b"FLOCK" or not parts[4].isdigit():
            continue
        if parts[5] == exact:
            same.append(int(parts[4]))
        elif parts[5].endswith(inode):
            near.append(int(parts[4]))
    return same or near


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
