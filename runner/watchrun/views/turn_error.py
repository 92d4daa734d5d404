"""Why a turn failed, was killed or was interrupted: its error message and the hint for it."""

from __future__ import annotations

from typing import Any

_HINTS = {
    "deadline": "the turn ran past the agent's `deadline`; raise it or ask for less",
    "idle-timeout": "the agent printed nothing for `idleTimeout`; raise it if it works silently",
    "aborted": "stopped by `watchrun agent stop` or by the runner shutting down",
    "oversized-event": "a protocol line was larger than limits.maxEventBytes",
    "reader-failed": "the runner failed reading the agent's output (a bug: report the turn's "
                     "`error` record)",
    "ENOENT": "the agent's command was not found: install it or fix `command`",
    "auth": "the provider rejected its credentials: log in or set its API key",
    "quota": "a rate or usage limit was hit: wait for it to reset",
}
_ABORTS = {
    "reload-changed": "a reload (SIGHUP, `systemctl reload`) changed the agent's config: the "
                      "turn was stopped and the agent restarted with it",
    "reload-removed": "a reload (SIGHUP, `systemctl reload`) removed the agent from the config",
    "runner-stopping": "the runner was stopped (SIGTERM, Ctrl-C, `systemctl stop`)",
    "request": "stopped by `watchrun agent stop`",
    "interrupted": "`agent run` was interrupted (Ctrl-C, SIGTERM)",
}
"""An `aborted` turn's hint, by its `stopped` record's `by` (who stopped it; the record
schema's enum)."""
INTERRUPTED = "the turn is open, but its runner is gone: nothing runs it"
INTERRUPTED_HINT = ("its runner was killed (SIGKILL, a crash); the agent's next run, or the next "
                    "runner, records the turn `cancelled`")


def turn_error(status: str, finished: dict[str, Any] | None,
               problems: list[tuple[str, str | None, str | None]], stopped: str | None,
               stopped_by: str | None) -> tuple[str | None, str | None]:
    """(message, hint) of a failed, killed or interrupted turn: `finished` its
    dispatch-finished record, `problems` its error records (message, code, hint), `stopped`
    and `stopped_by` its `stopped` record's reason and `by`."""
    if status == "interrupted":
        return INTERRUPTED, INTERRUPTED_HINT
    if status not in ("failed", "killed"):
        return None, None
    fin = finished or {}
    err: dict[str, Any] = fin["error"] if isinstance(fin.get("error"), dict) else {}
    message, code = err.get("message"), err.get("code")
    advice = next((h for m, _, h in reversed(problems) if h and m == message), None)
    if not message and problems:
        message, code, advice = problems[-1]
    if not message and stopped:
        message = f"stopped: {stopped}"
    if not message:
        sig, exit_code = fin.get("signal"), fin.get("exitCode")
        message = f"killed by {sig}" if sig else f"exited with status {exit_code}"
    who = _ABORTS.get(stopped_by or "") if stopped == "aborted" else None
    hint = advice or who or _HINTS.get(stopped or "") or _HINTS.get(str(code))
    if hint is None and any(c == "quota" for _, c, _ in problems):
        hint = _HINTS["quota"]
    return str(message), hint
