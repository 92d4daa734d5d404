"""Which runner answers on the control socket: its pid and pid namespace (so that a client in
another one finds it as it sees it), its run id and start, its config files, and whether it is
a `watchrun mcp` session's own, whose watchers all end with that session. The `status` reply
says all of it, and `not_found` refusals carry it, so a client whose config is not the
runner's can say so."""

from __future__ import annotations

import contextvars
import os
import re
from typing import Any, Protocol

from watchrun.clock import iso_ts
from watchrun.config.model import Config

__all__ = ["SESSION", "Known", "fields", "pid_namespace", "session_note"]

SESSION: contextvars.ContextVar[bool] = contextvars.ContextVar("SESSION", default=False)
"""True within a `watchrun mcp` session (`mcp/server.py` sets it): a supervisor that runs
there is the session's own runner, and every task it starts inherits this."""


class _Board(Protocol):
    runner_id: str
    started_at: float


class Known(Protocol):
    """What the runner's identity is read from."""

    config: Config

    @property
    def board(self) -> _Board: ...


def pid_namespace() -> int | None:
    """This process's pid namespace: the inode of `/proc/self/ns/pid`, the same number from
    whichever namespace it is looked at; None where /proc does not say (another namespace's
    /proc, in which this process has no entry)."""
    try:
        link = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    found = re.fullmatch(r"pid:\[(\d+)\]", link)
    return int(found[1]) if found else None


def fields(sup: Known) -> dict[str, Any]:
    """The runner's identity as `status` says it: `pid` as the runner sees itself, with its
    `pidNamespace`; `runnerId` and `startedAt`, as its snapshots name them; `configs`, its
    config files (absolute, in layering order; none for a session without one); `session`,
    whether it is a `watchrun mcp` session's own."""
    return {"pid": os.getpid(), "pidNamespace": pid_namespace(),
            "runnerId": sup.board.runner_id, "startedAt": iso_ts(sup.board.started_at),
            "configs": [str(p) for p in sup.config.sources], "session": SESSION.get()}


def session_note(wid: str) -> str:
    """What an `add` to a session's runner adds to its message: the watcher ends with the
    session, whoever added it."""
    return (f"; this runner is a `watchrun mcp` session's own (pid {os.getpid()}): {wid} ends "
            "with that session, as every watcher it runs")
