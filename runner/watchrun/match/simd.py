"""StringZilla's SIMD byte scans (counts, searches, ASCII lowering), loaded lazily."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

BIG = 64 * 1024
"""Bytes below this are scanned by `bytes` methods until a longer span loads StringZilla
(~0.9 MiB of RSS): a runner that only tails, reading little at a time, never loads it; a
backlog scan loads it at its first chunk and then uses it for every span (newline counts 4-5x
faster than `bytes.count` on 4 MiB and 2-5x on a 100-1000 byte span, a literal found ~8x
faster than by `bytes.find`; docs/decisions.md)."""

_LOWER = bytes(range(256)).lower()
_sz: Any = None


def _simd(size: int) -> Any:
    """StringZilla once loaded, or when `size` bytes are worth loading it for; else None."""
    global _sz
    if _sz is None and size >= BIG:
        _sz = importlib.import_module("stringzilla")
    return _sz


def count_newlines(data: bytes, start: int = 0, end: int | None = None) -> int:
    """The newlines in `data[start:end]` (`0 <= start <= end <= len(data)`)."""
    stop = len(data) if end is None else end
    sz = _simd(stop - start)
    if sz is None:
        return data.count(b"\n", start, stop)
    count: int = sz.count(data, b"\n", start, stop)
    return count


def count_of(data: bytes, needle: bytes) -> int:
    """`data.count(needle)`: the non-overlapping occurrences of `needle`."""
    sz = _simd(len(data))
    if sz is None:
        return data.count(needle)
    count: int = sz.count(data, needle)
    return count


def has_any(data: bytes, byteset: bytes) -> bool:
    """Whether `data` holds any byte of `byteset`."""
    sz = _simd(len(data))
    if sz is None:
        return len(data.translate(None, byteset)) != len(data)
    return bool(sz.find_first_of(data, byteset) >= 0)


def newline_counter(data: bytes) -> Callable[[int, int], int]:
    """`count(start, end)`: `count_newlines(data, start, end)` without a Python call per use,
    for a loop over the matches of one chunk."""
    sz = _simd(len(data))
    if sz is None:
        return functools.partial(data.count, b"\n")
    return functools.partial(sz.count, data, b"\n")


def lower_ascii(data: bytes) -> bytes:
    """`data.lower()` (ASCII letters only, as `bytes.lower`)."""
    sz = _simd(len(data))
    if sz is None:
        return data.lower()
    lowered: bytes = sz.translate(data, _LOWER)
    return lowered


def finder(data: bytes) -> Callable[[bytes, int], int]:
    """`find(needle, start)`: `data.find(needle, start)`."""
    sz = _simd(len(data))
    if sz is None:
        return data.find
    return functools.partial(sz.find, data)
