"""The read side: cursors, reading across rotated files, `--since`, tail reads, torn lines."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watchrun.output.backward import complete_tail, last_records
from watchrun.output.records import (
    ReadStats,
    cursor_expired,
    format_cursor,
    iter_records,
    oldest_seq,
    parse_cursor,
    retained_files,
)


def line(seq: int, kind: str = "match", pad: int = 0) -> bytes:
    rec = {"schema": 1, "seq": seq, "cursor": format_cursor("w", seq), "kind": kind, "x": "p" * pad}
    return json.dumps(rec).encode() + b"\n"


def write_stream(path: Path, files: list[list[bytes]], torn: bytes = b"") -> None:
    """files[0] is the oldest (`.N`), files[-1] the live file; `torn` is appended to the live
    file without a newline."""
    for n, lines in enumerate(files):
        name = path if n == len(files) - 1 else Path(f"{path}.{len(files) - 1 - n}")
        name.write_bytes(b"".join(lines) + (torn if name == path else b""))


@pytest.mark.parametrize(
    ("cursor", "expected"),
    [
        ("server:000000000000002a", ("server", 42)),
        ("agent-1:0000000000000002", ("agent-1", 2)),
        ("a.b_c-d:0000000000000000", ("a.b_c-d", 0)),
        ("x:ffffffffffffffff", ("x", 2**64 - 1)),
    ],
)
def test_parse_cursor(cursor: str, expected: tuple[str, int]) -> None:
    assert parse_cursor(cursor) == expected
    assert format_cursor(*expected) == cursor


@pytest.mark.parametrize(
    "cursor",
    [
        "server:000000000000002A",  # uppercase hex
        "server:00000000000002a",  # 15 digits
        "server:0000000000000002a",  # 17 digits
        "server000000000000002a",  # no colon
        ":000000000000002a",  # no id
        "-x:000000000000002a",  # id must start with a letter or digit
        "a/b:000000000000002a",
        "server:000000000000002a\n",
        "server:42",
        "",
    ],
)
def test_parse_cursor_rejects(cursor: str) -> None:
    with pytest.raises(ValueError, match="invalid_cursor"):
        parse_cursor(cursor)


@pytest.mark.parametrize(("sid", "seq"), [("", 1), ("../x", 1), ("a" * 65, 1), ("x", -1)])
def test_format_cursor_rejects(sid: str, seq: int) -> None:
    with pytest.raises(ValueError):
        format_cursor(sid, seq)


def test_retained_files_oldest_first_numeric(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    for name in ["w.jsonl", "w.jsonl.1", "w.jsonl.2", "w.jsonl.10", "w.jsonl.9", "w.jsonl.01",
                 "w.jsonl.x", "w.jsonl.1.tmp", "v.jsonl.3"]:
        (tmp_path / name).write_bytes(b"")
    names = [p.name for p in retained_files(path)]
    assert names == ["w.jsonl.10", "w.jsonl.9", "w.jsonl.2", "w.jsonl.1", "w.jsonl"]
    assert retained_files(tmp_path / "missing" / "w.jsonl") == []


def test_iter_records_across_rotated_files_in_order(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    write_stream(path, [[line(1), line(2)], [line(3)], [line(4), line(5)]])
    assert [r["seq"] for r in iter_records(path)] == [1, 2, 3, 4, 5]
    assert [r["seq"] for r in iter_records(path, since_seq=2)] == [3, 4, 5]
    assert [r["seq"] for r in iter_records(path, since_seq=5)] == []
    assert oldest_seq(path) == 1


def test_torn_and_invalid_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    write_stream(path, [[line(1), b"not json\n", b"\n", b'{"seq":"3"}\n', line(2)]],
                 torn=line(3)[:20])
    stats = ReadStats()
    assert [r["seq"] for r in iter_records(path, stats=stats)] == [1, 2]
    assert (stats.torn, stats.invalid) == (1, 3)
    stats = ReadStats()
    assert [r["seq"] for r in last_records(path, 5, stats=stats)] == [1, 2]
    assert (stats.torn, stats.invalid) == (1, 3)


def test_missing_and_empty_streams(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    assert list(iter_records(path)) == []
    assert last_records(path, 3) == []
    assert oldest_seq(path) is None
    path.write_bytes(b"")
    assert oldest_seq(path) is None
    assert not cursor_expired(path, 10)


def test_since_uses_rotated_files_and_expiry(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    write_stream(path, [[line(s) for s in range(11, 21)], [line(s) for s in range(21, 26)]])
    assert oldest_seq(path) == 11
    assert cursor_expired(path, 9)  # record 10 is gone: a gap would be silent
    assert not cursor_expired(path, 10)
    assert not cursor_expired(path, 25)
    assert [r["seq"] for r in iter_records(path, since_seq=18)] == list(range(19, 26))


def test_since_in_a_large_file_matches_a_full_scan(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    # ~1.4 MB over three files, with some lines bigger than the 64 KiB search window
    seqs = iter(range(1, 10**6))
    files = [[line(next(seqs), pad=(70_000 if s % 997 == 0 else 40)) for s in range(n)]
             for n in (3000, 10, 9000)]
    write_stream(path, files)
    every = [r["seq"] for r in iter_records(path)]
    assert every == list(range(1, 12011))
    for since in [0, 1, 2999, 3000, 3005, 3010, 3011, 7777, 12009, 12010, 99999]:
        got = [r["seq"] for r in iter_records(path, since_seq=since)]
        assert got == [s for s in every if s > since], since


def test_last_records_reads_backwards_with_kinds(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    write_stream(path, [[line(1, "match"), line(2, "start")],
                        [line(3, "match", pad=200_000), line(4, "error"), line(5, "stop")]])
    assert [r["seq"] for r in last_records(path, 2)] == [4, 5]
    assert [r["seq"] for r in last_records(path, 2, {"match"})] == [1, 3]
    assert len(last_records(path, 1, {"match"})[0]["x"]) == 200_000
    assert [r["seq"] for r in last_records(path, 10)] == [1, 2, 3, 4, 5]
    assert last_records(path, 0) == []
    assert last_records(path, 3, {"rotate"}) == []


def test_last_records_when_the_live_file_is_only_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    write_stream(path, [[line(1), line(2)], []], torn=b"x" * 150_000)
    stats = ReadStats()
    assert [r["seq"] for r in last_records(path, 1, stats=stats)] == [2]
    assert stats.torn == 1


@settings(max_examples=40, deadline=None)
@given(
    pads=st.lists(st.sampled_from([0, 10, 3000, 70_000]), min_size=0, max_size=25),
    cuts=st.lists(st.integers(0, 25), max_size=3),
    torn=st.sampled_from([b"", b"{", b"x" * 70_000]),
    n=st.integers(1, 30),
    since=st.integers(0, 27),
)
def test_reads_agree_with_a_naive_model(
    pads: list[int], cuts: list[int], torn: bytes, n: int, since: int
) -> None:
    lines = [line(i + 1, "match" if i % 3 else "start", pad) for i, pad in enumerate(pads)]
    bounds = sorted({min(c, len(lines)) for c in cuts})
    files = [lines[a:b] for a, b in zip([0, *bounds], [*bounds, len(lines)], strict=True)]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "w.jsonl"
        write_stream(path, files, torn)
        all_seqs = list(range(1, len(lines) + 1))
        assert [r["seq"] for r in iter_records(path)] == all_seqs
        assert [r["seq"] for r in iter_records(path, since_seq=since)] == all_seqs[since:]
        assert [r["seq"] for r in last_records(path, n)] == all_seqs[-n:]
        starts = [s for s in all_seqs if (s - 1) % 3 == 0]
        assert [r["seq"] for r in last_records(path, n, {"start"})] == starts[-n:]
        assert oldest_seq(path) == (1 if lines else None)


def test_a_writer_looks_up_its_rotated_files_by_name(tmp_path: Path) -> None:
    """With `keep` (the sink's output.keep) `.1`..`.keep` are looked up by name, not by listing
    the directory (500 sinks in one directory: no 500 listings of 500 names); a gap is fine."""
    from watchrun.output.records import retained_files

    live = tmp_path / "w.jsonl"
    for name in ("w.jsonl", "w.jsonl.1", "w.jsonl.3", "w.jsonl.9", "other.jsonl.2"):
        (tmp_path / name).write_text("")
    assert retained_files(live, keep=5) == [tmp_path / "w.jsonl.3", tmp_path / "w.jsonl.1", live]
    assert retained_files(live) == [tmp_path / "w.jsonl.9", tmp_path / "w.jsonl.3",
                                    tmp_path / "w.jsonl.1", live]


BIG = 70 * 1024  # over the 64 KiB a look back reads at once


@pytest.mark.parametrize(("data", "size", "last"), [
    (b"", 0, b""),
    (b"torn", 0, b""),  # no newline at all: everything is a torn record
    (b"only\n", 5, b"only"),
    (b"a\nb\n", 4, b"b"),
    (b"a\nb\ntorn", 4, b"b"),  # the torn record is cut; the last whole line before it
    (b"a\n\n", 3, b""),  # an empty last line
    (b"a\n" + b"x" * BIG + b"\n", 2 + BIG + 1, b""),  # longer than a look back: not at hand
    (b"x" * BIG + b"\nend\n", BIG + 5, b"end"),
    (b"end\n" + b"t" * BIG, 4, b"end"),  # a torn record longer than a look back
])
def test_complete_tail_is_the_size_without_a_torn_record_and_the_last_line(
        tmp_path: Path, data: bytes, size: int, last: bytes) -> None:
    """What the sink keeps of its live file at open, and the last line it reads the stream's
    last record from (b"" sends it to the full reader)."""
    path = tmp_path / "w.jsonl"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert complete_tail(fd, len(data)) == (size, last)
    finally:
        os.close(fd)
