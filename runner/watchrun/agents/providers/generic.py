"""Any command's stdout as assistant text, one `text` observation per line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from watchrun.agents.providers.base import Observation, observation
from watchrun.agents.providers.usage import UsageTracker

__all__ = ["GenericAdapter"]


class GenericAdapter:
    """Every line is `text` with `source: "stdout"` (blank lines included, so paragraphs
    survive) and, as the terminal printed it, `raw` (the recorder keeps it only when cleaning
    changed the line, for `agent watch --raw`). There is no protocol, so no usage (unknown,
    never a made-up zero) and no `completed`: the turn's outcome is its exit status, and its
    answer is all of its text."""

    provider: ClassVar[str] = "generic"

    def __init__(self, tracker: UsageTracker | None = None, argv: Sequence[str] = ()) -> None:
        self.tracker = tracker

    def parse(self, line: str) -> list[Observation]:
        line = line.removesuffix("\n")
        return [observation("text", text=line.removesuffix("\r"), source="stdout", raw=line)]

    def stderr(self, line: str) -> list[Observation]:
        return []

    def finish(self, exit_code: int | None) -> list[Observation]:
        return []
