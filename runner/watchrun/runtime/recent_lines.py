"""The tail of a watcher's lines: how many a stream of chunks held and its last `keep` lines,
kept at O(1) cost per chunk (what status snapshots and `watchrun logs` read)."""

from __future__ import annotations

from collections import deque

from msgspec import structs

from watchrun.events import Chunk, Cut
from watchrun.match.keyblocks import Region, inside
from watchrun.match.simd import count_newlines

__all__ = ["LONG_CHUNK", "RecentLines"]


class RecentLines:
    """How many lines a stream of chunks held, and its last `keep` lines, at O(1) cost per
    chunk: it keeps references to the newest chunks' bytes and counts and splits them only when
    asked (a status snapshot, at most once a second), never on the hot path.

    A chunk's line count is the next chunk's `line_no` minus its own when the next one follows
    it in the same stream (same inode or run, next byte offset), or the count its consumer
    settled (`settle`); otherwise it is counted. Of a chunk longer than `LONG_CHUNK` only the
    last `keep` lines are kept (a copy) once it is counted: a file's read is up to 1 MiB, and
    200 watchers each keeping two whole reads held 400 MB for tails of 500 lines.
    Memory: the bytes of the last `keep` lines, plus fewer than `keep` lines before them (held
    chunks' lines not needed yet) and up to `LONG_CHUNK` bytes of chunks not cut; the newest
    chunk is kept whole until its lines are counted (`settle`, or the next chunk's `add`).
    """

    __slots__ = ("_done", "_held", "_held_lines", "_newest", "_newest_lines", "_newest_regions",
                 "_uncut", "keep")
    # (a held chunk: its bytes, its lines, its key-block regions, its cut lines)

    def __init__(self, keep: int) -> None:
        self.keep = max(0, keep)
        self._done = 0  # lines of every chunk before the newest
        self._held: deque[tuple[bytes, int, list[Region], tuple[Cut, ...]]] = deque()
        self._held_lines = 0
        self._newest: Chunk | None = None
        self._newest_lines = -1  # -1: not counted yet
        self._newest_regions: list[Region] = []
        self._uncut = False  # the newest is longer than LONG_CHUNK and kept whole yet

    def add(self, chunk: Chunk, regions: list[Region]) -> None:
        """`regions`: the chunk's lines inside a private-key block (`KeyBlocks.regions`)."""
        prev = self._newest
        if prev is not None:
            n = self._newest_lines
            if n < 0:
                n = chunk.line_no - prev.line_no if _follows(prev, chunk) else -1
                self._newest_lines = n = n if n > 0 else count_newlines(prev.data)
            self._done += n
            if self.keep:
                prev = self._cut_newest(prev)  # (a long one not settled: its last lines only)
                kept = min(n, self.keep)
                self._held.append((prev.data, kept, self._newest_regions, prev.cuts))
                self._held_lines += kept
                held = self._held
                while len(held) > 1 and self._held_lines - held[0][1] >= self.keep:
                    self._held_lines -= held.popleft()[1]
        self._newest, self._newest_regions, self._newest_lines = chunk, regions, -1
        self._uncut = len(chunk.data) > LONG_CHUNK

    def settle(self, lines: int) -> None:
        """The newest chunk holds `lines` lines (its consumer counted them as it numbered its
        matches): a long one keeps only its last `keep` lines from now on."""
        if self._newest is not None:
            if self._newest_lines < 0:  # (else counted already: a snapshot asked `lines`)
                self._newest_lines = lines
            if self.keep:
                self._cut_newest(self._newest)

    def _cut_newest(self, newest: Chunk) -> Chunk:
        """`newest`, the newest chunk, its lines counted: when long, only its last `keep`
        lines from now on (a copy), and the held lines that makes needless go."""
        if not self._uncut:
            return newest
        self._uncut, n = False, self._newest_lines
        data, cuts, self._newest_regions = _last_of(newest.data, newest.cuts,
                                                    self._newest_regions, n, self.keep)
        self._newest = structs.replace(newest, data=data, cuts=cuts)
        self._trim(min(n, self.keep))
        return self._newest

    def _trim(self, newest: int) -> None:
        """Let go of held lines the tail no longer needs, the newest chunk holding `newest`
        lines: chunks before them, and the needless head of a long oldest one (a copy)."""
        held = self._held
        while held and self._held_lines - held[0][1] + newest >= self.keep:
            self._held_lines -= held.popleft()[1]
        if held and len(held[0][0]) > LONG_CHUNK:
            data, n, regions, cuts = held[0]
            need = self.keep - newest - (self._held_lines - n)
            if need < n:
                data, cuts, regions = _last_of(data, cuts, regions, n, need)
                held[0] = (data, need, regions, cuts)
                self._held_lines -= n - need

    @property
    def lines(self) -> int:
        newest = self._newest
        if newest is None:
            return self._done
        if self._newest_lines < 0:
            self._newest_lines = count_newlines(newest.data)
        return self._done + self._newest_lines

    def last(self, cap: int | None = None, n: int | None = None
             ) -> list[tuple[bytes, int, int | None]]:
        """The last `keep` lines (raw bytes, without their newlines; at most the first `cap`
        bytes of each), oldest first, each with the private-key block it lies in (0: none; its
        BEGIN line may be long gone from them) and, for a line the reader cut at
        `maxLineBytes`, the bytes it left out (`Cut.omitted`; None: a whole line). `n`: only
        the last `n` of them."""
        need = self.keep if n is None else min(n, self.keep)
        if self._newest is None or need <= 0:
            return []
        out: list[tuple[bytes, int, int | None]] = []
        chunks = [(self._newest.data, self._newest_regions, self._newest.cuts),
                  *((d, r, c) for d, _, r, c in reversed(self._held))]
        for data, regions, cuts in chunks:
            starts, lines = _last_lines(data, need, cap)
            if regions or cuts:
                omitted = {c.pos: c.omitted for c in cuts}
                out[:0] = [(x, inside(regions, s) if regions else 0, omitted.get(s))
                           for x, s in zip(lines, starts, strict=True)]
            else:
                out[:0] = [(x, 0, None) for x in lines]
            need -= len(lines)
            if need <= 0:
                break
        return out


LONG_CHUNK = 64 * 1024
"""A chunk longer than this keeps only its last `keep` lines in a tail (`RecentLines`)."""


def _last_of(data: bytes, cuts: tuple[Cut, ...], regions: list[Region], lines: int, keep: int
             ) -> tuple[bytes, tuple[Cut, ...], list[Region]]:
    """The last `keep` lines of `data` (`lines` lines; a copy), with their cut lines and
    key-block regions moved with them."""
    if lines <= keep:
        return data, cuts, regions
    base = _start_of_last(data, lines, keep)
    return (data[base:], tuple(Cut(c.pos - base, c.omitted) for c in cuts if c.pos >= base),
            [(lo - base, hi - base, block) for lo, hi, block in regions if hi >= base])


def _start_of_last(data: bytes, lines: int, keep: int) -> int:
    """Where the last `keep` of the `lines` (> `keep`) lines of `data` begin: the newline
    before them is looked for in a window of the bytes an average line would take, counted in
    C and widened or halved until it holds few more newlines, then those few are stepped over
    (a step per line kept cost ~90 µs a 1 MiB read: a sixth of a scan's CPU)."""
    need, size = keep + 1, len(data)  # (that newline is the `need`-th from the end)
    per = size // lines + 1
    lo = max(0, size - need * per)
    count = count_newlines(data, lo)
    while count < need:  # (lo > 0: all `lines` newlines are more than `keep`)
        lo = max(0, lo - (need - count) * per * 2)
        count = count_newlines(data, lo)
    hi = size  # (fewer than `need` newlines from here on)
    while count - need > _FEW and hi - lo > 1:
        mid = (lo + hi) // 2
        if (at_mid := count_newlines(data, mid)) >= need:
            lo, count = mid, at_mid
        else:
            hi = mid
    at = lo - 1
    for _ in range(count - need + 1):
        at = data.find(b"\n", at + 1)
    return at + 1


_FEW = 64
"""How many newlines `_start_of_last` steps over one by one, at most."""


def _follows(prev: Chunk, chunk: Chunk) -> bool:
    return (
        chunk.offset == prev.end
        and chunk.inode == prev.inode
        and chunk.run == prev.run
        and chunk.path == prev.path
    )


def _last_lines(data: bytes, n: int, cap: int | None = None) -> tuple[list[int], list[bytes]]:
    """Where each of the last `n` lines of `data` (whole lines, each ending in b"\\n") starts,
    and those lines without their newlines (the first `cap` bytes of each: a line may be
    16 MiB, and only its head is shown)."""
    ends = [len(data) - 1]
    for _ in range(n):
        cut = data.rfind(b"\n", 0, ends[-1])
        ends.append(cut)
        if cut < 0:
            break
    ends.reverse()  # the newline before each line (-1: none), then its own
    starts = [e + 1 for e in ends[:-1]]
    cap = len(data) if cap is None else cap
    return starts, [data[a:min(b, a + cap)] for a, b in zip(starts, ends[1:], strict=True)]
