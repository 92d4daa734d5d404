"""Which files hold a compressed stream (gzip, bzip2, xz, zstd, lz4, zip), by a whole valid
header and, for gzip, bzip2 and xz, first bytes that decompress (a text log that begins with
`BZh` is text); and what a compressed generation begins with, to tell one read before."""

from __future__ import annotations

import bz2
import lzma
import os
import struct
import zlib
from collections.abc import Collection

from watchrun.preads import pread_full
from watchrun.sources.identity import FINGERPRINT_BYTES, Checkpoint, begins_as, fingerprint

PROBE = 4096
"""The first bytes of a file that say whether it is compressed (one read)."""
COMPRESSED_READ = 1 << 20
"""At most this much of a compressed sibling is read to see what it begins with (bzip2 gives
nothing of a block, up to 900 kB of text, before the whole block is in)."""
_BROKEN = (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError)


def _decompressor(head: bytes) -> zlib._Decompress | bz2.BZ2Decompressor | \
        lzma.LZMADecompressor | None:
    """A decompressor for the stream `head` begins, when its whole header is there and valid:
    gzip (deflate, no reserved flag), bzip2 (a block size, then a block's or the end's magic),
    xz (the stream header and its CRC32)."""
    if head[:3] == b"\x1f\x8b\x08" and len(head) >= 10 and not head[3] & 0xE0:
        return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    if head[:3] == b"BZh" and head[3:4] in tuple(b"%d" % n for n in range(1, 10)) and \
            head[4:10] in (b"1AY&SY", b"\x17rE8P\x90"):
        return bz2.BZ2Decompressor()
    if head[:6] == b"\xfd7zXZ\x00" and len(head) >= 12 and head[6] == 0 and \
            not head[7] & 0xF0 and struct.unpack("<I", head[8:12])[0] == zlib.crc32(head[6:8]):
        return lzma.LZMADecompressor(lzma.FORMAT_XZ)
    return None


def _other(head: bytes) -> bool:
    """The header of a format not looked into: zstd (a frame header without its reserved bit),
    lz4 (a frame of version 01 with valid flags and block size) or zip (a whole local file
    header with a known version and method and a name, or the end of an empty archive)."""
    if head[:4] == b"\x28\xb5\x2f\xfd":
        return len(head) >= 5 and not head[4] & 0x08
    if head[:4] == b"\x04\x22\x4d\x18":
        return len(head) >= 7 and head[4] >> 6 == 1 and not head[4] & 0x02 and \
            not head[5] & 0x8F and (head[5] >> 4) & 7 >= 4
    if head[:4] == b"PK\x03\x04" and len(head) >= 30:
        version, _, method = struct.unpack_from("<HHH", head, 4)
        return bool(version <= 100 and method <= 99 and struct.unpack_from("<H", head, 26)[0])
    return head[:4] == b"PK\x05\x06" and len(head) >= 22 and not any(head[4:20])


def compressed(head: bytes) -> bool:
    """`head`, a file's first bytes (PROBE of them, or all it has), begins a compressed stream:
    a whole valid header, and for gzip, bzip2 and xz what follows decompresses so far."""
    d = _decompressor(head)
    if d is None:
        return _other(head)
    try:
        d.decompress(head[:PROBE], 64)
    except _BROKEN:
        return False
    return True


def is_compressed(fd: int) -> bool:
    return compressed(pread_full(fd, PROBE, 0))


def compressed_head(fd: int) -> bytes | None:
    """The first FINGERPRINT_BYTES of what a gzip, bzip2 or xz file holds (all of it when it
    holds fewer; nothing when the file is empty, as one is while its compressor starts), from
    at most COMPRESSED_READ bytes of it; None for other formats, for content that cannot be
    decompressed, and when the head is not within that bound."""
    first = pread_full(fd, 12, 0)
    if not first:
        return b""
    d = _decompressor(first)
    if d is None:
        return None
    out, pos = b"", 0
    try:
        while len(out) < FINGERPRINT_BYTES and pos < COMPRESSED_READ and not d.eof:
            data = os.pread(fd, 64 * 1024, pos)
            if not data:
                return None  # (cut short: still being written, or damaged)
            pos += len(data)
            out += d.decompress(data, FINGERPRINT_BYTES - len(out))
    except _BROKEN:
        return None
    if len(out) < FINGERPRINT_BYTES and (not d.eof or d.unused_data):
        return None  # not within the bound, or more streams follow the first
    return out


def drained_or_empty(fd: int, drained: Collection[Checkpoint]) -> bool:
    """A compressed file holds a generation read to its end (or still open, so read to its
    end yet), or nothing at all: compressing it lost nothing. It holds that generation when it
    holds what was read of it: its first bytes, and the bytes before its offset (decompressed
    that far: first bytes alone are the same in generations that begin with one banner), by
    its first bytes alone past WHOLE_MAX. One decompression, however many begin alike."""
    head = compressed_head(fd)
    if head is None or not head:
        return head is not None
    alike = [cp for cp in drained if begins_as(cp, head)]
    if any(cp.offset > WHOLE_MAX for cp in alike):
        return True
    return bool(alike) and _reads_of(fd, alike) is not False  # (None: being written still,
    # as its first bytes say)


def _reads_of(fd: int, cps: list[Checkpoint]) -> bool | None:
    """Whether the content holds, before one of the checkpoints' offsets, the bytes read just
    before it (their first bytes are the content's already); None when it is cut short first."""
    pending = sorted(cps, key=lambda cp: cp.offset)
    window, total = b"", 0
    try:
        parts = _Parts(fd)
        while pending:
            while pending and pending[0].offset <= total:  # (the bytes before it are in hand)
                cp = pending.pop(0)
                start = len(window) - (total - cp.offset)
                if not cp.tail_len or fingerprint(window[start - cp.tail_len : start]) == cp.tail:
                    return True
            if pending:
                out = parts.next()
                if out is None:
                    return False  # shorter than what was read of the rest
                window, total = (window + out)[-(len(out) + TAIL_KEEP):], total + len(out)
    except _CutShort:
        return None
    except _BROKEN:
        return False
    return False


class _CutShort(Exception):
    """The compressed file ends before its stream does: still being written, or damaged."""


class _Parts:
    """A gzip, bzip2 or xz file's content, decompressed a part at a time (`ValueError` for
    another format: one of _BROKEN)."""

    def __init__(self, fd: int) -> None:
        d = _decompressor(pread_full(fd, 12, 0))
        if d is None:
            raise ValueError("not gzip, bzip2 or xz")
        self.fd, self.pos, self.d = fd, 0, d

    def next(self) -> bytes | None:
        """The next part (maybe empty), None at the stream's end."""
        if self.d.eof:
            return None
        data = os.pread(self.fd, 16 * 1024, self.pos)
        if not data:
            raise _CutShort
        self.pos += len(data)
        return self.d.decompress(data)

    def more(self) -> bool:
        """Another stream follows the first one's end."""
        return bool(self.d.eof and self.d.unused_data)


TAIL_KEEP = 4096
"""Decompressed bytes kept before each new part (more than any checkpoint's `tail_len`)."""
WHOLE_MAX = 1 << 30
"""A generation read further than this is not looked for in an archive (a `gap`, as before)."""


def holds_whole(fd: int, cp: Checkpoint) -> bool:
    """The gzip, bzip2 or xz file holds exactly what was read of the checkpointed generation:
    its first bytes, the bytes before its offset, and nothing past that offset (a generation
    read to its end, then compressed: nothing of it is lost); for a generation seen empty,
    nothing at all. Decompressed up to that offset (at most WHOLE_MAX), at a start in the
    planner's worker thread."""
    if not (cp.fingerprint_len or cp.offset == 0) or cp.offset > WHOLE_MAX:
        return False
    return _as_read(fd, cp) == (True, False)  # (cut short: not known whole, a gap as before)


def unsettled(fd: int, cp: Checkpoint) -> bool:
    """The compressed file may still be the archive of the checkpointed generation's copy, and
    cannot be told whole yet: empty (its compressor has just made it), or cut short before
    its first bytes or the bytes before the checkpoint's offset came out (being written)."""
    if not os.pread(fd, 1, 0):
        return True
    return cp.offset <= WHOLE_MAX and _as_read(fd, cp) is None


def holds_begun(fd: int, cp: Checkpoint) -> bool:
    """The compressed file holds what was read of the checkpointed generation and more: the
    generation, compressed before it was read to its end. By its first bytes alone past
    WHOLE_MAX; never for a generation seen empty (it has no first bytes to know it by)."""
    if not cp.fingerprint_len:
        return False
    found = None if cp.offset > WHOLE_MAX else _as_read(fd, cp)
    if found is None:  # (not decompressed that far, or being written still)
        head = compressed_head(fd)
        return head is not None and begins_as(cp, head)
    return found == (True, True)


def content_at(fd: int, at: int, n: int) -> bytes | None:
    """`n` bytes of what the gzip, bzip2 or xz file holds, from `at` on (fewer at its end);
    None when it cannot be decompressed that far (cut short, another format, damaged)."""
    got, total = b"", 0
    try:
        parts = _Parts(fd)
        while total < at + n and (out := parts.next()) is not None:
            start = max(0, at - total)  # (where the bytes wanted begin in this part)
            got += out[start : start + n - len(got)]
            total += len(out)
    except (_CutShort, *_BROKEN):
        return None
    return got


def _as_read(fd: int, cp: Checkpoint) -> tuple[bool, bool] | None:
    """Decompressed until past the checkpoint's offset: whether it holds what was read (the
    first bytes, the bytes just before the offset), and whether it holds more than that.
    (False, False) for content that cannot be decompressed; None for content cut short before
    that (a compressor still writing it, or damaged: not known)."""
    head, tail, total = b"", b"", 0
    try:
        parts = _Parts(fd)
        while total <= cp.offset and (out := parts.next()) is not None:
            before, total = total, total + len(out)
            if len(head) < cp.fingerprint_len:
                head += out[: cp.fingerprint_len - len(head)]
                if len(head) == cp.fingerprint_len and fingerprint(head) != cp.fingerprint:
                    return False, False  # another file: not decompressed any further
            if cp.tail_len:
                tail = (tail + out[: max(0, cp.offset - before)])[-cp.tail_len:]
    except _CutShort:
        return None
    except _BROKEN:
        return False, False
    read = (total >= cp.offset
            and (not cp.fingerprint_len or fingerprint(head) == cp.fingerprint)
            and (not cp.tail_len or fingerprint(tail) == cp.tail))
    return read, total > cp.offset or parts.more()
