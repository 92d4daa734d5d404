"""Beginnings no text pattern can match past, told by a file's or a command's output's first
bytes: UTF-16 and UTF-32 (with a byte order mark, or without one) and compressed streams; the
`error` code and message recorded for such a file or output."""

from __future__ import annotations

from collections.abc import Callable

from watchrun.sources.compressed import compressed

__all__ = ["LOOKED_AT", "UNREADABLE", "Beginning", "bare_utf16", "bare_utf32", "judged",
           "unreadable", "utf16_bom", "utf32_bom"]

LOOKED_AT = 256
"""The first bytes of a file that say whether it is UTF-16 or UTF-32 without a byte order mark."""
FEWEST_UNITS = 4
"""The fewest units (of 2 or 4 bytes) a start without a byte order mark must have to be taken
for UTF-16 or UTF-32."""
_UTF32_BOMS = (b"\x00\x00\xfe\xff", b"\xff\xfe\x00\x00")
_BOMS = (*_UTF32_BOMS, b"\xff\xfe", b"\xfe\xff")


def utf32_bom(head: bytes) -> bool:
    """`head` (a file's first bytes) begins with UTF-32's byte order mark (BE `00 00 FE FF`,
    LE `FF FE 00 00`), as .NET's `Encoding.UTF32` writes it."""
    return head.startswith(_UTF32_BOMS)


def utf16_bom(head: bytes) -> bool:
    """`head` (a file's first bytes) begins with UTF-16's byte order mark, as Windows
    PowerShell's `>` writes it, and not UTF-32's (`FF FE 00 00`, whose first two bytes are
    UTF-16LE's). (Neither `FF` nor `FE` is ever a byte of UTF-8.)"""
    return head.startswith((b"\xff\xfe", b"\xfe\xff")) and not utf32_bom(head)


def _units(head: bytes, size: int) -> list[bytes]:
    """The whole `size`-byte units of `head`'s first LOOKED_AT bytes; none when it begins with
    a byte order mark (said as such)."""
    if head.startswith(_BOMS) or b"\0" not in head:
        return []
    end = min(len(head), LOOKED_AT)
    return [head[i:i + size] for i in range(0, end - end % size, size)]


def _most(units: list[bytes], side: int) -> bool:
    """At least FEWEST_UNITS `units`, 3 of every 4 of them with `side` of them on the same
    side, little-endian or big-endian, all NUL while the other half is not."""
    if len(units) < FEWEST_UNITS:
        return False
    little = sum(1 for u in units if not any(u[side:]) and any(u[:side]))
    big = sum(1 for u in units if not any(u[:-side]) and any(u[-side:]))
    return 4 * max(little, big) >= 3 * len(units)


def bare_utf16(head: bytes) -> bool:
    """`head` begins UTF-16 text without a byte order mark: in at least 3 of every 4 of its
    2-byte units (FEWEST_UNITS of them or more, within LOOKED_AT bytes) a NUL sits on the same
    side of a byte that is not one: Latin text in UTF-16LE (`E\\0R\\0`) or UTF-16BE. UTF-8 text
    holds no NUL, and a run of NULs (a hole a crash left in a log) has no letter beside them,
    so neither is taken for it; nor is UTF-32, half of whose 2-byte units are NUL both."""
    return _most(_units(head, 2), 1)


def bare_utf32(head: bytes) -> bool:
    """`head` begins UTF-32 text without a byte order mark: in at least 3 of every 4 of its
    4-byte units (FEWEST_UNITS of them or more, within LOOKED_AT bytes) the two high bytes are
    NUL and the two low ones not both: a character of the Basic Multilingual Plane in UTF-32LE
    (`E\\0\\0\\0`: three NULs beside a Latin letter) or UTF-32BE. UTF-16 text has a NUL in at
    most one byte of each character, so it is not taken for it."""
    return _most(_units(head, 4), 2)


_CONVERT = "watchrun reads UTF-8: convert it first"
UNREADABLE: tuple[tuple[Callable[[bytes], bool], str, str], ...] = (
    (utf16_bom, "not-utf8", "is UTF-16 (it starts with a byte order mark); "
     f"{_CONVERT} (iconv -f UTF-16 -t UTF-8)"),
    (utf32_bom, "not-utf8", "is UTF-32 (it starts with a byte order mark); "
     f"{_CONVERT} (iconv -f UTF-32 -t UTF-8)"),
    (bare_utf16, "not-utf8", "is UTF-16 (a NUL beside each letter of its first line, no byte "
     f"order mark); {_CONVERT} (iconv -f UTF-16LE -t UTF-8, or UTF-16BE)"),
    (bare_utf32, "not-utf8", "is UTF-32 (NULs beside each character of its first line, three "
     f"beside a Latin letter, no byte order mark); {_CONVERT} (iconv -f UTF-32LE -t UTF-8, or "
     "UTF-32BE)"),
    (compressed, "compressed", "is compressed; watchrun reads text: watch a command that "
     "decompresses it instead (`command: [zcat, FILE]`, or xzcat, bzcat, zstdcat)"),
)
"""Beginnings no text pattern can match past (UTF-16 or UTF-32, as Windows and .NET tools write
them; a gzip, bzip2, xz, zstd, lz4 or zip stream): the `error` code and message said. At most
one of the four encodings is told for a beginning. UTF-16 that begins later in a file (appended
to UTF-8 lines) is not looked for: only the first bytes are."""


def unreadable(head: bytes) -> list[tuple[str, str]]:
    """The `error` code and why of each UNREADABLE beginning that `head` (the first bytes of a
    file, or of a command's output) has."""
    return [(code, why) for begins, code, why in UNREADABLE if begins(head)]


def judged(head: bytes, end: bool) -> list[tuple[str, str]] | None:
    """`unreadable(head)` once the beginning can be judged: LOOKED_AT bytes of it are known, or
    the stream ended (`end`) with fewer; None before (too few bytes yet to tell)."""
    return unreadable(head) if end or len(head) >= LOOKED_AT else None


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
        said = judged(self.head, not data)
        if said is None:
            return []
        self.judged = True
        return said
