"""Provider adapters: each turns one agent CLI's stdout lines into observations."""

from __future__ import annotations

from collections.abc import Sequence

from watchrun.agents.providers.base import KINDS, Adapter, Observation, observation
from watchrun.agents.providers.claude import ClaudeAdapter
from watchrun.agents.providers.codex import CodexAdapter
from watchrun.agents.providers.copilot import CopilotAdapter
from watchrun.agents.providers.cursor import CursorAdapter
from watchrun.agents.providers.gemini import GeminiAdapter
from watchrun.agents.providers.generic import GenericAdapter
from watchrun.agents.providers.mock import MockAdapter
from watchrun.agents.providers.opencode import OpenCodeAdapter
from watchrun.agents.providers.pi import PiAdapter
from watchrun.agents.providers.usage import Usage, UsageTracker

__all__ = [
    "KINDS",
    "PROVIDERS",
    "Adapter",
    "Observation",
    "Usage",
    "UsageTracker",
    "make_adapter",
    "observation",
]

PROVIDERS: dict[str, type[Adapter]] = {
    "claude": ClaudeAdapter,
    "codex": CodexAdapter,
    "gemini": GeminiAdapter,
    "opencode": OpenCodeAdapter,
    "pi": PiAdapter,
    "cursor": CursorAdapter,
    "copilot": CopilotAdapter,
    "mock": MockAdapter,
    "generic": GenericAdapter,
}
"""Provider name -> adapter class; the names SPEC §3.3 allows for `agents[].provider`."""


def make_adapter(provider: str, tracker: UsageTracker | None = None,
                 argv: Sequence[str] = ()) -> Adapter:
    """A fresh adapter for one turn of `provider` running `argv` (the command template),
    sharing `tracker` across turns."""
    cls = PROVIDERS.get(provider)
    if cls is None:
        known = ", ".join(sorted(PROVIDERS))
        raise ValueError(f"unknown agent provider {provider!r}; expected one of: {known}")
    return cls(tracker, argv)
