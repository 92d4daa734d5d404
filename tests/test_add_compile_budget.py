"""`watchrun add` of a pattern that RE2 takes seconds to compile (16 KiB of
`kq0\\w{2,30}|kq1\\w{2,30}|…`, ignoring case or not: the bounded repeats make it slow):
google-re2 holds the interpreter lock while it compiles, so a worker thread did not keep it off
the event loop (every watcher and `status` froze for the whole compile). Now the runner
compiles an added watcher's regexes first in a child process under a CPU budget
(`runtime/compile_probe.py`) and refuses one over it; the loop awaits the child. A legitimate
16 KiB literal alternation is still accepted and matches; no probe process is left. The MCP
tool's `add`, which checks a watcher in its own process before its session's runner exists,
refuses it the same way. Times are compared to the compile's cost measured here (ratios: the
box may be loaded), never to absolute numbers."""

from __future__ import annotations

import asyncio
import functools
import os
import random
import statistics
import time
from pathlib import Path
from typing import Any

from liverunner import LiveRunner, spawned_by, wait_for, write_config
from test_add_compile_off_loop import BOUND, add_asking_status, alternation

from watchrun.match.matcher import needs_backtracking

RE2_BUDGET_S = 0.5
"""docs/control.md: the CPU seconds one RE2 compile of an added watcher may take."""
PROBE = b"watchrun.runtime.compile_child"


_USED: set[str] = set()


def salted() -> str:
    """Two letters new to this process's caches (RE2's own, the matcher's): a prefix as short as
    the `kq` of the pattern the fault was found with, whose RE2 compile took ~4-6 s."""
    while (salt := "".join(random.sample("ghjmnpqrtuvxyz", 2))) in _USED:
        pass
    _USED.add(salt)
    return salt


def slow_pattern(salt: str) -> str:
    """16 KiB of `<salt>0\\w{2,30}|<salt>1\\w{2,30}|…`: seconds of RE2 compile."""
    return alternation(salt, r"\w{2,30}", BOUND)


def compile_cost() -> float:
    """What the loop waited, before, for the RE2 compile that `add`'s check makes of a slow
    pattern: the same compile, timed here (wall time, as a stall is), of one with other letters
    (so that this process's RE2 cache does not hold the one added)."""
    return compile_costs()[0]


@functools.cache
def compile_costs() -> tuple[float, float]:
    """The slow pattern's compile here: (wall, CPU) seconds. Timed once per process: it costs
    seconds of CPU."""
    began, cpu = time.perf_counter(), time.process_time()
    assert needs_backtracking(slow_pattern(salted())) is None  # (RE2 runs it: linear)
    return time.perf_counter() - began, time.process_time() - cpu


def children_cpu(pid: int) -> float:
    """CPU seconds of the children process `pid` has waited for (`cutime` + `cstime`)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def probes(parent: int) -> list[int]:
    """Live compile-probe processes started by process `parent`."""
    return spawned_by(parent, PROBE)


def check_refusal(error: dict[str, Any]) -> None:
    """The `add` refusal of the slow pattern: `bad_request`, naming the field, the CPU seconds
    and the budget, in one line (no traceback)."""
    assert error["code"] == "bad_request", error
    assert error["field"] == "pattern", error
    assert error["budget"] == RE2_BUDGET_S, error
    assert error["seconds"] >= RE2_BUDGET_S, error
    assert f"`pattern` took over {RE2_BUDGET_S:g} s of CPU time to compile" in \
        error["message"], error
    assert "Traceback" not in error["message"] and "\n" not in error["message"], error


def test_an_added_pattern_slow_to_compile_is_refused_and_the_loop_goes_on(
        tmp_path: Path) -> None:
    salt = salted()
    slow = slow_pattern(salt)
    cost = compile_cost()
    (tmp_path / "app.log").write_text("")
    (tmp_path / "codes.log").write_text("")
    config = write_config(tmp_path, {"watchers": [{"id": "app", "path": "app.log",
                                                   "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        seen: set[int] = set()
        reaped = children_cpu(r.pid)
        reply, waits = add_asking_status(r, {
            "id": "slow", "path": str(tmp_path / "slow.log"), "pattern": slow},
            lambda: seen.update(probes(r.pid)))
        probe_cpu = children_cpu(r.pid) - reaped
        worst = max(waits)
        assert worst < cost / 4, (
            f"a `status` waited {worst:.3f}s while the add was checked; the pattern's compile "
            f"costs {cost:.3f}s ({len(waits)} replies, median {statistics.median(waits):.3f}s)")
        status = r.control({"cmd": "status"})
        lag = float(status["loopLagMaxS"])
        assert lag < cost / 4, f"the runner's loop stalled {lag:.3f}s (the compile: {cost:.3f}s)"
        assert reply["ok"] is False, (
            f"the add of a pattern whose RE2 compile costs {cost:.2f}s was not refused: "
            f"{str(reply)[:300]}")
        check_refusal(reply["error"])
        assert status["watchers"] == ["app"], status["watchers"]
        assert not probes(r.pid), "a compile probe outlived its add"
        assert seen, "no compile-probe process ran while the add was checked"
        cpu = compile_costs()[1]  # CPU, not wall time: the box may be loaded
        assert probe_cpu < cpu * 0.75, (
            f"the probe used {probe_cpu:.2f} s of CPU; compiling the pattern costs {cpu:.2f} s: "
            "it was not stopped at its budget")

        legit = alternation(f"{salt}code", "", BOUND)  # a 16 KiB literal alternation
        reply = r.control({"cmd": "add", "watcher": {
            "id": "codes", "path": str(tmp_path / "codes.log"), "pattern": legit}})
        assert reply["ok"] is True, reply
        assert not probes(r.pid), "a compile probe outlived its add"
        lines = [f"x {salt.upper()}CODE7 y", "nothing here", f"{salt}code1000"]
        with (tmp_path / "codes.log").open("a") as f:
            f.write("".join(f"{line}\n" for line in lines))
        wait_for(lambda: [m["line"] for m in r.matches("codes")] == [lines[0], lines[2]],
                 "the legitimate watcher's two matches")
    finally:
        assert r.stop() == 0
    assert "Traceback" not in r.stderr()


def test_the_mcp_tools_add_refuses_it_before_checking_it_in_its_own_process(
        tmp_path: Path) -> None:
    """No runner is live: the tool checks the watcher in the MCP server's process (whose loop
    would also run the session's runner) before starting one. The slow pattern is refused
    first, and nothing starts."""
    from watchrun.config.model import Config, Limits, OutputSpec
    from watchrun.mcp.runners import Runners
    from watchrun.mcp.tool import Tool
    from watchrun.output.runlog import RunLog

    slow = slow_pattern(salted())
    cost = compile_cost()
    config = Config(Limits(), OutputSpec(tmp_path / "out"))
    worst = [0.0]
    started: list[bool] = []

    async def session() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        done = asyncio.Event()

        async def tick() -> None:  # the loop's longest wait beyond a 5 ms sleep
            while not done.is_set():
                asked = loop.time()
                await asyncio.sleep(0.005)
                worst[0] = max(worst[0], loop.time() - asked - 0.005)

        async with asyncio.TaskGroup() as tg:
            runners = Runners(config, RunLog("text", quiet=True), tg, on_end=lambda: None)
            ticker = tg.create_task(tick())
            try:
                details, _ = await Tool(config, runners, str(tmp_path)).call(
                    {"action": "add", "path": str(tmp_path / "slow.log"), "pattern": slow})
            finally:
                done.set()
                await ticker
                started.append(runners.session is not None)
                await runners.close()
        return details

    details = asyncio.run(asyncio.wait_for(session(), 60))
    assert worst[0] < cost / 4, (
        f"the MCP server's loop stalled {worst[0]:.3f}s; the compile costs {cost:.3f}s")
    assert "error" in details, f"the tool added it: {str(details)[:300]}"
    assert f"`pattern` took over {RE2_BUDGET_S:g} s of CPU time to compile" in \
        details["error"], details
    assert started == [False], "the session's runner was started for a refused watcher"
    assert not probes(os.getpid()), "a compile probe outlived the call"
