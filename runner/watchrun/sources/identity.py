"""Which generation of a file an open descriptor holds: fingerprints of the head and of the
bytes just before a position, and the inode's generation number, so a rename, a copy, a
truncation, a rewrite or an inode number given to a new file is told apart."""

from __future__ import annotations

import array
import fcntl
import hashlib
import os
import struct
from collections.abc import Callable

from msgspec import Struct

from watchrun.inotify import REMOTE_FS, fs_type
from watchrun.preads import pread_full

FINGERPRINT_BYTES = 1024
"""A generation is identified by the hash of (up to) its first 1024 bytes, plus device and
inode; a position in it by the hash of (up to) the 1024 bytes before it."""

NUMBERED_ANEW = {"fuse", "cifs", "smb", "smb2"}
"""File systems whose inode numbers may not outlive a mount (FUSE without `use_ino`, sshfs among
them; CIFS `noserverino`): there a file under another inode number may be the same file."""


Archive = tuple[int, int, int, int]
"""A compressed sibling as judged once (lost lines or none), or a plain one beside the file
when its watcher began (`sources/first_look.py`): its device, inode, size and mtime in ns,
which a rename (logrotate's renumbering) keeps."""


FS_IOC_GETVERSION = 0x80087601
"""_IOR('v', 1, long): the inode's generation number, which ext4, xfs and btrfs change each
time they give an inode number to a new file."""


def inode_generation(fd: int) -> int | None:
    """The generation number of the open file's inode; None where the file system keeps none
    (tmpfs answers ENOTTY). One ioctl: taken once per opened generation, never per read."""
    buf = array.array("l", [0])
    try:
        fcntl.ioctl(fd, FS_IOC_GETVERSION, buf, True)
    except OSError:
        return None
    return int(buf[0])


_AT_FDCWD, _AT_EMPTY_PATH, _STATX_BTIME = -100, 0x1000, 0x800
_BTIME = struct.Struct("=I76xqI")  # stx_mask, then stx_btime's seconds and ns at offset 80


def birth_ns(where: int | str | os.PathLike[str]) -> int | None:
    """When the inode of an open descriptor or of a path (followed) was made, in ns (`statx`'s
    birth time); None where the file system or the C library does not tell. Asked of a file
    that could not be opened, to tell it from a new file given its inode number later (with no
    descriptor there is no generation number to ask)."""
    import ctypes  # (at first use: most runs never ask)

    statx = getattr(ctypes.CDLL(None), "statx", None)
    if statx is None:
        return None
    buf = ctypes.create_string_buffer(256)
    fd, path, flags = ((where, b"", _AT_EMPTY_PATH) if isinstance(where, int)
                       else (_AT_FDCWD, os.fsencode(where), 0))
    if statx(fd, path, flags, _STATX_BTIME, buf) != 0:
        return None
    mask, sec, nsec = _BTIME.unpack_from(buf)
    return int(sec * 1_000_000_000 + nsec) if mask & _STATX_BTIME else None


def fingerprint(data: bytes) -> str:
    """sha256 hex of some bytes; compare only over the same number of bytes."""
    return hashlib.sha256(data).hexdigest()


FINISHED_KEPT = 64
"""How many finished generations a followed file remembers (more when limits.maxGenerations
is more): one released early and written to again is found again beside the path, and one
forgotten was taken for a new generation and read again from its first line."""


class Checkpoint(Struct, frozen=True):
    """Where a file watcher is in one generation of its file: the next unread complete line."""

    dev: int
    inode: int
    fingerprint: str
    """sha256 hex of the first `fingerprint_len` bytes of the file."""
    offset: int
    """Byte offset just past the last line whose record was written."""
    line_no: int
    """Line number of the line starting at `offset` (1-based)."""
    path: str
    """Where the generation was last seen (a symlink's target: its real path)."""
    fingerprint_len: int
    """How many head bytes `fingerprint` covers (a small file that grows keeps its prefix)."""
    tail: str = ""
    """sha256 hex of the `tail_len` bytes just before `offset`."""
    tail_len: int = 0
    size: int = 0
    """The largest size seen: bytes past `offset` up to here existed and were not recorded."""
    mtime_ns: int = 0
    """Its modification time when last looked at: generations rotated later are newer."""
    finished: bool = False
    """Read to its end and released (rotated away or deleted, and idle for rotateWait; or
    rotated away, deleted and read to its end at a live watcher's stop: `stopped.at_stop`)."""
    seq: int | None = None
    """Every record of a line past `offset` has at least this seq (after a crash, the records
    from it on say what was read past the checkpoint)."""
    since: int = 0
    """The seq of the `rotate` record its records follow (0: none, it was read from the
    start), so they are told apart from those of other generations read from its inode."""
    deleted: bool = False
    """It had no name left when last looked at: a file found with its inode later is another
    (ext4 gives a deleted file's inode to the next new file at once)."""
    announce: str = ""
    """The `rotate` record (its fields as JSON) not written yet when this was saved: written
    before its first line; its records follow the first `rotate` into its inode from `seq`."""
    inode_gen: int | None = None
    """The inode's generation number (`inode_generation`); None: not known (a file system that
    keeps none, a checkpoint saved before it was kept): the fingerprints alone decide."""
    released_early: bool = False
    """Released (finished) by limits.maxGenerations while it may still have been written to,
    at `size`: found grown past that later, what it grew by was not read (a `gap`)."""
    beside: bool = False
    """Never read: beside the file when the watcher first looked at it, with no checkpoint yet
    (`sources/first_look.py`), checkpointed at its size then (`line_no` 1, not counted: never
    read on from, it is no generation read before when it comes to the path); found grown
    past `size` later, what it grew by was not read either (a `gap`)."""
    mid_line: bool = False
    """`offset` is inside line `line_no`: a once run recorded its head, up to `offset`, when it
    had no newline yet (it matched); its rest, up to its newline, is passed over, not judged
    again."""
    born: int | None = None
    """Where the file system keeps no generation number (tmpfs): when its inode was made
    (`birth_ns`), which says the same file is at the inode number still (truncated or rewritten
    in place), never that another is (overlayfs gives a file copied up a new birth time)."""

    @property
    def unread(self) -> int:
        """Bytes known to exist past the checkpointed offset."""
        return max(0, self.size - self.offset)


def tail_before(fd: int, offset: int) -> bytes:
    """The (up to) FINGERPRINT_BYTES bytes just before `offset` (fewer: the file ends first)."""
    n = min(FINGERPRINT_BYTES, offset)
    return pread_full(fd, n, offset - n) if n else b""


def holds(cp: Checkpoint, fd: int) -> bool:
    """True when the open file holds the checkpoint's content up to its offset: the same first
    bytes and the same bytes before the offset, as reads return them (not the size `fstat`
    reports, which may lag the data: `Generation.rewritten`). The generation itself, or a copy
    of it. A checkpoint of an empty file holds no content to recognise: nothing holds it."""
    if not cp.fingerprint_len or not (same_head(cp, fd) or (cp.tail_len and _holed(cp, fd))):
        return False
    if cp.tail_len:
        tail = pread_full(fd, cp.tail_len, cp.offset - cp.tail_len)
        return len(tail) == cp.tail_len and fingerprint(tail) == cp.tail
    return True


def punched(head: bytes, now: bytes) -> bool:
    """`now`, what the first bytes `head` read as later, differs from them only by NUL bytes:
    a hole punched there (`fallocate --punch-hole`), not a rewrite."""
    return len(now) == len(head) and all(n == h or not n for n, h in zip(now, head, strict=True))


def _holed(cp: Checkpoint, fd: int) -> bool:
    """The checkpointed first bytes read as NUL now, every one (a hole punched over them: what
    they were is known only by their fingerprint, so a partly punched head is not told)."""
    head = pread_full(fd, cp.fingerprint_len, 0)
    return len(head) == cp.fingerprint_len and not head.strip(b"\0")


def same_head(cp: Checkpoint, fd: int) -> bool:
    """The open file starts with the checkpointed generation's first bytes (False when the
    checkpoint has none: nothing to compare)."""
    head = pread_full(fd, cp.fingerprint_len, 0) if cp.fingerprint_len else b""
    return bool(head) and len(head) == cp.fingerprint_len and fingerprint(head) == cp.fingerprint


def begins_as(cp: Checkpoint, head: bytes) -> bool:
    """`head`, the first FINGERPRINT_BYTES of some content (all of it when it holds fewer),
    begins with the checkpointed generation's first bytes; and when that generation is
    finished and held fewer than FINGERPRINT_BYTES, `head` holds no more than it did."""
    n = cp.fingerprint_len
    if not n or len(head) < n or fingerprint(head[:n]) != cp.fingerprint:
        return False
    return not cp.finished or n == FINGERPRINT_BYTES or len(head) == n


def other_generation(cp: Checkpoint, gen: int | None) -> bool:
    """The inode number was given to another file since the checkpoint: both generation
    numbers are known and differ (unknown on either side: nothing is said)."""
    return cp.inode_gen is not None and gen is not None and gen != cp.inode_gen


def same_generation(cp: Checkpoint, gen: int | None, born: Callable[[], int | None]) -> bool:
    """The inode number still belongs to the checkpointed file (its content may have been
    truncated or rewritten since): both generation numbers are known and equal; or, where the
    file system keeps none, both birth times (`born()`: the open file's, asked only then)."""
    if cp.inode_gen is not None:
        return gen == cp.inode_gen
    return cp.born is not None and gen is None and born() == cp.born


def identifies(cp: Checkpoint, fd: int, st: os.stat_result, gen: int | None) -> bool:
    """True when the open file is the checkpoint's generation: same device, inode and inode
    generation number (`gen`, the open file's `inode_generation`; None: not known), and it
    still holds what was read (an inode can be reused; a file can be rewritten in place)."""
    if (st.st_dev, st.st_ino) != (cp.dev, cp.inode) or cp.deleted or other_generation(cp, gen):
        return False
    return holds(cp, fd) if cp.fingerprint_len else st.st_size >= cp.offset


def renumbered(cp: Checkpoint, fd: int, st: os.stat_result) -> bool:
    """True when the open file holds the checkpoint's generation under another device or inode
    number: a remount gives a network, FUSE or overlay file system the next free device number,
    and FUSE without `use_ino` or CIFS `noserverino` number inodes anew. The bytes decide
    (`holds`: the head and the bytes before the offset), but only where the numbers could have
    changed under the same file: another device number (a remount) with the same inode number
    on any file system, another inode number only on one that makes them anew (`NUMBERED_ANEW`).
    Elsewhere a file under another inode number is another file, however it begins (a log
    made again with the same banner: read from its first line, the old one's unread end a gap).
    Not a generation checkpointed deleted: it is gone, whatever holds its bytes."""
    if (st.st_dev, st.st_ino) == (cp.dev, cp.inode) or cp.deleted:
        return False
    if st.st_ino != cp.inode and REMOTE_FS.get(fs_type(fd) or 0) not in NUMBERED_ANEW:
        return False
    return holds(cp, fd)


def position(dev: int, inode: int, mtime_ns: int, head: bytes, tail: bytes, offset: int,
             line_no: int, path: str, *, size: int = 0, finished: bool = False,
             seq: int | None = None, since: int = 0, deleted: bool = False,
             announce: str = "", inode_gen: int | None = None, beside: bool = False,
             mid_line: bool = False, born: int | None = None) -> Checkpoint:
    """The checkpoint of a generation at `offset`, given its head and the bytes before it."""
    return Checkpoint(dev, inode, fingerprint(head), offset, line_no, path, len(head),
                      fingerprint(tail), len(tail), max(offset, size), mtime_ns, finished, seq,
                      since, deleted, announce, inode_gen, beside=beside, mid_line=mid_line,
                      born=born)
