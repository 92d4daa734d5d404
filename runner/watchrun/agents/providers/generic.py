"""Any command's stdout as assistant text, one `text` observation per line."""

from __future__ import annotations

from typing import ClassVar

from watchrun.agents.providers.base import Observation, observation
from watchrun.agents.providers.usage import UsageTracker

__all__ = ["GenericAdapter"]


class GenericAdapter:
    """Every line is `text` (blank lines included, so paragraphs survive); sanitizing is the
    caller's job. There is no protocol, so no usage (unknown, never a made-up zero) and no
    `completed`: the turn's outcome is its exit status."""

    provider: ClassVar[str] = "generic"

    def __init__(self, tracker: UsageTracker | None = None) -> None:
        self.tracker = tracker

    def parse(self, line: str) -> list[Observation]:
        return [observation("text", text=line.rstrip("\r\n"))]

    def finish(self) -> list[Observation]:
        return []
