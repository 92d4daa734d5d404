"""How one firing of an action ended (the facts of its `action-result` record)."""

from __future__ import annotations

from typing import Any

from msgspec import Struct

__all__ = ["Result"]


class Result(Struct, frozen=True):
    status: str
    """`ok`, `failed`, `timeout` (the last attempt or the run ran out of time) or `cancelled`
    (the runner stopped, or the action was removed by a reload)."""
    attempts: int = 1
    http_status: int | None = None
    exit_code: int | None = None
    signal: str | None = None
    error: dict[str, str] | None = None
    """`{code, message}` when not ok."""
    output: str | None = None
    """exec: the end of what the program printed (cleaned and redacted)."""
    left_running: int | None = None
    """exec: processes of its tree still running when it exited (a background job, a daemon),
    which were then stopped; None when there were none."""

    def fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "attempts": self.attempts}
        for key, value in (("httpStatus", self.http_status), ("exitCode", self.exit_code),
                           ("signal", self.signal), ("error", self.error),
                           ("output", self.output), ("leftRunning", self.left_running)):
            if value is not None:
                out[key] = value
        return out
