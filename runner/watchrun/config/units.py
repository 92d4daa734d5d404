"""Parse and format durations (`250ms`, `10s`, `5m`, `2h`) and sizes (`64KiB`, `16MiB`)."""

from __future__ import annotations

import math
import re

from watchrun.config.numbers import TooLong, read_int, short_number

__all__ = [
    "DURATION_PATTERN",
    "SIZE_PATTERN",
    "TooLarge",
    "format_duration",
    "format_size",
    "parse_duration",
    "parse_size",
    "whole",
]

DURATION_UNITS: dict[str, int] = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
"""Milliseconds per duration unit. A bare number is milliseconds."""

SIZE_UNITS: dict[str, int] = {
    "B": 1,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
    "TiB": 1024**4,
}
"""Bytes per size unit: KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB powers of 1000."""

_NUM = r"[0-9]+(?:\.[0-9]+)?"
DURATION_PATTERN = rf"^ *(?:[0-9]+ *|(?:{_NUM} ?(?:ms|s|m|h|d) *)+)$"
"""The string form of a duration, as used in the JSON Schema (a sum like `1h30m` is allowed)."""
SIZE_PATTERN = rf"^ *{_NUM} ?(?:B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)? *$"
"""The string form of a size, as used in the JSON Schema."""

_DURATION_RE = re.compile(DURATION_PATTERN)
_DURATION_PART = re.compile(rf"({_NUM}) ?(ms|s|m|h|d)")
_SIZE_RE = re.compile(rf"^ *({_NUM}) ?(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)? *$")

DURATION_HELP = "a number of milliseconds or a string like 250ms, 10s, 5m, 2h (or 1h30m)"
SIZE_HELP = (
    "a number of bytes or a string like 64KiB, 16MiB, 1GiB "
    "(KiB/MiB/GiB are powers of 1024, KB/MB/GB powers of 1000)"
)


class TooLarge(ValueError):
    """A number too large to compute (more digits than Python converts, or past the largest
    float): larger than any range of a setting."""

    def __init__(self, text: str) -> None:
        super().__init__(f"{short_number(text.strip())} is too large")


def whole(text: str) -> int:
    """The int of a string of ASCII digits; TooLarge when it has more digits than Python
    converts (`numbers.read_int`)."""
    value = read_int(text.strip())
    if isinstance(value, TooLong):
        raise TooLarge(text)
    return value


def _number(value: object, what: str, help_text: str) -> int | None:
    """An integral JSON number as int; None when `value` is a string to parse."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{value!r} is not a {what}: use {help_text}")
    if isinstance(value, str):
        return None
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(f"{value!r} is not a {what}: a number must be whole; use {help_text}")
    return int(value)


def parse_duration(value: object) -> int:
    """Milliseconds for `value`: an integer (ms), or a string such as `250ms`, `10s`, `1h30m`."""
    number = _number(value, "duration", DURATION_HELP)
    if number is not None:
        return number
    text = str(value)
    if not _DURATION_RE.match(text):
        raise ValueError(f"{text!r} is not a duration: use {DURATION_HELP}")
    if text.strip().isdigit():
        return whole(text.strip())
    total = 0.0
    for num, unit in _DURATION_PART.findall(text):
        total += float(num) * DURATION_UNITS[unit]
    if not math.isfinite(total):
        raise TooLarge(text)
    return round(total)


def parse_size(value: object) -> int:
    """Bytes for `value`: an integer (bytes), or a string such as `64KiB`, `16MiB`, `1GB`."""
    number = _number(value, "size", SIZE_HELP)
    if number is not None:
        return number
    text = str(value)
    m = _SIZE_RE.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not a size: use {SIZE_HELP}")
    size = float(m.group(1)) * SIZE_UNITS[m.group(2) or "B"]
    if not math.isfinite(size):
        raise TooLarge(text)
    return int(size)


def format_duration(ms: int) -> str:
    """The shortest exact unit form of `ms`: 90000 → `90s`, 7200000 → `2h`, 250 → `250ms`."""
    for unit in ("d", "h", "m", "s"):
        factor = DURATION_UNITS[unit]
        if ms and ms % factor == 0:
            return f"{ms // factor}{unit}"
    return f"{ms}ms"


def format_size(size: int) -> str:
    """The shortest exact binary form of `size`: 65536 → `64KiB`, 100 → `100B`."""
    for unit in ("TiB", "GiB", "MiB", "KiB"):
        factor = SIZE_UNITS[unit]
        if size and size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}B"
