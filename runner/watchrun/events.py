"""The event vocabulary that crosses module boundaries: sources emit chunks, the matcher finds
matched lines in them, sinks write records, matches are handed on to views, wakes and gates."""

from __future__ import annotations

from typing import Any, Protocol

from msgspec import Struct


class Cut(Struct, frozen=True):
    """A line that was longer than `maxLineBytes` and was cut."""

    pos: int
    """Index in `Chunk.data` where the cut line starts."""
    omitted: int
    """Bytes of that line that were dropped (not in `Chunk.data`)."""


class Chunk(Struct, frozen=True):
    """One or more complete lines from a source, each ending in b"\\n" inside `data`.

    Sources frame bytes into chunks; nothing is decoded here. The matcher scans `data` with one
    engine call and maps hits back to lines.
    """

    data: bytes
    offset: int
    """Source byte offset of data[0] (file offset, or byte count of one command run's output)."""
    line_no: int
    """1-based line number of the first line in `data`."""
    end: int
    """Source offset just past the last line: where a checkpoint may move once it is recorded."""
    cuts: tuple[Cut, ...] = ()
    inode: int | None = None
    """File watchers: the inode the bytes were read from."""
    path: str | None = None
    """File watchers: the path as configured."""
    run: int | None = None
    """Command watchers: the run number (1 for the first start)."""

    def source_offset(self, pos: int) -> int:
        """The source offset of the byte at `pos` in `data`, accounting for cut lines."""
        extra = 0
        for cut in self.cuts:
            if cut.pos < pos:
                extra += cut.omitted
        return self.offset + pos + extra

    def cut_at(self, pos: int) -> int:
        """Omitted bytes of the line starting at `pos` (0 when it was not cut)."""
        for cut in self.cuts:
            if cut.pos == pos:
                return cut.omitted
        return 0


class MatchInfo(Struct, frozen=True):
    """A recorded match, kept in memory for views, wake delivery and gates."""

    line: str
    line_no: int
    offset: int
    where: str
    """`path:line` for files, `run N:line` for commands."""
    cursor: str = ""
    """The cursor of its `match` record (`<watcher>:<seq as 16 hex>`)."""
    cut: int | None = None
    """Its record is `truncated`: the bytes of the line the reader left out at
    limits.maxLineBytes, or 0 when only its text was clipped there (a line within the limit
    whose text came out longer: an undecodable byte is a 3-byte U+FFFD, a redaction marker may
    be longer than its secret; matched whole, its `raw` kept as `output.redact` allows); None:
    whole."""


def cut_note(cut: int | None) -> str:
    """How a `truncated` line is marked for people, after its text (`MatchInfo.cut`: '' for a
    whole line)."""
    if cut is None:
        return ""
    return f" [cut: {cut} more bytes not kept]" if cut > 0 else \
        " [text clipped: the line was matched whole]"



class SourceContext(Protocol):
    """What a source is given to report into. The pipeline behind it matches and writes."""

    async def chunk(self, chunk: Chunk) -> None:
        """Deliver complete lines. Returns once their records are written (durable in the page
        cache); a source may checkpoint `chunk.end` after that. Blocks while the sink cannot
        write (a full disk), which is the back-pressure on reading."""
        ...

    async def event(self, kind: str, **fields: Any) -> None:
        """Write a non-match record: start, rotate, exit, restart, error, stop."""
        ...
