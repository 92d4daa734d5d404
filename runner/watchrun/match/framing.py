"""Split a byte stream into chunks of complete lines, with a bounded buffer for long lines."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from watchrun.events import Chunk, Cut
from watchrun.match.simd import count_newlines


@runtime_checkable
class CountsLines(Protocol):
    """A `SourceContext` that counts the lines of each chunk it is given (the pipeline does, as
    it numbers the matched lines). A source that sees one passes the count to
    `LineFramer.settle`, so every byte is counted once, not once per layer."""

    def lines_in_last_chunk(self) -> int:
        """The number of lines in the chunk the last `chunk()` call was given."""
        ...

    def matches_in_last_chunk(self) -> int:
        """The number of its lines that matched (a file source reads less at a time after a
        chunk of many: `reading.DENSE_READ`)."""
        ...


def utf8_boundary(data: bytes, limit: int) -> int:
    """The largest k <= limit such that data[:k] does not end inside a UTF-8 sequence."""
    if limit >= len(data):
        return len(data)
    k = limit
    # Back up over continuation bytes (0b10xxxxxx): at most 3 in valid UTF-8.
    while k > 0 and limit - k < 3 and (data[k] & 0xC0) == 0x80:
        k -= 1
    return k if (data[k] & 0xC0) != 0x80 else limit


_MANY_WINDOWS = 512
"""Above this many windows per chunk (maxLineBytes under ~1 KiB), `_cut_long` first checks with
one `split` whether any line is too long (~120 µs per 256 KiB, vs ~0.25 µs per window `find`):
1 GB with maxLineBytes 256 took 2.5 s instead of 2.8 s (1.6 s with the default 64 KiB)."""


BOM = b"\xef\xbb\xbf"
"""UTF-8's byte order mark."""


class LineFramer:
    """Turns reads into `Chunk`s of whole lines; never emits part of a line.

    A line longer than `max_line_bytes` is cut on a UTF-8 boundary and the rest of it is
    counted (not buffered), so memory stays bounded by one read plus `max_line_bytes`.
    Offsets are source offsets: `position` is where a checkpoint may point (just past the last
    complete line handed out); bytes of a pending partial line are never covered by it.

    Line numbers are counted lazily: the lines of the chunk just handed out are counted when
    `line_no` or the next chunk needs them, unless the consumer, which had to count them anyway,
    said how many there were with `settle`.
    """

    def __init__(self, max_line_bytes: int, *, offset: int = 0, line_no: int = 1,
                 passing: bool = False) -> None:
        self.max = max_line_bytes
        self.passing = passing
        """`offset` is inside line `line_no`, whose head was handed out with no end (by `finish`,
        then `go_on`; or by an earlier run): the bytes up to its newline are its rest, passed
        over (no line of their own), and the line after it is `line_no` + 1."""
        self._offset = offset  # source offset of the first byte not yet handed out in a chunk
        self._line_no = line_no  # of the first line of the last chunk while it is unsettled
        self._unsettled: bytes | None = None  # the last chunk's bytes, lines not counted yet
        self._parts: list[bytes] = []  # head of the pending line (at most `max` bytes), in
        # the pieces it came in: joined once its line ends (a 16 MiB line read 1 MiB at a time
        # had been copied whole at every read, 136 MiB for one line, on the loop)
        self._omitted = 0  # bytes of the pending line dropped beyond `max`
        self._window = max(1, max_line_bytes // 2)
        self._source: tuple[int | None, str | None, int | None] = (None, None, None)
        self.told: int | None = None
        """Where the last long line its source said began (`cutting`): each is said once."""

    def stamp(self, *, inode: int | None = None, path: str | None = None,
              run: int | None = None) -> None:
        """Where the bytes come from: every chunk handed out from now on carries it (a chunk
        is made once, not made and then copied per read)."""
        self._source = (inode, path, run)

    @property
    def position(self) -> int:
        return self._offset

    @property
    def line_no(self) -> int:
        """The line number of the next line to be handed out."""
        if self._unsettled is not None:
            self._line_no += count_newlines(self._unsettled)
            self._unsettled = None
        return self._line_no

    def settle(self, lines: int) -> None:
        """The chunk last handed out held `lines` lines (counted by its consumer)."""
        if self._unsettled is not None:
            self._line_no += lines
            self._unsettled = None

    @property
    def pending(self) -> int:
        """Bytes of the pending (unterminated) line, including omitted ones."""
        return self.held + self._omitted

    @property
    def held(self) -> int:
        """Bytes of the pending line kept in memory (at most `max`: the rest is counted)."""
        return sum(map(len, self._parts))

    @property
    def cutting(self) -> int | None:
        """The source offset where the pending line began once it is longer than `max` with no
        end yet (its bytes past `max` counted, not kept); None while there is no such line."""
        return self._offset if self._omitted else None

    def feed(self, data: bytes) -> Chunk | None:
        """Add bytes; return the complete lines they finish, if any. A UTF-8 byte order mark
        that begins the stream is not part of its first line (`^ERROR` missed line 1 of a
        file a Windows tool wrote), however the reads split it."""
        if self.passing:
            data = self._pass_over(data)
        if not self._offset and not self._omitted and self.held < len(BOM):
            data = self._without_bom(data)
        if self._omitted:
            nl = data.find(b"\n")
            if nl < 0:
                self._omitted += len(data)
                return None
            self._omitted += nl
            cut_line = b"".join((*self._parts, b"\n"))
            head_cut = Cut(0, self._omitted)
            self._parts, self._omitted = [], 0
            return self._emit(cut_line, [head_cut], data[nl + 1 :])
        pieces, self._parts = self._parts, []
        return self._emit(b"", [], data, pieces)

    def _without_bom(self, data: bytes) -> bytes:
        """At the stream's start (nothing handed out, fewer bytes held than a BOM has): the
        bytes held and `data`, less a BOM they begin with. A read of 1 or 2 of its bytes is
        held as the pending line's start until the next read says whether they are one."""
        head = b"".join(self._parts)
        if not (head + data[: len(BOM)]).startswith(BOM):
            return data
        self._parts, self._offset = [], len(BOM)
        return (head + data)[len(BOM) :]

    def _pass_over(self, data: bytes) -> bytes:
        """`data` less the rest of the line being passed over (all of it until a newline)."""
        nl = data.find(b"\n")
        if nl < 0:
            self._offset += len(data)
            return b""
        self._offset += nl + 1
        self._line_no, self.passing = self.line_no + 1, False
        return data[nl + 1 :]

    def go_on(self) -> None:
        """The line `finish` just handed out may still be written on (a file a once run read
        to its end): what comes is its rest (`passing`), and it keeps its number."""
        self._unsettled, self.passing = None, True

    def skip(self, n: int) -> None:
        """`n` bytes of the source, between two lines, are no line's (a hole's NUL bytes)."""
        self._offset += n

    def finish(self) -> Chunk | None:
        """End of stream (a command exited): the unterminated last line becomes a line."""
        if not self._parts and not self._omitted:
            return None
        cuts = [Cut(0, self._omitted)] if self._omitted else []
        data = b"".join((*self._parts, b"\n"))
        source_len = len(data) - 1 + self._omitted  # no newline in the source
        self._parts, self._omitted = [], 0
        return self._chunk(data, cuts, source_len)

    def _emit(self, prefix: bytes, cuts: list[Cut], data: bytes,
              head: list[bytes] | None = None) -> Chunk | None:
        """`head` (the pending line's start, in pieces) + `data`: hand out the complete lines,
        keep the rest. The complete lines are copied once (not concatenated, then sliced)."""
        last = data.rfind(b"\n")
        if last < 0:
            complete, rest = b"", [*(head or ()), data]
        else:
            if head:
                complete = b"".join((*head, memoryview(data)[: last + 1]))
            else:
                complete = data if last + 1 == len(data) else data[: last + 1]
            rest = [data[last + 1 :]]
        rest = [part for part in rest if part]
        size = sum(map(len, rest))
        if size > self.max and not (size == self.max + 1 and rest[-1].endswith(b"\r")):
            whole = b"".join(rest)  # (once a line: past `max`, the rest is counted, not kept)
            keep = utf8_boundary(whole, self.max)
            self._parts, self._omitted = [whole[:keep]], len(whole) - keep
        else:
            self._parts = rest
        if complete and len(complete) > self.max + 1:
            complete, more = self._cut_long(complete, len(prefix))
            cuts.extend(more)
        body = prefix + complete if prefix else complete
        if not body:
            return None
        source_len = len(body) + sum(c.omitted for c in cuts)
        return self._chunk(body, cuts, source_len)

    def _chunk(self, body: bytes, cuts: list[Cut], source_len: int) -> Chunk:
        line_no = self.line_no
        inode, path, run = self._source
        chunk = Chunk(body, self._offset, line_no, self._offset + source_len, tuple(cuts), inode,
                      path, run)
        self._offset += source_len
        self._unsettled = body
        return chunk

    def _fits(self, data: bytes, start: int = 0, end: int = -1) -> bool:
        """The line `data[start:end]` (to its end when -1) is no longer than `max`, not
        counting a `\r` at its end (the CR of a CRLF line ending is not content to cut)."""
        end = len(data) if end < 0 else end
        return end - start <= self.max or (end - start == self.max + 1
                                           and data[end - 1:end] == b"\r")

    def _cut_long(self, data: bytes, base: int) -> tuple[bytes, list[Cut]]:
        """Cut every line longer than `max`. Any such line fully contains an aligned window of
        `max // 2` bytes with no newline, so only those windows are inspected."""
        w, n = self._window, len(data)
        if n // w > _MANY_WINDOWS and max(map(len, data.split(b"\n"))) <= self.max:
            return data, []  # small windows: one split is cheaper than a find per window
        starts: list[int] = []
        for i in range(0, n - w + 1, w):
            if data.find(b"\n", i, i + w) < 0:
                start = data.rfind(b"\n", 0, i) + 1
                new = not starts or starts[-1] != start
                if new and not self._fits(data, start, data.find(b"\n", start)):
                    starts.append(start)
        if not starts:
            return data, []
        parts: list[bytes] = []
        cuts: list[Cut] = []
        pos = 0
        out_len = 0
        for start in starts:
            end = data.find(b"\n", start)
            keep = utf8_boundary(data[start:end], self.max)
            parts.append(data[pos : start + keep])
            out_len += start + keep - pos
            cuts.append(Cut(base + out_len - keep, end - start - keep))
            pos = end
        parts.append(data[pos:])
        return b"".join(parts), cuts
