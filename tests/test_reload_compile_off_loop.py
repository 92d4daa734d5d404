"""A reload (SIGHUP) that starts watchers compiles their matchers off the loop first (hyperscan's
compile lets the loop run meanwhile), so `status` and the other watchers do not wait for them:
before, the reload built them one after the other on the loop (every reply held that long)."""

from __future__ import annotations

import random
import signal
from pathlib import Path

import pytest
from liverunner import LiveRunner, wait_for, write_config
from test_add_compile_off_loop import BOUND, alternation, loop_cost, loop_cpu

from watchrun.match.matcher import Matcher, engines_available

NEW = 8
"""Watchers the reload starts, each with its own 8 KiB alternation (16 KiB is past hyperscan's
length limit): ~0.03 s of hyperscan compile each on this project's machines."""


@pytest.mark.skipif("hyperscan" not in engines_available(), reason="needs hyperscan")
def test_a_reload_compiles_the_new_watchers_matchers_off_the_loop(tmp_path: Path) -> None:
    salt = "".join(random.choice("ghjmnpqrtuvxyz") for _ in range(4))  # new to every cache
    patterns = [alternation(f"{salt}{n}w", "[0-9]+", BOUND // 2) for n in range(NEW)]
    assert {Matcher(p, case_sensitive=True).engine for p in patterns} == {"hyperscan"}
    cost = sum(loop_cost(p, [], rounds=1, case_sensitive=True) for p in patterns)
    app: dict[str, object] = {"id": "app", "path": "app.log", "pattern": "ERROR"}
    new: list[dict[str, object]] = [
        {"id": f"w{n}", "path": f"w{n}.log", "pattern": p, "caseSensitive": True}
        for n, p in enumerate(patterns)]
    for w in [app, *new]:
        (tmp_path / str(w["path"])).write_text("")
    config = write_config(tmp_path, {"watchers": [app]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        write_config(tmp_path, {"watchers": [app, *new]})
        before = loop_cpu(r.pid)
        r.send(signal.SIGHUP)
        r.wait_log(f"reloaded: {NEW + 1} watchers running")
        on_loop = loop_cpu(r.pid) - before
        # judged by the loop thread's CPU time, which a loaded box does not stretch (a
        # `status`'s wait, as before, it does)
        assert on_loop < cost / 2, (
            f"the runner's loop thread used {on_loop:.3f}s of CPU during the reload; "
            f"compiling the new watchers' matchers costs {cost:.3f}s, so the reload compiled "
            "them on the loop")
        wait_for(lambda: r.records("w3"), "w3's start record (its file's end is taken)")
        with (tmp_path / "w3.log").open("a") as f:
            f.write(f"{salt}3w12 hit\n{salt}3w miss\n{salt.upper()}3W12 other case\n")
        wait_for(lambda: [m["line"] for m in r.matches("w3")] == [f"{salt}3w12 hit"],
                 "a reloaded watcher's match")
    finally:
        assert r.stop() == 0
    assert "Traceback" not in r.stderr()
