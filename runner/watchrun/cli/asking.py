"""A command line's request to the live runner (waiting `runtime.client.wait_s` for the answer),
and a runner that is live but gave none (never taken for "no runner")."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchrun.cli.emit import Out
from watchrun.runtime.client import wait_s

if TYPE_CHECKING:
    from watchrun.config.model import Config


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
