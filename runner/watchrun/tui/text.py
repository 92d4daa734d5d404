"""Pure text helpers of the live screen: inert display text and relative times."""

from __future__ import annotations

import re
from datetime import datetime

from watchrun.match.sanitize import sanitize

__all__ = ["ago", "epoch", "inert", "inert_block"]

_INVISIBLE = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff\u2028\u2029]")
"""Zero-width, bidi embedding/override/isolate marks and Unicode line separators: ordinary
text to the sanitizer, but they can reorder or hide what a cell shows, so they are shown."""


def _visible(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def inert(value: object, limit: int = 200) -> str:
    """One line of display text: sanitized (SPEC §6), invisible marks shown as `\\uXXXX`,
    tabs and newlines as spaces, clipped to `limit` characters with an ellipsis.

    The result is still plain text: the screen wraps it in a `Text` object, never in markup,
    so `[bold]` or `[@click=...]` in it is shown as typed."""
    text = sanitize(value if isinstance(value, str) else str(value))[0]
    text = _INVISIBLE.sub(_visible, text).replace("\t", " ").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def inert_block(value: str, width: int = 4000) -> str:
    """Several lines of display text: each line made `inert`, newlines kept."""
    return "\n".join(inert(line, width) for line in sanitize(value)[0].split("\n"))


def epoch(ts: object) -> float | None:
    """A record's `ts` ("2026-05-16T12:00:00.000Z") as epoch seconds; None if it is not one."""
    if not isinstance(ts, str) or not ts:
        return None
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def ago(ts: object, now: float) -> str:
    """`ts` relative to `now`: "just now", "42s ago", "5m ago", "3h ago", "2d ago"; "-" when
    there is no time. A time in the future (clocks apart) reads "just now"."""
    then = epoch(ts)
    if then is None:
        return "-"
    secs = int(now - then)
    if secs < 1:
        return "just now"
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if secs >= size:
            return f"{secs // size}{unit} ago"
    return f"{secs}s ago"
