"""A command line's request to the live runner: how long it waits for the answer, and a runner
that is live but gave none (never taken for "no runner")."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchrun.cli.emit import Out

if TYPE_CHECKING:
    from watchrun.config.model import Config

ANSWER_S = 30.0
"""How long a request waits for the runner's answer (`status`, `agent send/stop`); a change at
least as long."""
CHANGE_MARGIN_S = 15.0
"""How much longer a change waits than the stops it may wait for (`wait_s`)."""
CHANGES = frozenset({"add", "start", "restart", "stop", "clear"})
"""The requests that take the runner's one lock for changes in turn (docs/control.md)."""


def wait_s(cmd: object, config: Config | None) -> float:
    """How long a `cmd` request waits for its answer. A change may stop a command, which has
    `limits.stopTimeout` to end after SIGTERM (a `clear` stops its watchers together), and
    waits its turn behind a change ahead of it that may do the same: it waits twice that long
    plus CHANGE_MARGIN_S (ANSWER_S at least). The config's stopTimeout; without a config
    (`--output-dir`), the most it may be (60 s)."""
    if cmd not in CHANGES:
        return ANSWER_S
    if config is None:
        from watchrun.config.clamp import LIMIT_RULES

        most = LIMIT_RULES["stopTimeout"][1]
        assert most is not None  # (a duration's range)
        stop_ms = most.hi
    else:
        stop_ms = config.limits.stop_timeout_ms
    return max(ANSWER_S, 2 * stop_ms / 1000 + CHANGE_MARGIN_S)


class Unanswered(Exception):
    """A runner is live but did not answer: reached, and no reply came (a reset, a close, a
    timeout, a garbled reply: the request may still be carried out), or it holds the output
    dir's `control.lock` and `control.sock` does not reach it (nothing was sent). Either is an
    error (exit 3, `no_answer`), never taken for "no runner"."""

    def fail(self, out: Out, **details: Any) -> int:
        return out.fail("no_answer", str(self), **details)


def ask(root: Path, payload: dict[str, Any], config: Config | None = None
        ) -> dict[str, Any] | None:
    """The live runner's reply, or None when no runner is live on the output dir (nothing
    listens on its socket, nothing holds its `control.lock`); Unanswered when one is live and
    gave no reply within `wait_s` (`config`: the runner's, for a change). The one place a
    command line decides "no runner"."""
    from watchrun.runtime.client import READS, NotListening, Unreachable, request

    try:
        return request(root / "control.sock", payload, wait_s(payload.get("cmd"), config))
    except NotListening:
        return None
    except Unreachable as exc:
        raise Unanswered(str(exc)) from exc
    except (OSError, ValueError) as exc:
        later = "" if payload.get("cmd") in READS else (
            "; it may still be carried out (`watchrun list` shows what the runner holds once "
            "it answers)")
        raise Unanswered(f"the runner did not answer: {exc}{later}") from exc
