"""What an upgrade or a downgrade of watchrun meets: helpers started from the package's files
while a runner runs (the guardian, the regex worker) whose files were replaced under it, as
`pip install -U` replaces them (each such runner runs from its own copy of the package, which
the test then breaks), and state written by a newer watchrun."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from liverunner import LiveRunner, cli, guardian_of, read_records, wait_for, write_config

from watchrun.process.guard_lazy import LazyGuardian
from watchrun.process.tree import start_time

PKG = Path(__file__).resolve().parent.parent / "runner" / "watchrun"

FAILING_GUARDIAN = """\
import os
stat = open("/proc/self/stat").read()
with open({starts!r}, "a") as f:
    f.write(stat[stat.rindex(")") + 2 :].split()[19] + "\\n")
raise ImportError("guardian unavailable")
"""
"""A guardian.py that cannot start, as a half-done upgrade leaves one: it notes when each of
its processes started (clock ticks since boot, as /proc says), then fails to import."""

UNPROTECTED = ("until one starts, if the runner is SIGKILLed, the processes its children "
               "started are left running (each child still dies with it; the next runner of "
               "this output dir ends the rest)")


def package_copy(tmp_path: Path) -> Path:
    """A copy of the watchrun package for one runner (the folder to put on PYTHONPATH)."""
    home = tmp_path / "site"
    shutil.copytree(PKG, home / "watchrun", ignore=shutil.ignore_patterns("__pycache__"))
    return home


def runner_from(home: Path, config: Path) -> LiveRunner:
    return LiveRunner(config, env={"PYTHONPATH": str(home)}, validated=False, forked=False)


def problems(r: LiveRunner) -> list[str]:
    return [str(p) for p in r.control({"cmd": "status"})["problems"]]


def test_a_guardian_that_cannot_start_is_started_again_later_and_later_and_said_once(
        tmp_path: Path) -> None:
    """An explorer's F6: a guardian replaced by one that exits at once was started again in a
    tight loop, 35-50 processes and warning lines a second for as long as the runner ran. Now
    the next start waits 1 s, then 2 s, …; one warning says it cannot start, why and what is
    unprotected, `status` lists it with its count, and a line says when one runs again."""
    home = package_copy(tmp_path)
    (tmp_path / "app.log").write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    guardian_py = home / "watchrun" / "process" / "guardian.py"
    good = guardian_py.read_text()
    starts = tmp_path / "starts"
    r = runner_from(home, config)
    try:
        r.wait_running()  # (files only: no guardian yet, it starts with the first child)
        guardian_py.write_text(FAILING_GUARDIAN.format(starts=str(starts)))
        added = r.control({"cmd": "add", "watcher": {
            "id": "svc", "command": "sleep 1000", "pattern": "ERROR"}})
        assert added["ok"], added
        why = "exit status 1: ImportError: guardian unavailable"
        r.wait_log(f"warning: the guardian process cannot start ({why}): {UNPROTECTED}; trying "
                   "again in 1 s, then twice as long each time, at most 60 s (was watchrun "
                   "upgraded or removed under this process? restart it)")
        listed = f"the guardian process: 2 starts in a row failed ({why}); {UNPROTECTED}"
        wait_for(lambda: listed in problems(r), "status to list 2 failed starts")
        guardian_py.write_text(good)  # the upgrade is done: the next start works
        r.wait_log("the guardian process runs again (pid ")
        back = re.search(r"runs again \(pid (\d+)\), after (\d+) failed starts", r.stderr())
        assert back is not None, r.stderr()
        failed = [int(x) for x in starts.read_text().split()]
        assert int(back[2]) == len(failed) >= 2
        ticks = [*failed, start_time(int(back[1]))]
        gaps = [(b - a) / os.sysconf("SC_CLK_TCK") for a, b in itertools.pairwise(ticks)]
        for k, gap in enumerate(gaps):  # 1 s, 2 s, 4 s, …: not dozens of starts a second
            assert gap >= 0.9 * 2**k, gaps
        said = [ln for ln in r.stderr().splitlines() if "the guardian process" in ln]
        assert len(said) == 2, said  # cannot start, runs again: nothing per start
        assert not [p for p in problems(r) if "guardian" in p]
        assert guardian_of(r.pid) == int(back[1])
        assert r.stop() == 0
    finally:
        r.close()


def test_a_regex_worker_that_cannot_start_says_its_exit_status_and_last_line(
        tmp_path: Path) -> None:
    """An explorer's F7: a regex worker that failed to import had its traceback read as the
    protocol's length header: `IncompleteReadError('315 bytes read on a total of 1918985061
    expected bytes')`. Now its watcher fails (closed) saying how the worker ended and why."""
    home = package_copy(tmp_path)
    log = tmp_path / "app.log"
    log.write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "(ERROR)(?=!)", "backtracking": True}]})
    r = runner_from(home, config)
    try:
        r.wait_running()  # (its worker starts with the first lines to match)
        worker = home / "watchrun" / "runtime" / "regex_worker.py"
        worker.write_text('raise ImportError("new install: watchrun")\n')
        with log.open("a") as f:
            f.write("ERROR! one\n")
        said = "the regex worker did not start (exit status 1: ImportError: new install: watchrun)"
        r.wait_log(f"[app] error: watcher failed: {said}")
        errors = [x for x in r.records("app") if x["kind"] == "error"]
        assert [(x["code"], x["message"]) for x in errors] == [("regex-worker", said)]
        listed = json.loads(cli("list", "-c", config, "--json").stdout)["watchers"]
        assert [(w["status"], w["lastError"]) for w in listed] == [("fatal", said)]
        assert "internal" not in r.stderr() and "IncompleteReadError" not in r.stderr()
        assert r.stop() == 3  # (a watcher that failed)
    finally:
        r.close()


def test_a_checkpoint_of_a_newer_watchrun_is_said_so_and_set_aside(tmp_path: Path) -> None:
    """An explorer's F8: a checkpoint a newer watchrun wrote (a version this one does not know)
    was called corrupt. It is still set aside (its lines are not judged: a once run's verdict
    is an ERROR), and said for what it is."""
    log = tmp_path / "app.log"
    log.write_text("ERROR one\n")
    config = write_config(tmp_path, {"watchers": [{"id": "app", "path": "app.log",
                                                   "pattern": "ERROR"}]})
    assert cli("run", "--once", "-c", config).returncode == 0  # (makes the output dir)
    state = tmp_path / ".watchrun" / "state"
    newer: dict[str, Any] = {"version": 3, "positions": [{"path": str(log), "offset": 10}]}
    (state / "app.checkpoint.json").write_text(json.dumps(newer))
    done = cli("run", "--once", "-c", config)
    said = (f"checkpoint {state / 'app.checkpoint.json'} was written by a newer watchrun "
            "(version 3; this one reads up to 2); set aside as app.checkpoint.json.corrupt-")
    assert said in done.stderr, done.stderr
    assert "is corrupt" not in done.stderr
    assert done.returncode == 3, done.stderr  # where the last run ended is not known
    [kept] = state.glob("app.checkpoint.json.corrupt-*")
    assert json.loads(kept.read_text()) == newer
    records = read_records(tmp_path / ".watchrun" / "watchers" / "app.jsonl")
    [error] = [x for x in records if x["kind"] == "error"]
    assert said in error["message"] and error["unread"] is True


def test_a_guardian_that_cannot_start_for_a_day_is_still_tried_a_minute_apart() -> None:
    """The wait before the next start doubles up to a minute: after 1024 failed starts (17
    hours of them) `2 ** n` seconds was no float, and the OverflowError ended the retries."""
    guardian = LazyGuardian(warn=lambda _: None)
    for _ in range(1100):  # (no loop: nothing is started, only the next wait counted)
        guardian._cannot_start("exit status 1: ImportError: guardian unavailable")
    problem = guardian.problem()
    assert problem is not None and problem.startswith(
        "the guardian process: 1100 starts in a row failed (exit status 1: ImportError")
