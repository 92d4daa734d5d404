"""The adapter contract: one provider stdout line in, provider-neutral observations out (the
observation, the kinds it may have, what every adapter does)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol

from msgspec import Struct

from watchrun.agents.providers.usage import UsageTracker

__all__ = ["KINDS", "PREVIEW_CHARS", "RESULT_CHARS", "Adapter", "Observation", "observation"]

KINDS = frozenset({
    "text", "text-delta", "reasoning", "tool", "tool-result", "tool-denied", "file-change",
    "usage", "output", "raw", "failure", "quota", "warning", "model-retry", "model-error",
    "compaction", "status", "session", "completed",
})
"""Every kind an adapter emits (the provider-facing subset of SPEC §4's agent kinds, in seed
003's vocabulary where it names the same thing; docs/records.md has the mapping)."""

PREVIEW_CHARS = 2000
"""`raw.value` keeps this many characters of the line."""
RESULT_CHARS = 2000
"""`tool-result.preview` keeps this many characters (seed 003); `characters` is the length."""


class Observation(Struct, frozen=True):
    """One provider-neutral event: a record `kind` and its JSON-serialisable camelCase fields."""

    kind: str
    fields: Mapping[str, Any]


def observation(kind: str, **fields: Any) -> Observation:
    """An observation with the None-valued fields left out."""
    if kind not in KINDS:
        raise ValueError(f"unknown observation kind {kind!r}")
    return Observation(kind, {k: v for k, v in fields.items() if v is not None})


class Adapter(Protocol):
    """Turns one turn's output into observations. One instance per turn (process run); the
    constructor takes an optional `UsageTracker` shared across an agent's turns and the argv
    template the turn runs (some totals mean something else for a resumed session).

    Adapters see text exactly as the agent printed it (decoded, not cleaned): they parse first,
    and the recorder cleans every string of every observation afterwards."""

    provider: ClassVar[str]

    def __init__(self, tracker: UsageTracker | None = None, argv: Sequence[str] = ()
                 ) -> None: ...

    def parse(self, line: str) -> list[Observation]:
        """One stdout line, framed and decoded, without its newline. Never raises."""
        ...

    def stderr(self, line: str) -> list[Observation]:
        """One stderr line (also recorded as `stderr`): what it tells beyond its text."""
        ...

    def finish(self, exit_code: int | None) -> list[Observation]:
        """The process ended (`exit_code` None: killed or never started): whatever was
        pending (joined text, a final status the exit status decides; a non-zero exit with
        no verdict, the failure its stderr told)."""
        ...
