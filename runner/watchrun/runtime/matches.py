"""A chunk's matches as record columns, and the matches kept in memory, without a per-match
object.

The pipeline turns the matched lines of a chunk into columns (the `line` field as JSON, `lineNo`,
`offset`, the rest of the record's fields) in one loop, or with no loop at all when every line
of a plain chunk matches; the sink formats the records from them. A `MatchInfo` (for the log,
the gate's first lines, `recent`, an agent's wake) is made only when one of those asks for it:
most matches never need one.
"""

from __future__ import annotations

import itertools
import operator
from collections import deque
from collections.abc import Iterator, Sequence
from typing import cast, overload

from msgspec import Struct
from msgspec.structs import replace

from watchrun.events import Chunk, MatchInfo
from watchrun.match.plain import plain_chunk, plain_texts
from watchrun.match.redact import Redactor, clean_text
from watchrun.match.simd import newline_counter
from watchrun.output.jsonl import json_str, plain_bodies


class Rows(Struct):
    """The match records of one chunk, by column."""

    lines: list[bytes]
    """The `line` field: its JSON string without the quotes."""
    line_nos: Sequence[int]
    offsets: Sequence[int]
    rest: list[bytes]
    """The fields after `offset`, as JSON members (`,"path":…,"inode":…`)."""
    texts: list[str | bytes] | str
    """Each line as text (plain ASCII bytes on the flood path), for a `MatchInfo`; or all of
    them joined by newlines, split when a line is first asked for (most are never shown)."""
    cuts: dict[int, int] | None = None
    """The rows whose record is `truncated`: the bytes of the line left out at
    limits.maxLineBytes (0: only the text was clipped, `MatchInfo.cut`)."""
    whole: dict[int, str] | None = None
    """The rows whose line a `\r` redrew: the whole line as a verdict shows it (`redrawn`)."""
    redacted: dict[int, dict[str, int]] | None = None
    """The rows in which secrets were redacted: how many, by kind (`output.redact`)."""

    def evidence(self, found: Sequence[MatchInfo], n: int) -> list[MatchInfo]:
        """The first `n` of `found` (these rows' matches) as a verdict's evidence: a line a
        `\r` redrew whole, so the text that matched is in it."""
        out = list(found[:n])
        if self.whole:
            out = [replace(m, line=self.whole.get(k, m.line)) for k, m in enumerate(out)]
        return out

    def parts(self, n: int) -> list[Rows]:
        """These rows in parts of at most `n` (itself when it holds no more), each part's
        `cuts`, `whole` and `redacted` keyed from its own first row."""
        if len(self.lines) <= n:
            return [self]
        texts = self.split()
        out = [Rows(self.lines[lo : lo + n], self.line_nos[lo : lo + n],
                    self.offsets[lo : lo + n], self.rest[lo : lo + n], texts[lo : lo + n])
               for lo in range(0, len(self.lines), n)]
        for name in ("cuts", "whole", "redacted"):
            for k, value in (getattr(self, name) or {}).items():
                part = out[k // n]
                if getattr(part, name) is None:
                    setattr(part, name, {})
                getattr(part, name)[k % n] = value
        return out

    def split(self) -> list[str | bytes]:
        """`texts`, one per line."""
        if isinstance(self.texts, str):
            self.texts = cast("list[str | bytes]", self.texts.split("\n"))
        return self.texts


class Found(Sequence[MatchInfo]):
    """The matches of one chunk, as `MatchInfo` made on access."""

    __slots__ = ("_cursor", "_first", "_n", "_rows", "_where")

    def __init__(self, rows: Rows, where: str, cursor: str, first_seq: int) -> None:
        """`cursor`: the stream's cursor prefix (`<id>:`); `first_seq`: the seq of the first
        row's `match` record (the rows' records have the seqs that follow it)."""
        self._rows, self._where = rows, where
        self._cursor, self._first = cursor, first_seq
        self._n = len(rows.lines)

    def head(self, n: int) -> Found:
        """The first `n` of these matches (those whose records a full disk took)."""
        out = Found(self._rows, self._where, self._cursor, self._first)
        out._n = max(0, min(n, self._n))
        return out

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> MatchInfo: ...
    @overload
    def __getitem__(self, i: slice) -> list[MatchInfo]: ...
    def __getitem__(self, i: int | slice) -> MatchInfo | list[MatchInfo]:
        if isinstance(i, slice):
            return [self._info(k) for k in range(*i.indices(len(self)))]
        return self._info(range(len(self))[i])

    def _info(self, k: int) -> MatchInfo:
        rows = self._rows
        text, line_no = rows.split()[k], rows.line_nos[k]
        text = text if isinstance(text, str) else text.decode("ascii")
        return MatchInfo(text, line_no, rows.offsets[k], f"{self._where}:{line_no}",
                         f"{self._cursor}{self._first + k:016x}",
                         None if rows.cuts is None else rows.cuts.get(k))


class RecentMatches:
    """The last `keep` matches (limits.maxMatches), held as the chunks' columns: a `MatchInfo`
    is made only when they are read."""

    __slots__ = ("_batches", "_held", "keep")

    def __init__(self, keep: int) -> None:
        self.keep = max(0, keep)
        self._batches: deque[Found] = deque()
        self._held = 0

    def extend(self, found: Found) -> None:
        if not self.keep or not found:
            return
        self._batches.append(found)
        self._held += len(found)
        while self._held - len(self._batches[0]) >= self.keep:
            self._held -= len(self._batches.popleft())

    def __len__(self) -> int:
        return min(self._held, self.keep)

    def __iter__(self) -> Iterator[MatchInfo]:
        skip = self._held - len(self)
        for batch in self._batches:
            if skip >= len(batch):
                skip -= len(batch)
                continue
            yield from batch[skip:]
            skip = 0


def where_members(chunk: Chunk, redactor: Redactor | None = None) -> tuple[bytes, str]:
    """The record's fields after `offset` (`,"path":…,"inode":…` or `,"run":…`) and how a
    match is located for people (`path` or `run N`, before `:lineNo`). The path is a text
    field like any other (SPEC §6): a file name others chose has its controls escaped, none
    dropped (`clean_text`: `x\\r/var/log/a.log` is not shown as `/var/log/a.log`), and
    with `output.redact` (`redactor`) a `${VAR}` secret in it is hidden as in `status`."""
    if chunk.path is not None:
        inode = b"null" if chunk.inode is None else b"%d" % chunk.inode
        path = clean_text(chunk.path, redactor)
        return b',"path":%b,"inode":%b' % (json_str(path), inode), path
    run = b"null" if chunk.run is None else b"%d" % chunk.run
    return b',"run":%b' % run, f"run {chunk.run}"


def every_line(chunk: Chunk, where: bytes) -> Rows | None:
    """The columns of a chunk every line of which matched (a flood of matches), built with no
    loop over the lines in Python; None when the chunk is not plain (`plain_chunk`)."""
    data = chunk.data
    if chunk.cuts or not plain_chunk(data):
        return None
    lines = data.split(b"\n")
    lines.pop()  # after the last newline
    n = len(lines)
    starts = itertools.accumulate(map(len, lines), initial=chunk.offset)  # n + 1 of them
    offsets = list(map(operator.add, starts, range(n)))
    escape = b'"' in data or b"\\" in data or b"\t" in data  # else the lines are their JSON
    bodies = plain_bodies(data[:-1]) if escape else lines
    return Rows(bodies, range(chunk.line_no, chunk.line_no + n), offsets, [where] * n,
                cast("list[str | bytes]", lines))


def plain_rows(chunk: Chunk, spans: Sequence[tuple[int, int]], max_bytes: int,
               where: bytes, after: tuple[int, int] | None = None) -> tuple[Rows, list[int], int]:
    """The columns of the matched lines `spans`, the indexes of the lines that need
    sanitizing (not `plain_text`: their columns are placeholders, the caller fills them in),
    and how many lines of the chunk precede the last matched line. Line numbers are counted up
    to each match only; no loop over the matches in Python (`plain_texts`). `after`: the start
    and line number of the chunk's matched line before `spans` (a slice of its matches), where
    the count goes on from; None: from the chunk's start."""
    data = chunk.data
    starts = list(map(operator.itemgetter(0), spans))
    ends = list(map(operator.itemgetter(1), spans))
    utf8, text, odd = plain_texts(map(data.__getitem__, map(slice, starts, ends)),
                                  list(map(operator.sub, ends, starts)), max_bytes)
    if chunk.cuts:  # a line cut by the framing is never plain
        offsets = list(map(chunk.source_offset, starts))
        odd = sorted({*odd, *itertools.compress(range(len(starts)), map(chunk.cut_at, starts))})
    else:
        offsets = list(map(chunk.offset.__add__, starts))
    first, line_no = after if after is not None else (0, chunk.line_no)
    gaps = map(newline_counter(data), itertools.chain((first,), starts), starts)
    line_nos = list(itertools.accumulate(gaps, initial=line_no))
    del line_nos[0]
    rows = Rows(plain_bodies(utf8), line_nos, offsets, [where] * len(starts), text)
    return rows, odd, line_nos[-1] - chunk.line_no
