"""How the watchers of a runner are doing, counted and said (`list`'s summary, the log)."""

from __future__ import annotations

from watchrun.config.model import Config
from watchrun.runtime.wiring import WatcherRuntime
from watchrun.views.humanize import DISABLED, DISABLED_ONCE

__all__ = ["DOING", "counted", "disabled", "doing", "ended", "held_up"]

DOING = {"running": "running", "error": "error", "exited": "exited", "fatal": "fatal",
         "stopped": "stopped", "queued": "to read after the commands"}
"""What `WatcherSet.census` counts, in the order the summaries list it, and how they say it."""


def ended(rt: WatcherRuntime) -> str | None:
    """How a launched watcher's task ended (`exited`, `fatal`); None while it runs."""
    if rt.task is None or not rt.task.done():
        return None
    state = str(getattr(rt.source, "state", "running"))
    return "fatal" if rt.failure is not None or state == "fatal" else "exited"


def doing(rt: WatcherRuntime) -> str:
    """A launched watcher's `census` entry: its task ended (`exited`, `fatal`), its source
    failing (`error`: a file it cannot read; `fatal`: a command writing its start-limit
    `stop`), else `running` (a command whose task has not begun yet is `stopped` until then)."""
    state = str(getattr(rt.source, "state", "running"))
    return ended(rt) or (state if state in ("error", "fatal") else "running")


def counted(counts: dict[str, int]) -> tuple[str, str]:
    """A `census` said: `N watchers`, and ` (3 running, 2 exited, 1 fatal, 1 stopped)` unless
    every one of them runs (then ``)."""
    n = sum(counts.values())
    if counts.get("running", 0) == n:
        return f"{n} watcher{'' if n == 1 else 's'}", ""
    each = ", ".join(f"{k} {DOING[what]}" for what, k in counts.items())
    return f"{n} watcher{'' if n == 1 else 's'}", f" ({each})"


def disabled(config: Config, once: bool = False) -> str | None:
    """Why the runner runs none of its watchers (`limits.enabled: false`), as its log, `status`
    (a problem while it lasts) and a refused `start` say it (`once`: a once run's start line
    and verdicts); None when it runs them."""
    return None if config.limits.enabled else DISABLED_ONCE if once else DISABLED


def held_up(wids: list[str]) -> str:
    """What the ready line adds for the watchers the start did not wait for, held by a file
    system that does not answer (`WatcherSet.held_up`); `` when there are none."""
    if not wids:
        return ""
    whose = "its" if len(wids) == 1 else "their"
    return f"; not ready yet: {', '.join(wids)} ({whose} reads have not returned: `watchrun " \
        "status` says where)"
