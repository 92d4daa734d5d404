"""Pure text helpers of the live screen: inert display text and relative times."""

from __future__ import annotations

from datetime import UTC, datetime

from watchrun.clock import parse_ts
from watchrun.match.sanitize import edge_text, sanitize, shorten
from watchrun.views import humanize

__all__ = ["ago", "inert", "inert_block"]


def inert(value: object, limit: int = 200) -> str:
    """One line of display text: as the CLI prints it (`edge_text`: sanitized, the bidi marks,
    line separators and characters that draw nothing shown as `\\uXXXX`), tabs and newlines
    as spaces, clipped to `limit` characters with an ellipsis.

    The result is still plain text: the screen wraps it in a `Text` object, never in markup,
    so `[bold]` or `[@click=...]` in it is shown as typed."""
    text = edge_text(value, multiline=True).replace("\t", " ").replace("\n", " ")
    return shorten(text, limit)


def inert_block(value: str, width: int = 4000) -> str:
    """Several lines of display text: each line made `inert`, newlines kept."""
    return "\n".join(inert(line, width) for line in sanitize(value)[0].split("\n"))


def ago(ts: object, now: float) -> str:
    """`ts` relative to `now` as the CLI's tables show it (`views.humanize`): "just now",
    "42s ago", "5m ago", "2h 5m ago", "2d ago" ("in 5s" when clocks are apart); "-" when there
    is no time."""
    then = parse_ts(ts)
    if then is None:
        return "-"
    return humanize.ago(datetime.fromtimestamp(then, UTC), datetime.fromtimestamp(now, UTC))
