"""LineFramer: whole lines only, bounded buffers, exact source offsets."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from watchrun.events import Chunk
from watchrun.match.framing import LineFramer, utf8_boundary


def lines_of(chunks: list[Chunk]) -> list[tuple[bytes, int, int, int]]:
    """(line, source offset, line number, omitted bytes) for every line in the chunks."""
    out = []
    for c in chunks:
        pos, no = 0, c.line_no
        while pos < len(c.data):
            nl = c.data.index(b"\n", pos)
            out.append((c.data[pos:nl], c.source_offset(pos), no, c.cut_at(pos)))
            pos, no = nl + 1, no + 1
    return out


def feed_all(framer: LineFramer, pieces: list[bytes]) -> list[Chunk]:
    return [c for c in (framer.feed(p) for p in pieces) if c is not None]


def reference(stream: bytes, limit: int) -> list[tuple[bytes, int, int, int]]:
    out, offset = [], 0
    for no, line in enumerate(stream.split(b"\n")[:-1], start=1):
        crlf = len(line) == limit + 1 and line.endswith(b"\r")  # a CRLF ending is not cut
        keep = len(line) if crlf else utf8_boundary(line, limit)
        out.append((line[:keep], offset, no, len(line) - keep))
        offset += len(line) + 1
    return out


def test_partial_line_waits_for_its_newline() -> None:
    f = LineFramer(100)
    assert f.feed(b"abc") is None
    assert f.pending == 3
    c = f.feed(b"def\nxy")
    assert c is not None and c.data == b"abcdef\n" and c.offset == 0 and c.end == 7
    assert f.position == 7 and f.pending == 2


def test_long_line_is_cut_and_counted_with_bounded_buffer() -> None:
    f = LineFramer(256)
    assert f.feed(b"x" * 1000) is None
    assert f.feed(b"y" * 10_000_000) is None
    assert f.held <= 256  # the head only; the rest is counted
    c = f.feed(b"z\nnext\n")
    assert c is not None
    assert lines_of([c]) == [(b"x" * 256, 0, 1, 10_001_000 - 256 + 1), (b"next", 10_001_002, 2, 0)]
    assert c.end == 10_001_007


def test_cut_lands_on_a_utf8_boundary() -> None:
    line = "é".encode() * 200  # 400 bytes, 2 per char
    f = LineFramer(257)
    c = f.feed(line + b"\n")
    assert c is not None
    text = lines_of([c])[0][0]
    assert len(text) == 256 and text.decode() == "é" * 128


def test_finish_emits_unterminated_last_line() -> None:
    f = LineFramer(100)
    assert f.feed(b"a\nlast") is not None
    c = f.finish()
    assert c is not None and c.data == b"last\n" and c.offset == 2 and c.end == 6
    assert f.finish() is None


def test_nul_bytes_survive_framing() -> None:
    c = LineFramer(100).feed(b"a\x00b\n")
    assert c is not None and c.data == b"a\x00b\n"


def test_a_utf8_byte_order_mark_that_begins_the_stream_is_not_part_of_line_1() -> None:
    """`^ERROR` missed line 1 of a file a Windows tool wrote with a BOM; one anywhere else is
    content, and a framer resumed past the start strips nothing."""
    c = LineFramer(100).feed(b"\xef\xbb\xbfERROR one\n\xef\xbb\xbfERROR two\n")
    assert c is not None
    assert lines_of([c]) == [(b"ERROR one", 3, 1, 0), (b"\xef\xbb\xbfERROR two", 13, 2, 0)]
    assert c.end == 26
    resumed = LineFramer(100, offset=13, line_no=2).feed(b"\xef\xbb\xbfERROR two\n")
    assert resumed is not None and lines_of([resumed])[0][0] == b"\xef\xbb\xbfERROR two"


def test_a_byte_order_mark_split_across_reads_is_still_not_part_of_line_1() -> None:
    """A command's first write of a BOM can reach the runner in two reads (`printf '\\357\\273';
    …; printf '\\277ERROR'`): the BOM was kept in line 1 and `^ERROR` missed it."""
    one = [(b"ERROR two", 3, 1, 0)]
    for pieces, lines in [
        ([b"\xef", b"\xbb\xbfERROR two\n"], one),
        ([b"\xef\xbb", b"\xbfERROR two\n"], one),
        ([b"\xef", b"\xbb", b"\xbf", b"ERROR two\n"], one),
        ([b"\xef\xbb", b"", b"\xbf", b"ERROR two\n"], one),
        ([b"\xef\xbb", b"x\n"], [(b"\xef\xbbx", 0, 1, 0)]),  # not a BOM: content
        ([b"\xef", b"\xbb\n"], [(b"\xef\xbb", 0, 1, 0)]),
    ]:
        f = LineFramer(100)
        assert lines_of(feed_all(f, pieces)) == lines, pieces
    f = LineFramer(100)
    assert f.feed(b"\xef\xbb") is None and f.pending == 2 and f.position == 0
    last = f.finish()  # a stream of two bytes of a BOM: they are its one line
    assert last is not None and lines_of([last]) == [(b"\xef\xbb", 0, 1, 0)]


def whole_and_finished(pieces: list[bytes], limit: int) -> list[tuple[bytes, int, int, int]]:
    f = LineFramer(limit)
    chunks = feed_all(f, pieces)
    last = f.finish()
    return lines_of(chunks + ([last] if last is not None else []))


@given(
    st.booleans(),
    st.lists(st.sampled_from([b"a", b"\n", b"\xef", b"\xbb", b"\xbf", b"\xef\xbb\xbf",
                              b"ERROR", b"x" * 40]), max_size=30),
    st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=12),
)
def test_any_split_of_a_stream_gives_the_lines_of_it_read_whole(
    bom: bool, tokens: list[bytes], sizes: list[int]
) -> None:
    stream = (b"\xef\xbb\xbf" if bom else b"") + b"".join(tokens)
    pieces, pos, i = [], 0, 0
    while pos < len(stream):
        n = sizes[i % len(sizes)]
        pieces.append(stream[pos : pos + n])
        pos, i = pos + n, i + 1
    assert whole_and_finished(pieces, 64) == whole_and_finished([stream], 64)


def test_a_crlf_line_of_exactly_max_bytes_is_not_cut_however_it_is_read() -> None:
    """The CR of a CRLF ending is not content: a line of `max` bytes before it was counted as
    cut (1 byte), marked `truncated`, and failed a passing `run --once` gate."""
    stream = b"E" * 256 + b"\r\n" + b"F" * 257 + b"\r\n" + b"ok\r\n"
    for split in range(1, len(stream)):
        f = LineFramer(256)
        got = lines_of(feed_all(f, [stream[:split], stream[split:]]))
        assert got == [(b"E" * 256 + b"\r", 0, 1, 0), (b"F" * 256, 258, 2, 2),
                       (b"ok\r", 517, 3, 0)], split
    f = LineFramer(256)
    assert f.feed(b"E" * 256 + b"\r") is None
    c = f.finish()
    assert c is not None and lines_of([c]) == [(b"E" * 256 + b"\r", 0, 1, 0)]


@given(
    st.lists(st.sampled_from([b"a", b"bb", b"\n", b"\xc3\xa9", b"x" * 40, b"\xff", b"\r\n",
                              b"\r"]), max_size=60),
    st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=20),
    st.sampled_from([256, 300]),
)
def test_any_split_gives_the_reference_lines(
    tokens: list[bytes], sizes: list[int], lim: int
) -> None:
    stream = b"".join(tokens) * 3
    pieces, pos, i = [], 0, 0
    while pos < len(stream):
        n = sizes[i % len(sizes)] * 7
        pieces.append(stream[pos : pos + n])
        pos, i = pos + n, i + 1
    f = LineFramer(lim)
    got = lines_of(feed_all(f, pieces))
    assert got == reference(stream, lim)
    assert f.position == (stream.rfind(b"\n") + 1)
