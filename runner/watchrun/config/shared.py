"""The settings every watcher shares (`limits`, `output`, `redact`) as a reload compares them:
by their config keys, and the limits a watcher reads only at its start, whose change restarts
the watchers that read them (`runtime/retune.py` sets the others in place)."""

from __future__ import annotations

from watchrun.config.model import Config, Limits

__all__ = ["AT_START", "LIMIT_KEYS", "restart_reason", "shared_changes"]

LIMIT_KEYS = {
    "enabled": "enabled", "wake_on_match": "wakeOnMatch", "max_watchers": "maxWatchers",
    "max_agents": "maxAgents", "max_matches": "maxMatches", "max_log_lines": "maxLogLines",
    "match_lines": "matchLines", "poll_ms": "pollMs", "max_line_bytes": "maxLineBytes",
    "max_event_bytes": "maxEventBytes", "stop_timeout_ms": "stopTimeout",
    "max_generations": "maxGenerations", "rotate_wait_ms": "rotateWait",
    "once_write_ms": "onceWriteTimeout",
}
"""Each field of `Limits` by its config key, for the log."""
AT_START = {
    "max_line_bytes": ("file", "command"),  # (its framer; a file's checkpoint `matching`)
    "max_generations": ("file",),
    "rotate_wait_ms": ("file",),
}
"""The limits a watcher reads only at its start, by the kinds of watcher that read them: a
change restarts those watchers (a file watcher reads on from its checkpoint). The others are
set in place or are no watcher's (`enabled` and `maxWatchers`: which watchers run)."""


def shared_changes(old: Config, new: Config) -> list[str]:
    """The shared settings `new` changes, by their config keys (`redact`: the rules, also a
    `${VAR}` secret's)."""
    changed = [f"limits.{LIMIT_KEYS.get(f, f)}" for f in Limits.__struct_fields__
               if getattr(old.limits, f) != getattr(new.limits, f)]
    changed += [f"output.{key}" for key, f in (("maxBytes", "max_bytes"), ("keep", "keep"),
                                               ("redact", "redact"))
                if getattr(old.output, f) != getattr(new.output, f)]
    return changed + ["redact"] * (old.redact != new.redact)


def restart_reason(kind: str, old: Config, new: Config) -> str | None:
    """Why a running watcher of this kind whose own spec did not change restarts, or None."""
    keys = [f"limits.{LIMIT_KEYS[f]}" for f, kinds in AT_START.items()
            if kind in kinds and getattr(old.limits, f) != getattr(new.limits, f)]
    return f"{', '.join(keys)} changed" if keys else None
