"""StringZilla's SIMD byte scans (counts, searches, ASCII lowering), loaded lazily, off the loop.

The library is only a speed-up: every scan has the `bytes` method it stands for, used until it
is loaded and for good when it cannot be (a broken install, a memory limit, no descriptor left:
said once in the runner's log, with the import's error; the results are the same, slower)."""

from __future__ import annotations

import functools
import importlib
import logging
import threading
from collections.abc import Callable
from typing import Any

BIG = 64 * 1024
"""Bytes below this are scanned by `bytes` methods until a longer span asks for StringZilla
(~0.9 MiB of RSS): a runner that only tails, reading little at a time, never loads it; a
backlog scan starts loading it at its first chunk and then uses it for every span once loaded
(newline counts 4-5x faster than `bytes.count` on 4 MiB and 2-5x on a 100-1000 byte span, a
literal found ~8x faster than by `bytes.find`; docs/decisions.md)."""

_LOWER = bytes(range(256)).lower()
_sz: Any = None
_asked = threading.Lock()
"""Held from the first span of BIG bytes on: the one load was started (or could not be)."""
log = logging.getLogger("watchrun.simd")  # (the runner log's `simd` events)


def _simd(size: int) -> Any:
    """StringZilla once loaded, else None. The first span of `BIG` bytes or more starts loading
    it in a thread of its own (its import opens files and maps a shared object: never on the
    runner's loop); the spans until it is loaded are scanned by `bytes` methods."""
    if _sz is None and size >= BIG and _asked.acquire(blocking=False):
        try:
            threading.Thread(target=_load, name="watchrun-simd-load", daemon=True).start()
        except RuntimeError as exc:  # (no thread can be started: the same as no library)
            _unavailable(exc)
    return _sz


def _load() -> None:
    global _sz
    try:
        _sz = importlib.import_module("stringzilla")
    except Exception as exc:  # (ImportError, MemoryError, OSError: whatever the load raised)
        _unavailable(exc)


def _unavailable(exc: Exception) -> None:
    log.warning("StringZilla cannot be loaded (%s: %s): large reads are scanned without its "
                "SIMD speed-up, with the same results (reinstall watchrun's dependencies, or "
                "`pip install stringzilla`)", type(exc).__name__, exc)


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
