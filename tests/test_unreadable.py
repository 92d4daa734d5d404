"""Beginnings no text pattern matches past, told by the first bytes (pure): a stream's
beginning judged once, however it is split into reads."""

from __future__ import annotations

import gzip

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchrun.sources.unreadable import LOOKED_AT, Beginning

UTF16 = "build\r\nERROR: failed\r\n" * 20
BOM = ("not-utf8", "is UTF-16 (it starts with a byte order mark); watchrun reads UTF-8: "
       "convert it first (iconv -f UTF-16 -t UTF-8)")
BARE = "not-utf8"


def judged(data: bytes, cuts: list[int]) -> list[tuple[str, str]]:
    """All that `Beginning.feed` says for the reads of `data` split at `cuts`, then the end."""
    b, said, last = Beginning(), [], 0
    for cut in [*sorted({c for c in cuts if 0 < c < len(data)}), len(data)]:  # (no b"")
        said += b.feed(data[last:cut])
        last = cut
    return [*said, *b.feed(b"")]


@pytest.mark.parametrize(("data", "code"), [
    (("\ufeff" + UTF16).encode("utf-16-le"), "not-utf8"),
    (UTF16.encode("utf-16-be"), BARE),
    (UTF16[:8].encode("utf-16-le"), BARE),  # (shorter than LOOKED_AT: judged at the end)
    (gzip.compress(UTF16.encode(), mtime=0), "compressed"),
    (("\ufeff" + UTF16).encode(), None),  # UTF-8, its byte order mark too
    (b"\0" * 300 + b"ok\n", None),  # a hole a crash left: no letter beside the NULs
    (b"", None),
], ids=["bom", "bare-be", "bare-short", "gzip", "utf8-bom", "nul-hole", "empty"])
def test_a_beginning_is_judged_once(data: bytes, code: str | None) -> None:
    said = judged(data, [])
    assert [x[0] for x in said] == ([code] if code else [])
    if code == "not-utf8" and data.startswith(b"\xff\xfe"):
        assert said == [BOM]


@given(st.lists(st.integers(0, 2 * LOOKED_AT), max_size=20))
def test_however_the_reads_split_it_the_beginning_is_said_once(cuts: list[int]) -> None:
    data = ("\ufeff" + UTF16).encode("utf-16-le")
    assert judged(data, cuts) == [BOM]
