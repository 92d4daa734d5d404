"""The compile probe's child process (`compile_probe.py` starts it for an added watcher): the
same compiles as the runner's check and matcher (`config/adding.py`, `wiring.precompile`), with
the same engines, each RE2 compile under a CPU budget (ITIMER_PROF: SIGPROF ends the process
inside RE2's C++), all of them under another (ITIMER_VIRTUAL, SIGVTALRM).

It reads one JSON request on stdin and writes JSON lines: {"ready"} once imported, {"field"} as
each step begins, {"done"} at the end. It imports only what the compiles need (the matcher and
its engines): no asyncio, no spawner (tests/test_add_probe_limits.py)."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import sys
from typing import Any

from watchrun.match import optional
from watchrun.match.matcher import Matcher, needs_backtracking
from watchrun.match.syntax import prepare

__all__ = ["main"]


def _emit(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def _timed_re2(budget: float) -> None:
    """Every RE2 compile (the checks', the engines') under `budget` CPU seconds: ITIMER_PROF
    ends this process with SIGPROF when one runs past it, even inside RE2's C++."""
    module = optional.re2()
    if module is None:
        return
    compile_ = module.compile

    def timed(*args: Any, **kwargs: Any) -> Any:
        signal.setitimer(signal.ITIMER_PROF, budget)
        try:
            return compile_(*args, **kwargs)
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)

    module.compile = timed


def main() -> None:
    """The child: what `add` compiles in the runner — each regex as the config's checks do
    (`re`, then `needs_backtracking`, which compiles RE2), then the watcher's matchers — timed."""
    for sig in (signal.SIGPROF, signal.SIGVTALRM):
        signal.signal(sig, signal.SIG_DFL)  # (the default: end the process)
    request = json.loads(sys.stdin.buffer.read())
    case = bool(request["caseSensitive"])
    fields: list[tuple[str, str]] = [(str(f), str(rx)) for f, rx in request["regexes"]]
    _timed_re2(float(request["re2Budget"]))
    _emit({"ready": True})
    signal.setitimer(signal.ITIMER_VIRTUAL, float(request["totalBudget"]))
    valid = True
    for field, rx in fields:
        _emit({"field": field})
        try:
            re.compile(prepare(rx), 0 if case else re.IGNORECASE)
            needs_backtracking(rx, case)
        except (re.error, RecursionError, OverflowError, ValueError):
            valid = False  # refused by the runner's check, which compiles no matcher then
    found = dict(fields)
    if valid and "pattern" in found:
        _emit({"field": "pattern"})
        with contextlib.suppress(ValueError):
            Matcher(found["pattern"], [rx for f, rx in fields if f.startswith("exclude[")],
                    case)
        if "gate.require" in found:
            _emit({"field": "gate.require"})
            with contextlib.suppress(ValueError):
                Matcher(found["gate.require"], (), case)
    signal.setitimer(signal.ITIMER_VIRTUAL, 0)
    _emit({"done": True})
