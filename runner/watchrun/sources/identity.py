"""Which generation of a file an open descriptor holds: fingerprints of the head and of the
bytes just before a position, so a rename, a copy, a truncation or a rewrite is told apart."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

FINGERPRINT_BYTES = 1024
"""A generation is identified by the hash of (up to) its first 1024 bytes, plus device and
inode; a position in it by the hash of (up to) the 1024 bytes before it."""


def fingerprint(data: bytes) -> str:
    """sha256 hex of some bytes; compare only over the same number of bytes."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class Checkpoint:
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
    """Read to its end and released (rotated away or deleted, and idle for rotateWait)."""

    @property
    def unread(self) -> int:
        """Bytes known to exist past the checkpointed offset."""
        return max(0, self.size - self.offset)


def tail_before(fd: int, offset: int) -> bytes:
    """The (up to) FINGERPRINT_BYTES bytes just before `offset`."""
    n = min(FINGERPRINT_BYTES, offset)
    return os.pread(fd, n, offset - n) if n else b""


def holds(cp: Checkpoint, fd: int, st: os.stat_result) -> bool:
    """True when the open file holds the checkpoint's content up to its offset: the same first
    bytes and the same bytes before the offset. The generation itself, or a copy of it. A
    checkpoint of an empty file holds no content to recognise: nothing holds it."""
    if not cp.fingerprint_len or st.st_size < cp.offset:
        return False
    head = os.pread(fd, cp.fingerprint_len, 0)
    if len(head) != cp.fingerprint_len or fingerprint(head) != cp.fingerprint:
        return False
    if cp.tail_len:
        tail = os.pread(fd, cp.tail_len, cp.offset - cp.tail_len)
        return len(tail) == cp.tail_len and fingerprint(tail) == cp.tail
    return True


def identifies(cp: Checkpoint, fd: int, st: os.stat_result) -> bool:
    """True when the open file is the checkpoint's generation: same device and inode, and it
    still holds what was read (an inode can be reused; a file can be rewritten in place)."""
    if (st.st_dev, st.st_ino) != (cp.dev, cp.inode):
        return False
    return holds(cp, fd, st) if cp.fingerprint_len else st.st_size >= cp.offset


def position(dev: int, inode: int, mtime_ns: int, head: bytes, tail: bytes, offset: int,
             line_no: int, path: str, *, size: int = 0, finished: bool = False) -> Checkpoint:
    """The checkpoint of a generation at `offset`, given its head and the bytes before it."""
    return Checkpoint(dev, inode, fingerprint(head), offset, line_no, path, len(head),
                      fingerprint(tail), len(tail), max(offset, size), mtime_ns, finished)
