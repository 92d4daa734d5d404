"""Beginnings no text pattern matches past, told by the first bytes (pure): a stream's
beginning judged once, however it is split into reads."""

from __future__ import annotations

import gzip

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchrun.sources.unreadable import FEWEST_UNITS, LOOKED_AT, Beginning

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


U32_BOM = ("not-utf8", "is UTF-32 (it starts with a byte order mark); watchrun reads UTF-8: "
           "convert it first (iconv -f UTF-32 -t UTF-8)")
U32_BARE = ("not-utf8", "is UTF-32 (NULs beside each character of its first line, three beside "
            "a Latin letter, no byte order mark); watchrun reads UTF-8: convert it first (iconv "
            "-f UTF-32LE -t UTF-8, or UTF-32BE)")


@pytest.mark.parametrize(("data", "said"), [
    (("\ufeff" + UTF16).encode("utf-32-be"), U32_BOM),  # 00 00 FE FF
    (("\ufeff" + UTF16).encode("utf-32-le"), U32_BOM),  # FF FE 00 00: not UTF-16's advice
    (UTF16.encode("utf-32-le"), U32_BARE),  # E 00 00 00 R 00 00 00 …
    (UTF16.encode("utf-32-be"), U32_BARE),
    (UTF16[:4].encode("utf-32-le"), U32_BARE),  # (16 bytes: judged at the end)
    ("журнал: ошибка\n".encode("utf-32-le"), U32_BARE),  # (two NULs beside each letter)
    ("日志 错误\n".encode("utf-32-be"), U32_BARE),
    (UTF16[:3].encode("utf-32-le"), None),  # (3 units: too few to tell)
    (("\ufeff" + UTF16).encode("utf-16-le"), BOM),  # (UTF-16's own mark: FF FE, a letter)
    (b"\0\0\0\0" * 100 + b"ok\n", None),  # a hole of whole units: no letter beside them
    ((b"\x01\x00\x00\x00" + b"ab") * 40, None),  # (one unit in three is UTF-32-like: binary)
], ids=["bom-be", "bom-le", "bare-le", "bare-be", "bare-short", "cyrillic", "cjk", "too-few",
        "utf16-bom", "nul-hole", "binary"])
def test_utf32_is_told_as_utf32(data: bytes, said: tuple[str, str] | None) -> None:
    """UTF-32 passed a once gate (no NUL beside a letter in 2-byte units: a UTF-32 unit's
    second half is NUL both), and its LE byte order mark (`FF FE 00 00`) was taken for
    UTF-16's, with advice that gives `\\0I\\0N\\0F\\0O`. Now it is UTF-32, with iconv's."""
    assert judged(data, []) == ([said] if said else [])


TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFFFF, exclude_categories=(
    "Cs",), exclude_characters="\ufeff"), min_size=FEWEST_UNITS)
"""Text of the Basic Multilingual Plane long enough to be judged: no NUL, no surrogate (not
text), no byte order mark of its own."""


@given(TEXT)
def test_any_text_is_told_by_its_encoding_and_never_as_another(text: str) -> None:
    """Each encoding of the same text is told as itself, at most once: UTF-32 never as
    UTF-16 (nor UTF-16 as UTF-32), and UTF-8 never at all. (UTF-16 is told by a NUL beside a
    letter: text with no byte of a NUL in its units, Cyrillic, is not told without a mark.)"""
    assert judged(text.encode(), []) == []
    for codec in ("utf-32-le", "utf-32-be"):
        assert judged(text.encode(codec), []) == [U32_BARE]
        assert judged(("\ufeff" + text).encode(codec), []) == [U32_BOM]
    for codec in ("utf-16-le", "utf-16-be"):
        said = judged(("\ufeff" + text).encode(codec), [])
        assert [why.split(" (")[0] for _, why in said] == ["is UTF-16"]
        assert all("UTF-32" not in why for _, why in judged(text.encode(codec), []))
