"""StringZilla's scans once a big span is seen: the same newline counts, finds and lowering as
the `bytes` methods, and a runner that only tails never loads the library."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from liverunner import fresh_python

from watchrun.match.simd import (
    BIG,
    count_newlines,
    finder,
    has_any,
    lower_ascii,
    newline_counter,
)

DATA = st.lists(st.sampled_from([b"\n", b"a", b"\xe2\x80\xa8", b"\r\n", b"\x00", b"xyz" * 50,
                                  b"ERROR", b"\xc3\x89rr"]),
                max_size=200).map(b"".join)


@settings(max_examples=200)
@given(DATA, st.data(), st.integers(0, 3))
def test_counts_are_bytes_count(data: bytes, draw: st.DataObject, repeat: int) -> None:
    data = data * (1 + repeat * BIG // max(1, len(data)))  # spans on both sides of BIG
    start = draw.draw(st.integers(0, len(data)))
    end = draw.draw(st.integers(start, len(data)))
    want = data.count(b"\n", start, end)
    assert count_newlines(data, start, end) == want
    assert newline_counter(data)(start, end) == want
    assert count_newlines(data) == data.count(b"\n")
    assert lower_ascii(data) == data.lower()
    needle = draw.draw(st.sampled_from([b"\n", b"a\n", b"xyz", b"\xe2\x80", b"zz", b"\r\na"]))
    assert finder(data)(needle, start) == data.find(needle, start)
    byteset = draw.draw(st.sampled_from([b"\x00", b"\x7f\x00\x1f", b"\xe2\r", b"qz",
                                         bytes(range(9))]))
    assert has_any(data, byteset) == any(c in byteset for c in data)


def test_small_spans_do_not_load_the_library_and_a_big_one_does() -> None:
    script = (
        "import sys\n"
        "from watchrun.match.simd import BIG, count_newlines, newline_counter\n"
        "assert count_newlines(b'a\\nb\\n' * 100) == 200\n"
        "assert newline_counter(b'x\\n' * 1000)(0, 2000) == 1000\n"
        "print('stringzilla' in sys.modules)\n"
        "assert count_newlines(b'ab\\n' * BIG) == BIG\n"
        "print('stringzilla' in sys.modules)\n"
        "assert newline_counter(b'a\\n')(0, 2) == 1\n"
    )
    assert fresh_python(script) == ["False", "True"]

