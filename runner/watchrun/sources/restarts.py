"""When a command watcher restarts (pure): its restart policy, the backoff between starts,
and the start limit that gives up on a command that keeps failing."""

from __future__ import annotations

import random

from watchrun.config.model import RestartPolicy
from watchrun.process.spawn import ExitInfo

BACKOFF_CAP_MS = 60_000  # restart delays double from restartDelay up to this
JITTER = 0.10  # each delay is scaled by a random factor in [0.9, 1.1]
HEALTHY_S = 60.0  # a run at least this long resets the backoff (not the start window)
START_LIMIT = 5  # starts allowed within START_WINDOW_S; one more would be FATAL
START_WINDOW_S = 600.0
"""Longer than HEALTHY_S on purpose: a command that crashes just after its backoff was reset
(a run of 61 s, again and again) still fills the window and goes FATAL."""


def backoff_ms(base_ms: int, attempt: int, rng: random.Random) -> int:
    """The delay before restart `attempt` (1-based, counted since the last reset)."""
    raw: int = min(base_ms * 2 ** min(attempt - 1, 32), BACKOFF_CAP_MS)
    return round(raw * rng.uniform(1 - JITTER, 1 + JITTER))


def should_restart(policy: RestartPolicy, info: ExitInfo | None) -> bool:
    """`info` is None when the command could not be started at all (a failure)."""
    failed = info is None or info.status != "exited" or info.exit_code != 0
    return policy is RestartPolicy.ALWAYS or (policy is RestartPolicy.ON_FAILURE and failed)
