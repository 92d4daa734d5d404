"""The hot path's lazy bookkeeping gives the same answers as counting everything eagerly:
the framer's line numbers when the consumer settles them, the pipeline's line counts, and the
last `maxLogLines` lines that `watchrun logs` shows."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watchrun.clock import SystemClock
from watchrun.config.model import Limits, WatcherSpec
from watchrun.events import Chunk, Cut
from watchrun.match.framing import CountsLines, LineFramer
from watchrun.match.keyblocks import Region
from watchrun.match.matcher import Matcher
from watchrun.output.runlog import RunLog
from watchrun.output.sink import JsonlSink
from watchrun.output.writer import AsyncWriter
from watchrun.runtime.pipeline import WatcherPipeline
from watchrun.runtime.recent_lines import LONG_CHUNK, RecentLines, _start_of_last

PIECES = st.lists(st.sampled_from([b"a", b"ERROR x", b"\n", b"\n\n", b"\xc3\xa9", b"y" * 30]),
                  max_size=80)  # fmt: skip


def _chunks(framer: LineFramer, pieces: list[bytes], settle: bool) -> list[Chunk]:
    out = []
    for piece in pieces:
        chunk = framer.feed(piece)
        if chunk is not None:
            out.append(chunk)
            if settle:
                framer.settle(chunk.data.count(b"\n"))
    return out


@given(PIECES, st.integers(min_value=1, max_value=40))
def test_line_numbers_are_the_same_whether_the_consumer_settles_them_or_not(
    pieces: list[bytes], limit: int
) -> None:
    eager = _chunks(LineFramer(limit, line_no=7), pieces, settle=True)
    lazy_framer = LineFramer(limit, line_no=7)
    lazy = _chunks(lazy_framer, pieces, settle=False)
    assert [(c.line_no, c.data, c.offset, c.end) for c in lazy] == \
        [(c.line_no, c.data, c.offset, c.end) for c in eager]  # fmt: skip
    stream = b"".join(pieces)
    done = sum(c.end - c.offset for c in lazy)
    assert lazy_framer.line_no == 7 + stream[:done].count(b"\n")


def _reference_tail(datas: list[bytes], keep: int) -> list[bytes]:
    lines = b"".join(datas).split(b"\n")[:-1]
    return lines[-keep:] if keep else []


CHUNK_LINES = st.lists(
    st.tuples(st.lists(st.sampled_from([b"", b"x", b"line two", b"\xff\x00"]), min_size=1,
                       max_size=6), st.booleans()),
    max_size=40,
)  # fmt: skip


@given(CHUNK_LINES, st.integers(min_value=1, max_value=12))
def test_recent_lines_counts_every_line_and_keeps_exactly_the_last_ones(
    chunks: list[tuple[list[bytes], bool]], keep: int
) -> None:
    tail = RecentLines(keep)
    datas: list[bytes] = []
    offset, line_no, inode = 0, 1, 1
    for lines, rotated in chunks:
        if rotated:  # a new generation: offsets and line numbers start again
            offset, line_no, inode = 0, 1, inode + 1
        data = b"".join(x + b"\n" for x in lines)
        tail.add(Chunk(data, offset, line_no, offset + len(data), inode=inode, path="/x"), [])
        datas.append(data)
        offset, line_no = offset + len(data), line_no + len(lines)
        assert tail.lines == sum(d.count(b"\n") for d in datas)
    assert tail.last() == [(x, 0, None) for x in _reference_tail(datas, keep)]
    assert tail.last(3) == [(x[:3], 0, None) for x in _reference_tail(datas, keep)]  # (a status
    # shows a line's head only: a 16 MiB line was copied whole, twice, at every snapshot)


def test_recent_lines_holds_only_what_the_tail_needs() -> None:
    tail = RecentLines(3)
    for i in range(10_000):
        data = f"line {i}\n".encode()
        tail.add(Chunk(data, i * len(data), i + 1, (i + 1) * len(data), inode=1, path="/x"), [])
    assert tail.last() == [(b"line 9997", 0, None), (b"line 9998", 0, None),
                           (b"line 9999", 0, None)]
    assert tail.lines == 10_000
    assert len(tail._held) <= 3  # not one reference per chunk ever seen


LINE = 100  # bytes, newline included: 656 lines make a chunk longer than LONG_CHUNK


def _long_chunk(first: int, lines: int, offset: int, key: tuple[int, int] | None
                ) -> tuple[Chunk, list[Region], list[tuple[bytes, int, int | None]]]:
    """`lines` lines numbered from `first` (every 7th one cut, 7 bytes omitted; those between
    `key`'s two indexes inside key block 1), its regions, and what the tail shows of each."""
    body = [f"{first + i:08d} ".encode().ljust(LINE - 1, b"x") for i in range(lines)]
    data = b"".join(x + b"\n" for x in body)
    cuts = tuple(Cut(i * LINE, 7) for i in range(lines) if (first + i) % 7 == 0)
    regions: list[Region] = [(key[0] * LINE, key[1] * LINE, 1)] if key else []
    shown = [(x, 1 if key and key[0] <= i <= key[1] else 0, 7 if (first + i) % 7 == 0 else None)
             for i, x in enumerate(body)]
    return Chunk(data, offset, first, offset + len(data), cuts, inode=1, path="/x"), regions, shown


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 2000), st.booleans()), min_size=1, max_size=8),
       st.sampled_from([1, 37, 500]), st.booleans())
def test_recent_lines_keeps_what_its_lines_cost_not_whole_reads(
        sizes: list[tuple[int, bool]], keep: int, settle: bool) -> None:
    """A file's read is up to 1 MiB: 200 watchers each keeping two whole reads held 400 MB for
    tails of 500 lines. A long chunk keeps only the lines the tail shows, cut lines and
    key blocks with them."""
    tail, shown, line_no = RecentLines(keep), [], 1
    for lines, key in sizes:
        chunk, regions, said = _long_chunk(line_no, lines, (line_no - 1) * LINE,
                                           (lines // 3, lines // 2) if key else None)
        tail.add(chunk, regions)
        if settle:  # (as the pipeline does once it has counted the chunk; else the next add)
            tail.settle(lines)
        shown += said
        line_no += lines
        assert tail.lines == line_no - 1
        assert tail.last() == shown[-keep:]
        kept = sum(len(h[0]) for h in tail._held) + len(chunk.data if tail._newest is None
                                                         else tail._newest.data)
        newest = len(chunk.data) if not settle else 0  # (kept whole until it is counted)
        assert kept <= 2 * keep * LINE + 2 * LONG_CHUNK + newest, (kept, keep)


def test_a_long_chunk_counted_by_a_snapshot_first_is_still_cut_when_settled() -> None:
    """A status snapshot may ask for the line count between a chunk's `add` and the pipeline's
    `settle`: the chunk is cut to its last lines all the same, not held whole to the next."""
    tail = RecentLines(5)
    chunk, regions, said = _long_chunk(1, 2000, 0, None)
    tail.add(chunk, regions)
    assert tail.lines == 2000
    tail.settle(2000)
    assert tail._newest is not None and len(tail._newest.data) == 5 * LINE
    assert tail.last() == said[-5:]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 3), st.integers(0, 400), st.just(70_000)), min_size=2,
                max_size=300), st.data())
def test_where_the_last_lines_begin_is_found_however_long_the_lines_are(
        lengths: list[int], data: st.DataObject) -> None:
    """`_start_of_last` guesses where the last `keep` lines begin from the average line and
    counts from there: lines far shorter or longer at the end than on average (a 70 000-byte
    line among empty ones) move the guess, never the answer."""
    text = b"".join(b"y" * n + b"\n" for n in lengths)
    keep = data.draw(st.integers(1, len(lengths) - 1))
    expected = len(b"".join(b"y" * n + b"\n" for n in lengths[:-keep]))
    assert _start_of_last(text, len(lengths), keep) == expected


def _pipeline(tmp_path: Path, max_log_lines: int = 500) -> WatcherPipeline:
    spec = WatcherSpec(id="w", label="w", pattern="ERROR", path=tmp_path / "app.log")
    sink = JsonlSink(tmp_path / "w.jsonl", "w", max_bytes=1 << 30, keep=1, clock=SystemClock())
    log = RunLog(quiet=True)
    return WatcherPipeline(spec, Limits(max_log_lines=max_log_lines), sink, AsyncWriter(sink),
                           Matcher("ERROR"), log)  # fmt: skip


@pytest.mark.parametrize("text", [
    b"INFO a\nINFO b\n",  # no match: everything counted after the scan
    b"ERROR first\nINFO b\nINFO c\n",  # match at the start
    b"INFO a\nINFO b\nERROR last\n",  # match on the last line
    b"ERROR a\nINFO\n\nERROR b\nINFO c\nINFO d\n",
])  # fmt: skip
def test_the_pipeline_counts_each_chunk_once_and_numbers_matches(tmp_path: Path,
                                                                 text: bytes) -> None:
    pipe = _pipeline(tmp_path)
    assert isinstance(pipe, CountsLines)
    chunk = Chunk(text, 0, 10, len(text), inode=5, path="/x")
    asyncio.run(pipe.chunk(chunk))
    assert pipe.lines_in_last_chunk() == text.count(b"\n")
    numbers = [10 + i for i, line in enumerate(text.split(b"\n")) if b"ERROR" in line]
    assert [m.line_no for m in pipe.counters.recent] == numbers
    assert pipe.counters.lines == text.count(b"\n")
    pipe.sink.close()


def test_a_file_read_in_many_chunks_has_exact_line_numbers_and_counts(tmp_path: Path) -> None:
    """The real path: FileSource reads small chunks, the pipeline settles the framer's count."""
    from watchrun.notify import Notifier
    from watchrun.sources.checkpoints import CheckpointStore
    from watchrun.sources.file import FileSource

    lines = [f"{'ERROR' if i % 37 == 0 else 'INFO'} line {i} {'x' * (i % 50)}" for i in range(3000)]
    log_file = tmp_path / "app.log"
    log_file.write_text("".join(x + "\n" for x in lines))
    pipe = _pipeline(tmp_path, max_log_lines=5)
    spec = WatcherSpec(id="w", label="w", pattern="ERROR", path=log_file, from_start=True)
    (tmp_path / "state").mkdir()

    async def main() -> None:
        notifier = Notifier(500)
        source = FileSource(spec, Limits(), CheckpointStore(tmp_path / "state"), notifier,
                            SystemClock(), once=True, read_size=1000)  # fmt: skip
        await source.run(pipe)
        notifier.close()

    asyncio.run(main())
    want = [i + 1 for i, x in enumerate(lines) if x.startswith("ERROR")]
    assert [m.line_no for m in pipe.counters.recent] == want[-len(pipe.counters.recent):]
    assert pipe.counters.matches == len(want)
    assert pipe.counters.lines == 3000
    assert pipe.counters.tail.last() == [(x.encode(), 0, None) for x in lines[-5:]]
    pipe.sink.close()


@settings(max_examples=50)
@given(st.lists(st.integers(min_value=0, max_value=5), min_size=1, max_size=30))
def test_tail_of_a_command_with_many_runs(runs: list[int]) -> None:
    """Command runs restart offsets and line numbers: the count stays exact."""
    tail = RecentLines(4)
    datas: list[bytes] = []
    for run, n in enumerate(runs, start=1):
        if n == 0:
            continue
        data = b"".join(f"r{run} l{i}\n".encode() for i in range(n))
        tail.add(Chunk(data, 0, 1, len(data), run=run), [])
        datas.append(data)
    assert tail.lines == sum(runs)
    assert tail.last() == [(x, 0, None) for x in _reference_tail(datas, 4)]


def test_the_match_echo_on_stderr_is_capped_per_second() -> None:
    import io

    from watchrun.events import MatchInfo
    from watchrun.output.runlog import MATCH_LINES_PER_SECOND

    stream = io.StringIO()
    log = RunLog(stream=stream, timestamps=False)
    n = MATCH_LINES_PER_SECOND + 10
    found = [MatchInfo(f"ERROR {i}", i, 0, f"/x.log:{i}") for i in range(n)]
    log.matches("app", found)
    echoed = stream.getvalue().splitlines()
    assert echoed == [f"watchrun: [app] match /x.log:{i}: ERROR {i}"
                      for i in range(MATCH_LINES_PER_SECOND)]  # fmt: skip


@pytest.mark.parametrize("long_at", [None, 0, 1000, 2999])
def test_small_max_line_bytes_cuts_exactly_the_long_lines(long_at: int | None) -> None:
    """maxLineBytes 256 with 256 KiB reads: the one-split shortcut and the window scan agree."""
    lines = [b"line %d " % i + b"x" * (i % 90) for i in range(3000)]
    if long_at is not None:
        lines[long_at] = b"L" * 5000
    data = b"".join(x + b"\n" for x in lines)
    chunk = LineFramer(256).feed(data)
    assert chunk is not None
    got = chunk.data.split(b"\n")[:-1]
    assert got == [x[:256] for x in lines]
    if long_at is None:
        assert chunk.cuts == ()
    else:
        assert len(chunk.cuts) == 1 and chunk.cuts[0].omitted == 5000 - 256
        assert chunk.data[chunk.cuts[0].pos : chunk.cuts[0].pos + 1] == b"L"
