"""Beginnings no text pattern can match past, told by a file's or a command's output's first
bytes: UTF-16 (with a byte order mark, or without one) and compressed streams; the `error` code
and message recorded for such a file or output."""

from __future__ import annotations

from collections.abc import Callable

from watchrun.sources.compressed import compressed

__all__ = ["UNREADABLE", "Beginning", "bare_utf16", "unreadable", "utf16_bom"]

LOOKED_AT = 256
"""The first bytes of a file that say whether it is UTF-16 without a byte order mark."""
FEWEST_UNITS = 4
"""The fewest 2-byte units a start without a byte order mark must have to be taken for UTF-16."""


def utf16_bom(head: bytes) -> bool:
    """`head` (a file's first bytes) begins with UTF-16's byte order mark, as Windows
    PowerShell's `>` writes it. (Neither `FF` nor `FE` is ever a byte of UTF-8.)"""
    return head.startswith((b"\xff\xfe", b"\xfe\xff"))


def bare_utf16(head: bytes) -> bool:
    """`head` begins UTF-16 text without a byte order mark: in at least 3 of every 4 of its
    2-byte units (FEWEST_UNITS of them or more, within LOOKED_AT bytes) a NUL sits on the same
    side of a byte that is not one: Latin text in UTF-16LE (`E\\0R\\0`) or UTF-16BE. UTF-8 text
    holds no NUL, and a run of NULs (a hole a crash left in a log) has no letter beside them,
    so neither is taken for it."""
    if utf16_bom(head):
        return False  # (said as such)
    units = [head[i:i + 2] for i in range(0, min(len(head), LOOKED_AT) - 1, 2)]
    if len(units) < FEWEST_UNITS or b"\0" not in head:
        return False
    little = sum(1 for u in units if u[0] and not u[1])
    big = sum(1 for u in units if u[1] and not u[0])
    return 4 * max(little, big) >= 3 * len(units)


_CONVERT = "watchrun reads UTF-8: convert it first (iconv -f UTF-16 -t UTF-8)"
UNREADABLE: tuple[tuple[Callable[[bytes], bool], str, str], ...] = (
    (utf16_bom, "not-utf8", f"is UTF-16 (it starts with a byte order mark); {_CONVERT}"),
    (bare_utf16, "not-utf8", "is UTF-16 (a NUL beside each letter of its first line, no byte "
     "order mark); watchrun reads UTF-8: convert it first (iconv -f UTF-16LE -t UTF-8, or "
     "UTF-16BE)"),
    (compressed, "compressed", "is compressed; watchrun reads text: watch a command that "
     "decompresses it instead (`command: [zcat, FILE]`, or xzcat, bzcat, zstdcat)"),
)
"""Beginnings no text pattern can match past (UTF-16, as Windows tools write it; a gzip, bzip2,
xz, zstd, lz4 or zip stream): the `error` code and message said. UTF-16 that begins later in a
file (appended to UTF-8 lines) is not looked for: only the first bytes are."""


def unreadable(head: bytes) -> list[tuple[str, str]]:
    """The `error` code and why of each UNREADABLE beginning that `head` (the first bytes of a
    file, or of a command's output) has."""
    return [(code, why) for begins, code, why in UNREADABLE if begins(head)]


class Beginning:
    """A stream's first LOOKED_AT bytes as they come (a command's output), judged once."""

    def __init__(self) -> None:
        self.head, self.judged = b"", False

    def feed(self, data: bytes) -> list[tuple[str, str]]:
        """`unreadable` of the beginning once it is known (LOOKED_AT bytes, or the end: `b""`);
        nothing before, and after."""
        if self.judged:
            return []
        self.head += data[: LOOKED_AT - len(self.head)]
        if data and len(self.head) < LOOKED_AT:
            return []
        self.judged = True
        return unreadable(self.head)
