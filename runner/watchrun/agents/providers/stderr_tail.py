"""Why an agent CLI exited without a result, in its own words: its meaningful stderr line."""

from __future__ import annotations

import re

from watchrun.agents.clean import clean_text

__all__ = ["StderrTail"]

_ERRORISH = re.compile(
    r"error\b|\bfatal\b|\bfail(?:ed|ure|s)?\b|\bpanic(?:ked)?\b|exception\b|\bdenied\b|"
    r"\binvalid\b|\brefus\w*|\bunauthori[sz]ed\b|\bforbidden\b|\bcannot\b|\bcan't\b|"
    r"\bcould not\b|\bunable\b|\bmissing\b|\bexpired\b|\brequired\b|"
    r"\bnot (?:found|inside|allowed|trusted|logged|running|supported|specified|set|a)\b|"
    r"\bno (?:\S+ ){1,3}(?:found|set|given|provided|configured)\b",
    re.IGNORECASE)
"""A line that says what went wrong (`Error: …`, `No API key found …`, `Not inside a trusted
directory …`, a Python exception's last line)."""
_ASIDE = re.compile(r"(?:warn(?:ing)?|note|hint|info|debug|trace|tip)\b", re.IGNORECASE)
"""A line that only comments (`WARNING: proceeding, even though …`), however it is worded."""
_DETAIL = ("•", "·", "- ", "* ", ">", "at ")
"""How the lines under a message begin (a list of ways to fix it, a stack frame)."""


class StderrTail:
    """Fed every stderr line of a turn; `reason` is the one that says why it failed: the last
    line that reads as an error, else the last line of its own (not indented, not a list item,
    not a warning or a note), else the last line with a letter in it. Lines are cleaned as the
    recorder cleans text (escape sequences and controls gone) before they are judged.

    The CLIs tell the reason first and how to fix it after: copilot 1.0.102 ends with a list
    (`• Run 'gh auth login' …`) under `Error: No authentication information found.`, pi 0.73
    with two indented paths under `No API key found for the selected model.`, and codex 0.171
    puts a `WARNING:` before `Not inside a trusted directory and --skip-git-repo-check was not
    specified.`"""

    def __init__(self) -> None:
        self._error: str | None = None
        self._own: str | None = None
        self._any: str | None = None

    def feed(self, line: str) -> None:
        text = clean_text(line, None)[0]
        said = text.strip()
        if not any(c.isalpha() for c in said):  # blank, `}`, `^^^^`
            return
        self._any = said
        if text[:1].isspace() or said.startswith(_DETAIL) or _ASIDE.match(said):
            return
        self._own = said
        if _ERRORISH.search(said):
            self._error = said

    @property
    def reason(self) -> str | None:
        """The line that says why, or None when stderr said nothing."""
        return self._error or self._own or self._any
