"""Whole reads of an open file at an offset, on file systems whose reads may return fewer bytes."""

from __future__ import annotations

import os

PART_MAX = 1 << 24
"""A read asks for at most this much at once (a buffer of that size, not of the whole count)."""


def pread_full(fd: int, n: int, offset: int) -> bytes:
    """The `n` bytes of the file at `offset`, fewer only where it ends there.

    A `pread` may return fewer bytes than asked before the end of the file (POSIX allows it;
    FUSE with `direct_io` returns what its server answered, as one that answers up to a block
    boundary does): what such a read returned is no end. The rest is asked for until it comes
    or a read returns nothing.
    `os.pread` is looked up at each call (the seam a test replaces with one that reads short)."""
    first = os.pread(fd, min(n, PART_MAX), offset)
    if len(first) >= n or not first:
        return first
    parts, got = [first], len(first)
    while got < n and (part := os.pread(fd, min(n - got, PART_MAX), offset + got)):
        parts.append(part)
        got += len(part)
    return b"".join(parts)
