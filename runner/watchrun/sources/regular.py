"""Open a watched path for reading: a regular file whose size says what it holds, or an OSError
saying what is there instead (a socket, a FIFO, a procfs pseudo-file, the runner's records)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import NoReturn

from watchrun.config.loader import file_kind
from watchrun.inotify import fs_type
from watchrun.output.livefile import writing
from watchrun.output.selflog import OWN_LOG, own_log

PSEUDO_FS = {
    0x9FA0: "procfs", 0x62656572: "sysfs", 0x27E0EB: "cgroup", 0x63677270: "cgroup2",
    0x64626720: "debugfs", 0x74726163: "tracefs", 0x73636673: "securityfs",
    0x62656570: "configfs", 0xCAFE4A11: "bpf", 0x42494E4D: "binfmt_misc",
    0x65735543: "fusectl", 0xF97CFF8C: "selinuxfs", 0x43415D53: "smackfs",
    0x6E667364: "nfsd", 0x67596969: "rpc_pipefs",
}
"""statfs(2) `f_type`s of the kernel's pseudo file systems, wherever they are mounted (a host's
/proc at /host/proc, /sys/fs/cgroup, /sys/kernel/tracing): a file there is made as it is read,
and its size (0, or sysfs's 4096) says nothing of what it holds."""


def open_regular(path: Path | str) -> tuple[int, os.stat_result]:
    """Open for reading (never blocks on a FIFO); OSError unless it is a regular file whose size
    says what it holds, naming what it is otherwise: a follower reads up to the size, so a
    pseudo-file would be read as empty, or as whatever it held once, and said so nowhere."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # (a socket, a device with no driver: no file to open)
            raise
        _refuse_other(path, exc)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(st.st_mode)
        if (own := runners_own(st)) is not None:
            raise OSError(errno.ELOOP, own)
        pseudo = PSEUDO_FS.get(fs_type(fd) or 0)
        if pseudo is not None:
            raise OSError(errno.EINVAL, f"is a {pseudo} pseudo-file, not a regular file: its "
                          "size says nothing of what it holds, so it cannot be followed (watch "
                          "`cat` of it as a command instead)")
    except OSError:
        os.close(fd)
        raise
    return fd, st


def runners_own(st: os.stat_result) -> str | None:
    """Why the file of `st` is not to be read, when it is one the runner writes: its records
    (reached through a link) or its own log (its stderr): a watcher of either would record, or
    echo, each match again without end. None for any other file."""
    own = writing((st.st_ino, st.st_dev))
    if own is not None:
        return (f"it is {own}, the runner's own records (through a link): a watcher of its "
                "records would record each match again, without end")
    return OWN_LOG if own_log((st.st_ino, st.st_dev)) else None


def _refuse_other(path: Path | str, exc: OSError) -> NoReturn:
    """`exc` (ENXIO) said as what is at `path` when it is no regular file; else raised as is."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        raise exc from None
    raise (exc if stat.S_ISREG(mode) else _not_regular(mode)) from None


def _not_regular(mode: int) -> OSError:
    code = errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL
    return OSError(code, f"is {file_kind(mode)}, not a regular file")
