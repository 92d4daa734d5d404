"""The statuses an `until: status:STATUS` marker waits for: its adapter's, never the runner's."""

from __future__ import annotations

from watchrun.config.schema import did_you_mean

__all__ = ["PROVIDER_STATUSES", "RUNNER_STATUSES", "STATUS_FAMILIES", "until_status_warning"]

RUNNER_STATUSES = ("running", "idle", "stopping", "disabled")
"""The runner's own agent statuses (`status` records with `source: runner`). The completion
marker is checked against what the adapter reports only (agents/tally.py), so these never
count."""

_CLAUDE = frozenset({
    "rate-limit",  # rate_limit_event (not rejected)
    "compacting", "requesting",  # system/status: Claude Code's word, passed through as written
    "idle",  # system/status with no status: a compaction ended
    # (claude_notices.py) beside the conversation: tool_use_summary, prompt_suggestion,
    # auth_status, the heartbeats of a call left without a result, system notices
    "tool-summary", "prompt-suggestion", "authenticating", "authenticated", "tool-progress",
    "plugin-install", "files-persisted", "notification", "elicitation-complete",
})
PROVIDER_STATUSES: dict[str, frozenset[str]] = {
    "claude": _CLAUDE,
    "mock": _CLAUDE,  # (Claude's adapter)
    "codex": frozenset({"config", "input-requested", "plan", "todo"}),
    "pi": frozenset({"compacting"}),
    "gemini": frozenset(),
    "opencode": frozenset(),
    "cursor": frozenset(),
    "copilot": frozenset({"notification"}),  # system.notification
    "generic": frozenset(),
}
"""Provider -> the status words its adapter reports (agents/providers/), besides families."""
STATUS_FAMILIES: dict[str, tuple[str, ...]] = {
    "claude": ("task-", "hook-"),  # system/task_* and system/hook_*, `_` made `-`
    "mock": ("task-", "hook-"),
}
"""Provider -> prefixes of status words its adapter makes from the provider's event names."""
_PASSED_THROUGH = frozenset({"claude", "mock"})
"""Adapters that report some status words as the provider wrote them (an open set)."""
_CLAUDE_IDLE = "a `system/status` with no status: a compaction ended"


def _reports(provider: str) -> list[str]:
    return sorted([*PROVIDER_STATUSES.get(provider, ()),
                   *(f"{f}…" for f in STATUS_FAMILIES.get(provider, ()))])


def _passed_note(provider: str) -> str:
    if provider not in _PASSED_THROUGH:
        return ""
    return ("; Claude Code's `system/status` words are passed through as written, so one not "
            "listed here counts too")


def until_status_warning(provider: str, status: str) -> str | None:
    """What is wrong with `until: status:STATUS` for an agent of `provider`, or None when its
    adapter reports STATUS (or may: a word passed through)."""
    known = PROVIDER_STATUSES.get(provider)
    if known is None:
        return None  # (an unknown provider: the schema said so)
    reports = _reports(provider)
    if status in RUNNER_STATUSES:
        if status in known:
            what = _CLAUDE_IDLE if provider in _PASSED_THROUGH else "its own"
            return (f"`{status}` is also the runner's own agent status, which never counts: "
                    f"this marker waits for {provider}'s `{status}` only ({what})")
        listed = ", ".join(reports) if reports else "none"
        return (f"`{status}` is the runner's own agent status, which never counts: this marker "
                f"waits for a status the {provider} adapter reports ({listed}"
                f"{_passed_note(provider)}), so it never ends a turn")
    families = STATUS_FAMILIES.get(provider, ())
    if status in known or (status.startswith(families) and status not in families):
        return None
    if not reports:
        return (f"the {provider} adapter reports no status, so this marker never ends a turn; "
                "wait for `output:TEXT` or `event:KIND` instead")
    if provider in _PASSED_THROUGH:
        return (f"the {provider} adapter reports no status `{status}` that watchrun knows of; "
                f"it reports: {', '.join(reports)}{_passed_note(provider)}")
    return (f"the {provider} adapter reports no status `{status}`"
            f"{did_you_mean(status, reports, 'it reports')}")
