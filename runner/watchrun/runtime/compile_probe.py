"""An added watcher's regexes compiled first in a child process under CPU budgets and a deadline."""

# Why: google-re2 holds Python's interpreter lock while it compiles, so a worker thread does not
# keep a slow compile off the event loop (16 KiB of `k0\w{2,30}|k1\w{2,30}|…`: ~4-6 s of RE2
# compile, every watcher and `status` frozen). The child does the same compiles as the runner's
# check and matcher (`config/adding.py`, `wiring.precompile`), with the same engines
# (`WATCHRUN_ENGINES` is inherited), and times them itself, after its interpreter has started:
# each RE2 compile gets RE2_BUDGET_S of CPU (ITIMER_PROF: the kernel ends the child with SIGPROF
# right there), all of them together TOTAL_BUDGET_S (ITIMER_VIRTUAL, SIGVTALRM), the child's
# whole life WALL_S (then the runner kills it). Only a watcher whose compile stayed within them
# is then compiled in the runner, so the loop waits at most about RE2_BUDGET_S for one regex.
#
# The child (`compile_child.py`) reads one JSON request on stdin and writes JSON lines:
# {"ready"} once imported, {"field"} as each step begins, {"done"} at the end. It starts
# without site (`command()`), with this runner's module search path, and imports what the
# compiles need: ~140 ms of CPU a check before, ~75 ms after (docs/decisions.md).

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from typing import Any

from watchrun.process.helper_exit import ended
from watchrun.process.helper_start import helper_command
from watchrun.process.spawn import Spawner, SpawnError, end_now

__all__ = ["RE2_BUDGET_S", "TOTAL_BUDGET_S", "WALL_S", "Refusal", "command", "probe",
           "regexes"]

RE2_BUDGET_S = 0.5
"""CPU seconds one RE2 compile of an added watcher may take: what the loop may wait for it.
A 16 KiB literal alternation compiles in RE2 in ~0.005 s (its whole check ~0.15 s); the
slowest legitimate 16 KiB pattern measured (`a?a?…`, 106 KB once spelled out) 0.16 s, so a
busy host that stretches CPU time a little does not refuse it; 16 KiB of `\\w{2,30}`
alternatives take ~4 s."""
TOTAL_BUDGET_S = 3.0
"""CPU seconds of all the watcher's compiles together: Python's parse and analysis, stdlib `re`,
hyperscan's compile (which releases the lock), RE2's. A watcher at every bound (16 KiB of
pattern, 16 KiB of excludes) costs up to ~0.9 s."""
WALL_S = 15.0
"""The child's whole life (interpreter start, imports, compiles), a backstop for a child that
gets no CPU or hangs: the CPU budgets end a slow compile first. Below the 30 s a client waits."""

_SPAWNER = Spawner()
"""No process-group registry: a probe has no children and dies with the runner (PDEATHSIG), so
it starts no guardian process in a runner of files only."""


class Refusal(Exception):
    """The watcher's regexes were not shown to compile within budget: the `add` error's `code`
    (`bad_request`: over a budget; `busy`: the deadline, retry; `start_failed`: no probe),
    message and details (`field`, `seconds`, `budget`)."""

    def __init__(self, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.code, self.extra = code, extra


def command() -> list[str]:
    """The child's argv: `compile_child.main` in this interpreter, isolated and without site
    (`-S`: no .pth file run, ~20 ms; the editable install's finder alone cost ~19), on this
    runner's module search path (so it finds watchrun, google-re2, hyperscan and msgspec where
    the runner found them: `helper_start.helper_command`). Its environment is the runner's, as
    before (`WATCHRUN_ENGINES`)."""
    return helper_command("watchrun.runtime.compile_child", packages=True)


def regexes(raw: Any) -> list[tuple[str, str]]:
    """(field, regex) of each regex the config's checks compile in an added watcher: `pattern`,
    `exclude[i]`, `gate.require`, those that are strings (the checks refuse the others)."""
    if not isinstance(raw, dict):
        return []
    found = [("pattern", raw.get("pattern"))]
    excludes = raw.get("exclude")
    if isinstance(excludes, list):
        found += [(f"exclude[{i}]", x) for i, x in enumerate(excludes)]
    gate = raw.get("gate")
    if isinstance(gate, dict):
        found.append(("gate.require", gate.get("require")))
    return [(field, rx) for field, rx in found if isinstance(rx, str)]


async def probe(raw: Any) -> None:
    """Compile `raw`'s regexes in a child (none: nothing to do). Refusal when over a budget or
    the deadline, or when no child could tell. The child is killed (its group) and reaped
    before this returns, even when cancelled. Runs on the loop, awaiting the child."""
    fields = regexes(raw)
    if not fields:
        return
    request = json.dumps({"regexes": fields, "caseSensitive": raw.get("caseSensitive") is True,
                          "re2Budget": RE2_BUDGET_S, "totalBudget": TOTAL_BUDGET_S}).encode()
    began = time.monotonic()
    try:
        proc = await _SPAWNER.spawn(command(), cwd=None, env={}, stdin_data=request)
    except SpawnError as exc:
        raise Refusal("start_failed", f"cannot check the watcher's regexes: {exc}; nothing "
                      "was started") from None
    lines: list[dict[str, Any]] = []
    noise: deque[bytes] = deque(maxlen=40)  # (the end of what the child said that is no JSON)
    try:
        try:
            async with asyncio.timeout(WALL_S):
                rest = b""
                while part := await proc.read(65536):
                    *whole, rest = (rest + part).split(b"\n")
                    for line in whole:
                        try:
                            lines.append(dict(json.loads(line)))
                        except (ValueError, TypeError):
                            noise.append(line)
                info = await proc.wait()
        except TimeoutError:
            field = _field(lines)
            raise Refusal("busy", f"checking how long `{field}` takes to compile did not "
                          f"finish in {WALL_S:g} s (the host is overloaded?); nothing was "
                          "started: try again", field=field, seconds=round(
                              time.monotonic() - began, 3), budget=WALL_S) from None
    finally:
        await end_now(proc)
    _verdict(lines, info.signal, info.exit_code, b"\n".join(noise), time.monotonic() - began)


def _field(lines: list[dict[str, Any]]) -> str:
    return next((str(x["field"]) for x in reversed(lines) if "field" in x), "pattern")


def _verdict(lines: list[dict[str, Any]], sig: str | None, code: int | None, said: bytes,
             wall: float) -> None:
    """Return when the child compiled everything within budget, else raise its Refusal."""
    if code == 0 and any(x.get("done") for x in lines):
        return
    field = _field(lines)
    took = f"stopped there, {wall:.2f} s after the check began"
    if sig == "SIGPROF":
        raise Refusal("bad_request", f"`{field}` took over {RE2_BUDGET_S:g} s of CPU time to "
                      f"compile in RE2 ({took}), over the {RE2_BUDGET_S:g} s budget of a "
                      "watcher added at runtime: RE2 holds the runner's interpreter lock while "
                      "it compiles, so nothing else would run meanwhile; nothing was started. "
                      "Simplify it (many bounded repeats such as `\\w{2,30}` compile slowly)",
                      field=field, seconds=RE2_BUDGET_S, budget=RE2_BUDGET_S)
    if sig == "SIGVTALRM":
        raise Refusal("bad_request", f"compiling the watcher's regexes took over "
                      f"{TOTAL_BUDGET_S:g} s of CPU time ({took}, at `{field}`), over the "
                      f"{TOTAL_BUDGET_S:g} s budget of a watcher added at runtime; nothing was "
                      "started. Simplify them", field=field, seconds=TOTAL_BUDGET_S,
                      budget=TOTAL_BUDGET_S)
    how = ended(code, sig, said)
    if not any(x.get("ready") for x in lines):
        raise Refusal("start_failed", f"cannot check the watcher's regexes: the compile check "
                      f"did not start ({how}); nothing was started")
    raise Refusal("bad_request", f"compiling `{field}` made the compile check fail ({how}); "
                  "nothing was started", field=field)
