"""Where private-key blocks lie in a stream read chunk by chunk: a `-----BEGIN … PRIVATE
KEY-----` line and the lines after it, up to its END line (pure).

A match record holds one line, so the redaction rule, which needs the BEGIN line, finds only
that line: with `output.redact` a block's base64 lines would be recorded as they are. The
pipeline asks this tracker which lines lie inside a block and records each as the marker.

The BEGIN and END edges are the redaction rule's own (`redact.key_block()`, from
`redact_rules.json`): one definition of a key block for both.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from msgspec.structs import replace

from watchrun.events import MatchInfo
from watchrun.match.literals import required_literals
from watchrun.match.redact import KeyBlock, key_block, marker
from watchrun.match.regex import analyse

__all__ = ["MAX_BLOCK_BYTES", "KeyBlocks", "Region", "hide_key_bodies", "inside", "key_body"]

MAX_BLOCK_BYTES = 64 * 1024
"""A block with no END line within this many bytes of its BEGIN line ends there (an 8192-bit
RSA key in PEM is ~6.5 KB): a cut-off key does not hide the rest of the stream."""


@lru_cache(maxsize=8)
def _edges(block: KeyBlock) -> tuple[re.Pattern[bytes], tuple[bytes, ...] | None]:
    """`block`'s BEGIN and END edges as one bytes regex (groups `begin`, `end`), and strings one
    of which every BEGIN edge holds (None: no such strings), so a chunk with none starts no
    block and needs no regex scan."""
    regex = re.compile(f"(?P<begin>{block.begin})|(?P<end>{block.end})".encode())
    needles = required_literals(analyse(block.begin, True))
    return regex, tuple(sorted(needles)) if needles else None


Region = tuple[int, int, int]
"""(lo, hi, block): a line starting at `lo` ≤ pos ≤ `hi` in the chunk lies inside block
number `block` (`lo`: its BEGIN line's start, or 0 when it began in an earlier chunk)."""


class KeyBlocks:
    """The state between chunks: whether a block is open, and how far it may still go."""

    def __init__(self, block: KeyBlock | None = None) -> None:
        self.block = block or key_block()
        """The edges followed: the built-in redaction rule's unless given."""
        self._edges, self._needles = _edges(self.block)
        self.blocks = 0
        """Blocks seen so far (the number of the current or last one)."""
        self._left = 0  # bytes an open block may still cover; 0: none is open

    def regions(self, data: bytes) -> list[Region]:
        """The ranges of line starts in `data` (whole lines) that lie inside a block; a block
        still open at the end of `data` goes on into the next chunk."""
        needles = self._needles
        if not self._left and needles is not None and not any(n in data for n in needles):
            return []
        out: list[Region] = []
        lo = 0 if self._left else -1
        for m in self._edges.finditer(data):
            if lo >= 0 and lo + self._left <= m.start():  # the open block ran out before it
                out.append((lo, lo + self._left, self.blocks))
                lo = -1
            begins = m["begin"] is not None
            if begins and lo < 0:
                lo, self._left = data.rfind(b"\n", 0, m.start()) + 1, MAX_BLOCK_BYTES
                self.blocks += 1
            elif not begins and lo >= 0:
                out.append((lo, m.start(), self.blocks))
                lo, self._left = -1, 0
        if lo >= 0:
            hi = min(len(data), lo + self._left)
            out.append((lo, hi, self.blocks))
            self._left = max(0, self._left - (len(data) - lo))
        return out


def key_body(block: int, line: str) -> bool:
    """Whether a line of `block` (0: none) goes out as `[REDACTED:private-key]`: every line of
    a key block but its BEGIN line, which is left to the redaction rules (they need it)."""
    return bool(block) and "-----BEGIN" not in line


def inside(regions: list[Region], pos: int) -> int:
    """The block a line starting at `pos` lies in (0: none)."""
    for lo, hi, block in regions:
        if lo <= pos <= hi:
            return block
    return 0


def hide_key_bodies(found: Sequence[MatchInfo], spans: list[tuple[int, int]],
                    regions: list[Region]) -> list[MatchInfo]:
    """The matches (at the starts of `spans`) with each line inside a key block as the marker:
    how they leave the machine when the records keep them (no `output.redact`)."""
    out = list(found)
    for k, (start, _) in enumerate(spans[: len(out)]):
        if key_body(inside(regions, start), out[k].line):
            out[k] = replace(out[k], line=marker("private-key"))
    return out
