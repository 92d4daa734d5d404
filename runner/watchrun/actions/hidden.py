"""An action's own secrets hidden in what comes back from it (a webhook's answer, what an exec
printed) before the config's redaction rules run: each value of SECRET_CHARS or more, and each
of its parts of SECRET_PIECE_CHARS or more, becomes `[REDACTED:<kind>-secret]`. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote

from watchrun.match.redact import Redactor, marker

__all__ = ["SECRET_CHARS", "SECRET_PIECE_CHARS", "Hidden", "words"]

SECRET_CHARS = 4
"""A secret value this long or longer is hidden (shorter, it would hide pieces of ordinary
words)."""
SECRET_PIECE_CHARS = 8
"""And its parts this long or longer (a path segment, a query value, a word of a header or of
an environment value): what comes back may hold only the part that was refused or printed."""


class Hidden:
    """The config's redactor, after `values` and `pieces` are hidden (URL-decoded forms too)."""

    def __init__(self, kind: str, values: Iterable[str], pieces: Iterable[str],
                 rules: Redactor) -> None:
        self._rules, self._marker = rules, marker(f"{kind}-secret")
        found = {x for x in values if len(x) >= SECRET_CHARS} | {
            x for x in pieces if len(x) >= SECRET_PIECE_CHARS}
        found |= {unquote(x) for x in found}
        self._secrets = re.compile("|".join(
            re.escape(x) for x in sorted(found, key=len, reverse=True))) if found else None

    def redact(self, text: str) -> tuple[str, dict[str, int]]:
        if self._secrets is not None:
            text = self._secrets.sub(self._marker, text)
        return self._rules.redact(text)


def words(values: Iterable[str]) -> list[str]:
    """The whitespace-separated parts of `values` (a header's `Bearer TOKEN`)."""
    return [w for v in values for w in v.split()]
