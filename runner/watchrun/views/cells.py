"""Terminal cells a table's text takes, so that columns stay aligned past wide and zero-width
characters (pure).

A character takes one cell, but two when Unicode's East Asian Width is wide or fullwidth (CJK,
emoji, fullwidth forms) and none when it is a combining mark (Mn, Me: drawn on the character
before it), a format character (Cf) or a conjoining Hangul vowel or final consonant (drawn in
the syllable before it): as `wcwidth` and the terminals count them, from the standard
library's `unicodedata` (which the regex checks load anyway: no dependency, no import cost).
On a stream whose encoding lacks a character (PYTHONIOENCODING=ascii, a Latin-1 locale) the
character is printed as its `\\uXXXX` escape (`cli/stdio.py`), and it takes that many cells.
A value is measured after `edge_text`: the controls are gone and what draws nothing is shown
as an escape by then.
"""

from __future__ import annotations

import functools
import json
import unicodedata

__all__ = ["ELLIPSIS", "cells", "fit", "pad"]

ELLIPSIS = "…"
"""What ends a cut value (one cell; its escape where the encoding lacks it)."""
_NONE = frozenset({"Mn", "Me", "Cf"})
_TWO = frozenset({"W", "F"})


def cells(text: str, encoding: str | None = None) -> int:
    """The cells `text` takes on a terminal, printed to a stream of `encoding` (None: one that
    shows every character, UTF-8)."""
    if text.isascii():
        return len(text)
    return sum(_char(ch, encoding) for ch in text)


def pad(text: str, width: int, encoding: str | None = None) -> str:
    """`text` and spaces to `width` cells (`str.ljust` by cells)."""
    return text + " " * (width - cells(text, encoding))


def fit(text: str, limit: int, encoding: str | None = None) -> str:
    """`text` cut to at most `limit` cells, the cut shown as `…` (`sanitize.shorten`, which
    counts characters, by cells); a combining mark stays with its character."""
    if cells(text, encoding) <= limit:
        return text
    room, used, n = limit - cells(ELLIPSIS, encoding), 0, 0
    while used + _char(text[n], encoding) <= room:  # (it stops inside: the text takes more)
        used += _char(text[n], encoding)
        n += 1
    return text[:n] + ELLIPSIS


@functools.lru_cache(maxsize=4096)
def _char(ch: str, encoding: str | None) -> int:
    if ch.isascii():
        return 1
    if encoding is not None and not _shown(ch, encoding):
        return len(json.dumps(ch)) - 2  # (`\\u65e5`; beyond the BMP a surrogate pair)
    if unicodedata.category(ch) in _NONE or "\u1160" <= ch <= "\u11ff" \
            or "\ud7b0" <= ch <= "\ud7ff":  # fmt: skip
        return 0
    return 2 if unicodedata.east_asian_width(ch) in _TWO else 1


def _shown(ch: str, encoding: str) -> bool:
    """Whether a stream of `encoding` writes `ch` as itself (an unknown encoding: assumed)."""
    try:
        ch.encode(encoding)
    except UnicodeEncodeError:
        return False
    except LookupError:
        return True
    return True
