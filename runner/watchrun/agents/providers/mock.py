"""The `mock` provider: the built-in mock agent speaks Claude Code stream-json."""

from __future__ import annotations

from typing import ClassVar

from watchrun.agents.providers.claude import ClaudeAdapter

__all__ = ["MockAdapter"]


class MockAdapter(ClaudeAdapter):
    """Claude's parser under the `mock` provider name: `python -m watchrun.agents.mock_agent
    PROMPT` (see that module for the directives that drive it) prints Claude stream-json."""

    provider: ClassVar[str] = "mock"
