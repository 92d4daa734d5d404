"""Plain lines, the fast path past `sanitize`: telling from the bytes of lines, in C, that
sanitizing leaves them as they are and that no record escape is needed in them (most log lines)."""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterable

from watchrun.match.simd import finder, has_any

__all__ = ["BIDI", "HIDDEN", "MARKS", "MARKS_UTF8", "plain_chunk", "plain_text", "plain_texts"]

BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
"""Bidirectional controls (a regex class's body): marks, embeddings, overrides, isolates."""
MARKS = f"\u2028\u2029{BIDI}"
"""U+2028/U+2029 and the bidi controls: ordinary text to `sanitize`, but they break or reorder
what a terminal shows, so records and the edge write them as `\\u` escapes."""
HIDDEN = ("\u00ad\u034f\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4"
          "\u17b5\u180b-\u180f\u200b-\u200d\u2060-\u2065\u206a-\u206f\u3164\ufe00-\ufe0f"
          "\ufeff\uffa0\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
          "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
          "\U000e0100-\U000e01ef")
"""The other invisible characters (a regex class's body): Unicode's format characters (Cf:
soft hyphen, zero-width space and joiners, word joiner, BOM, interlinear annotation, the tag
characters that can spell a hidden instruction), the Hangul fillers, and the other default
ignorables that draw nothing: the combining grapheme joiner, the Khmer inherent vowels, the
Mongolian and the 256 variation selectors (one per byte value: a run of them after any
character spells hidden bytes; an emoji's U+FE0F is shown escaped too, as its joiners are).
Records keep them (they are the line); what a person or a model reads shows them escaped."""
MARKS_UTF8 = re.compile(b"\xe2\x80[\x8e\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]|\xd8\x9c")
"""`MARKS` in UTF-8 (each a whole character: a lead byte starts every match)."""
_KEEP_C0 = bytes((*range(0, 9), *range(10, 32), 0x7F))  # C0 but tab, and DEL: one byte each
_C1_UTF8 = re.compile(b"\xc2[\x80-\x9f]")


def plain_text(line: bytes, max_bytes: int) -> str | None:
    """The text of one line (bytes without its newline) when `sanitize` would leave it as it is
    and no record escape is needed in it; None when it needs the full treatment.

    Checked on the bytes, in C: no C0 control but tab and no DEL (single bytes in UTF-8), no C1
    control (`\\xc2\\x80`-`\\xc2\\x9f`), no U+2028/U+2029 or bidi control (`MARKS`), and short
    enough not to be clipped. Invalid UTF-8 decodes to U+FFFD exactly as `decode` does. The
    rule of the match records' fast path (`plain_texts` applies it to all the matched lines of
    a chunk at once): most log lines are plain."""
    if has_any(line, _KEEP_C0):
        return None
    if line.isascii():
        return line.decode("ascii") if len(line) <= max_bytes else None
    if (b"\xc2" in line and _C1_UTF8.search(line) is not None) or \
            MARKS_UTF8.search(line) is not None:  # fmt: skip
        return None
    text = line.decode("utf-8", "replace")
    return text if len(text) * 4 <= max_bytes or len(text.encode()) <= max_bytes else None


_NOT_PLAIN = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{MARKS}]")  # `plain_text`'s rules


def plain_texts(lines: Iterable[bytes], sizes: list[int], max_bytes: int
                ) -> tuple[bytes, str, list[int]]:
    """`plain_text` of many lines at once (`sizes`: their lengths): their UTF-8 decoded and
    joined by newlines, their text joined by newlines (split by whoever shows a line), and the
    indexes of those `plain_text` refuses (all of them with `max_bytes` < 0, the lines then
    returned as read). One decode and one check of all the lines, in C; a line is looked at
    alone only when the check finds something, or when it may be longer than `max_bytes`."""
    joined = b"\n".join(lines)
    text = joined.decode("utf-8", "replace")  # no newline in a line, nor in a U+FFFD
    if max_bytes < 0:
        return joined, text, list(range(len(sizes)))
    maybe_long = list(itertools.compress(range(len(sizes)), map((max_bytes // 3).__lt__, sizes)))
    texts = text.split("\n") if maybe_long else []  # (U+FFFD takes 3 bytes for 1)
    odd = {k for k in maybe_long if len(texts[k].encode()) > max_bytes}
    if has_any(joined, _KEEP_C0_NL) or (not joined.isascii() and _may_hold_c1_or_ls(joined)):
        texts = texts or text.split("\n")
        starts = list(itertools.accumulate((len(t) + 1 for t in texts), initial=0))
        odd.update(bisect.bisect_right(starts, m.start()) - 1 for m in _NOT_PLAIN.finditer(text))
    utf8 = joined if "\ufffd" not in text else text.encode()  # (decoded without a loss: as read)
    return utf8, text, sorted(odd)


_KEEP_C0_NL = _KEEP_C0.replace(b"\n", b"")


def _may_hold_c1_or_ls(data: bytes) -> bool:
    """Whether UTF-8 `data` may hold a C1 control (its lead byte 0xC2) or one of `MARKS`
    (the first two bytes of each), told by SIMD finds: a regex search of the matched lines
    cost 0.17 s of a 300 MB scan at 10 % (the caller looks closer when this says maybe)."""
    find = finder(data)
    return any(find(lead, 0) >= 0 for lead in _MAYBE)


_MAYBE = (b"\xc2", b"\xe2\x80", b"\xe2\x81", b"\xd8\x9c")
"""The lead bytes of a C1 control and the first two bytes of every one of `MARKS`."""


def plain_chunk(data: bytes) -> bool:
    """Whether every line of `data` is plain ASCII (`plain_text` for each, in one pass)."""
    return data.isascii() and not has_any(data, _KEEP_C0_NL)
