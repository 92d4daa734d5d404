"""`add`'s compile check (`runtime/compile_probe.py`) at the limits other than one slow regex
(that is test_add_compile_budget.py), as docs/control.md (`add`) and the README ("Watchers added
at runtime") promise them: all of a watcher's compiles together get 3 s of CPU time, so many
regexes each well within RE2's 0.5 s are refused together (`bad_request`, with `field`,
`seconds` and `budget`); a check that has not finished by its deadline (15 s) is killed and the
add refused `busy` (retry); one that could not start is refused `start_failed`. Nothing is
left either way: no watcher listed, no check process, and the runner goes on.

The runner runs in the test's process (`insupervisor.Running`) and is asked over its control
socket, as `watchrun add` asks it; its check processes are the test's children. The faults are
real ones: regexes slow to compile; a check process stopped before it runs (SIGSTOP, as a host
that gives it no CPU), under a deadline shortened to keep the test fast (the module's `WALL_S`:
there is no parameter); an interpreter that does not exist; an environment in which it cannot
start. The module's `_SPAWNER` is the seam for the three that change how it is started. Budgets
are CPU time, so only CPU times are compared (the box may be loaded)."""

from __future__ import annotations

import asyncio
import math
import os
import random
import resource
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from insupervisor import DEADLINE_S, Running, until
from liverunner import spawned_by

from watchrun.match.matcher import needs_backtracking
from watchrun.process.spawn import Proc, Spawner
from watchrun.runtime import compile_probe
from watchrun.runtime.client import request

RE2_BUDGET_S = 0.5
"""docs/control.md: the CPU seconds one RE2 compile of an added watcher may take."""
TOTAL_BUDGET_S = 3.0
"""docs/control.md: the CPU seconds all of an added watcher's compiles may take together."""
WALL_S = 15.0
"""docs/control.md: how long a compile check may run before it is killed and the add refused."""
SHORT_WALL_S = 0.5
"""The deadline while a check process is stopped: what it is does not matter, only that it ends."""
LOADED_WALL_S = 90.0
"""The deadline while the total budget is tested: 3 s of CPU may take longer than 15 s on a loaded
box (here ~13 s at a load of 11 on 2 cores), and then the deadline, not the budget, would end it."""
EXCLUDE_BOUND = 16 * 1024
"""docs/control.md: bytes of an added watcher's `exclude` regexes, all of them together."""
PROBE = b"watchrun.runtime.compile_child"
ALTERNATIVES = 8
"""Alternatives in each slow exclude: ~110 bytes, ~0.1 s of CPU in RE2 (measured by the test;
far under the 0.5 s budget, which a loaded box inflating CPU time must not reach)."""


def alternatives(word: str, count: int) -> str:
    """`word0\\w{1,999}|word1\\w{1,999}|…`, `count` of them: RE2's compile of a few of these
    bounded repeats takes long for their size (its cost grows with both the count and the
    repeat; a single `\\w{1,999}` is quick)."""
    return "|".join(f"{word}{i}\\w{{1,999}}" for i in range(count))


def salted() -> str:
    """Three letters, so that a regex made with them is in no cache of this process."""
    return "".join(random.sample("ghjmnpqrtuvxyz", 3))


def re2_cost(rounds: int = 3) -> float:
    """The CPU time (this thread's) of the compile the check makes of one such exclude: the
    config's analysis, then RE2's compile, as the check process makes it. The least of
    `rounds` (each a new exclude): a loaded box inflates CPU time too (0.356 s once, beside
    two busy loops and a suite, for a compile that takes ~0.2 s)."""
    took = []
    for _ in range(rounds):
        began = time.thread_time()
        assert needs_backtracking(alternatives(salted(), ALTERNATIVES)) is None  # (RE2 runs it)
        took.append(time.thread_time() - began)
    return min(took)


def probes() -> list[int]:
    """Live compile-check processes of the runner in this process."""
    return spawned_by(os.getpid(), PROBE)


def children_cpu() -> float:
    """CPU seconds of this process's reaped children: what its check processes used."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def state(pid: int) -> str:
    """The process's state letter (`T`: stopped), "" once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat[stat.rindex(")") + 2]


async def ask(r: Running, payload: dict[str, Any], timeout: float = DEADLINE_S
              ) -> dict[str, Any]:
    """One request on the runner's control socket, as `watchrun add` sends it (from a thread:
    the runner's loop is this one)."""
    return await asyncio.to_thread(request, r.layout.control_socket, payload, timeout)


async def watchers(r: Running) -> list[str]:
    """The watchers `status` lists."""
    status = await ask(r, {"cmd": "status"})
    assert status["ok"] is True, status
    return sorted(status["watchers"])


class Rewritten(Spawner):
    """A spawner that starts each command as `rewrite` makes it over, and keeps the pids."""

    def __init__(self, rewrite: Callable[[list[str]], list[str]]) -> None:
        super().__init__()
        self.rewrite = rewrite
        self.pids: list[int] = []
        self.started: list[tuple[list[str], bytes | None]] = []
        """(argv, stdin) of each command as it was given."""

    async def spawn(self, command: str | Sequence[str], **kw: Any) -> Proc:
        assert not isinstance(command, str), command
        self.started.append((list(command), kw.get("stdin_data")))
        proc = await super().spawn(self.rewrite(list(command)), **kw)
        self.pids.append(proc.pid)
        return proc


def stopped_first(argv: list[str]) -> list[str]:
    """`argv`, run by a shell that stops itself first (SIGSTOP): it never runs unless continued."""
    return ["/bin/sh", "-c", 'kill -STOP $$ && exec "$@"', "sh", *argv]


def _app(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "app.log").write_text("")
    (tmp_path / "new.log").write_text("")
    return {"id": "app", "path": "app.log", "pattern": "ERROR"}


def _new(tmp_path: Path, **more: Any) -> dict[str, Any]:
    return {"cmd": "add", "watcher": {"id": "new", "path": str(tmp_path / "new.log"),
                                      "pattern": "WARN", **more}}


def check_one_line(error: dict[str, Any]) -> None:
    """A refusal says nothing was started, in one line (no traceback)."""
    assert "nothing was started" in error["message"], error
    assert "Traceback" not in error["message"] and "\n" not in error["message"], error


def test_regexes_each_within_re2s_budget_are_refused_together_over_the_total_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each RE2 compile may take 0.5 s of CPU, all the compiles together 3 s: many excludes that
    each take RE2 well under 0.5 s, and together well over 3 s, are refused `bad_request` naming
    the field the check had reached (not the first: the budget is their sum), `seconds` and
    `budget` (3); the check process used about 3 s of CPU, not what all of them cost; nothing
    was started and no check process is left. (The deadline is moved out of the way: on a
    loaded box it could end the check first, and it is not what this test is about.)"""
    monkeypatch.setattr(compile_probe, "WALL_S", LOADED_WALL_S)
    cost = re2_cost()
    assert cost < RE2_BUDGET_S * 0.7, (
        f"one exclude costs {cost:.3f}s of CPU to check: too near RE2's {RE2_BUDGET_S}s budget "
        "for this test (fewer alternatives per exclude?)")
    fits = EXCLUDE_BOUND // (len(alternatives("xyz", ALTERNATIVES)) + 16)
    count = min(fits, math.ceil(2.5 * TOTAL_BUDGET_S / cost))
    assert count * cost > 1.5 * TOTAL_BUDGET_S, (
        f"{count} excludes of {cost:.3f}s each do not add up to well over the "
        f"{TOTAL_BUDGET_S}s budget")
    excludes = [alternatives(f"{salted()}{k}x", ALTERNATIVES) for k in range(count)]
    assert sum(len(x) for x in excludes) <= EXCLUDE_BOUND

    async def main() -> tuple[dict[str, Any], float]:
        async with Running(tmp_path, {"watchers": [_app(tmp_path)]}) as r:
            before = children_cpu()
            reply = await ask(r, _new(tmp_path, exclude=excludes), LOADED_WALL_S + DEADLINE_S)
            used = children_cpu() - before
            assert await watchers(r) == ["app"]
            assert not probes(), "a compile check outlived its add"
        return reply, used

    reply, used = asyncio.run(main())
    assert reply["ok"] is False, (
        f"the add of {count} excludes that cost {count * cost:.1f}s of CPU to compile was not "
        f"refused: {str(reply)[:300]}")
    error = reply["error"]
    assert error["code"] == "bad_request", error
    assert error.get("budget") == TOTAL_BUDGET_S and error.get("seconds") == TOTAL_BUDGET_S, error
    assert f"took over {TOTAL_BUDGET_S:g} s of CPU time" in error["message"], error
    assert str(error.get("field")).startswith("exclude["), error
    reached = int(error["field"].removeprefix("exclude[").removesuffix("]"))
    assert 0 < reached < count - 1, (
        f"stopped at exclude[{reached}] of {count}: the total budget counts them together and "
        "stops before the last")
    check_one_line(error)
    assert 0.8 * TOTAL_BUDGET_S < used < TOTAL_BUDGET_S + 1.0, (
        f"the check process used {used:.2f}s of CPU: not stopped at the {TOTAL_BUDGET_S}s "
        f"budget (all {count} excludes cost {count * cost:.1f}s)")


def test_a_check_not_done_by_its_deadline_is_killed_and_the_add_refused_busy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A check process that has not finished by the deadline (15 s; here it is stopped, as on a
    host that runs it not at all) is killed and the add refused `busy`, to be tried again: its
    `budget` is the deadline and `seconds` what it waited. Nothing was started, the process is
    gone (killed while stopped, and reaped), and the add tried again is accepted."""
    assert compile_probe.WALL_S == WALL_S
    real = compile_probe._SPAWNER
    frozen = Rewritten(stopped_first)
    monkeypatch.setattr(compile_probe, "WALL_S", SHORT_WALL_S)
    monkeypatch.setattr(compile_probe, "_SPAWNER", frozen)

    async def main() -> None:
        async with Running(tmp_path, {"watchers": [_app(tmp_path)]}) as r:
            adding = asyncio.ensure_future(ask(r, _new(tmp_path)))
            await until(lambda: frozen.pids and state(frozen.pids[0]) == "T",
                        "the compile check to be stopped")
            assert frozen.pids[0] in probes()
            reply = await asyncio.wait_for(adding, DEADLINE_S)
            assert reply["ok"] is False, f"the add was not refused: {reply}"
            error = reply["error"]
            assert error["code"] == "busy", error
            assert error.get("budget") == SHORT_WALL_S, error
            assert error.get("seconds", 0) >= SHORT_WALL_S, error
            assert "try again" in error["message"], error
            check_one_line(error)
            assert state(frozen.pids[0]) == "", (
                f"the stopped check process is left ({state(frozen.pids[0])!r})")
            assert not probes(), "a compile check outlived its add"
            assert await watchers(r) == ["app"]

            monkeypatch.setattr(compile_probe, "_SPAWNER", real)
            again = await asyncio.wait_for(ask(r, _new(tmp_path)), DEADLINE_S)
            assert again["ok"] is True, again
            assert await watchers(r) == ["app", "new"]
            assert not probes()

    asyncio.run(main())
    assert len(frozen.pids) == 1


def test_a_check_that_cannot_be_started_is_refused_start_failed(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    """A check process that could not start (its interpreter is not there: exec fails) is
    refused `start_failed`, saying why in one line; nothing was started or is left running."""
    missing = tmp_path / "no-such-python"
    tried = Rewritten(lambda argv: [str(missing), *argv[1:]])
    monkeypatch.setattr(compile_probe, "_SPAWNER", tried)

    async def main() -> dict[str, Any]:
        async with Running(tmp_path, {"watchers": [_app(tmp_path)]}) as r:
            reply = await asyncio.wait_for(ask(r, _new(tmp_path)), DEADLINE_S)
            assert await watchers(r) == ["app"]
            assert not probes(), "a compile check outlived its add"
        return reply

    reply = asyncio.run(main())
    assert tried.pids == []
    assert reply["ok"] is False, f"the add was not refused: {reply}"
    error = reply["error"]
    assert error["code"] == "start_failed", error
    assert str(missing) in error["message"] and "not found" in error["message"], error
    check_one_line(error)


def test_a_check_that_dies_before_it_is_ready_is_refused_start_failed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A check process whose interpreter could not start (PYTHONHOME names no Python: it exits
    at once) is refused `start_failed`, not blamed on the regexes (`bad_request`), with the
    cause the interpreter gave (it said `<no Python frame>`, the last line of the fatal error's
    thread dump); nothing was started or is left running. (The runner starts it with `-I`,
    which ignores PYTHONHOME: the test's seam starts it without.)"""
    monkeypatch.setattr(compile_probe, "_SPAWNER",
                        Rewritten(lambda argv: [x for x in argv if x != "-I"]))

    async def main() -> dict[str, Any]:
        async with Running(tmp_path, {"watchers": [_app(tmp_path)]}) as r:
            with monkeypatch.context() as env:
                env.setenv("PYTHONHOME", str(tmp_path / "no-python-home"))
                reply = await asyncio.wait_for(ask(r, _new(tmp_path)), DEADLINE_S)
            assert await watchers(r) == ["app"]
            assert not probes(), "a compile check outlived its add"
        return reply

    reply = asyncio.run(main())
    assert reply["ok"] is False, f"the add was not refused: {reply}"
    error = reply["error"]
    assert error["code"] == "start_failed", error
    assert "did not start" in error["message"], error
    assert "No module named 'encodings'" in error["message"], error  # (the cause, not the dump)
    check_one_line(error)


def test_the_check_process_loads_only_what_the_compiles_need(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every `add` starts a check process: it loads the matcher and its engines, not the
    runner's asyncio, spawner, config or site (~140 ms of CPU a check with them, ~75 without).
    Its command as the runner gave it is run again, with -X importtime."""
    seen = Rewritten(lambda argv: argv)
    monkeypatch.setattr(compile_probe, "_SPAWNER", seen)

    async def main() -> None:
        async with Running(tmp_path, {"watchers": [_app(tmp_path)]}) as r:
            reply = await asyncio.wait_for(ask(r, _new(tmp_path)), DEADLINE_S)
            assert reply["ok"] is True, reply

    asyncio.run(main())
    [(argv, stdin)] = seen.started
    done = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], input=stdin,
                          capture_output=True, timeout=60)
    assert done.returncode == 0 and b'{"done": true}' in done.stdout, done
    lines = done.stderr.decode().splitlines()
    assert all(x.startswith("import time:") for x in lines), done.stderr.decode()[-2000:]
    loaded = {x.rsplit("|", 1)[-1].strip() for x in lines[1:]}
    for heavy in ("site", "asyncio", "subprocess", "pathlib", "watchrun.process",
                  "watchrun.runtime.compile_probe", "watchrun.config", "watchrun.output"):
        assert heavy not in loaded, f"the check process imports {heavy}"
    assert not [m for m in loaded if m.startswith("__editable__")], "it ran site's .pth files"
    assert {"watchrun.match.matcher", "watchrun.runtime.compile_child"} <= loaded
