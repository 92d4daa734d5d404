"""No process outlives what it belongs to: a daemon a command forked is stopped when its run ends
(`error: left-running`), and a setsid escapee carrying the spawn id is ended by the guardian or
the next runner when the runner is SIGKILLed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from liverunner import (
    LiveRunner,
    alive,
    guardian_of,
    wait_for,
    waking_mock,
    watchrun_bin,
    write_config,
)
from recordcheck import validate_records
from test_once import base_env

from watchrun.process.groups import Group, members
from watchrun.process.tree import Stat

# A command that daemonizes: a child forks a grandchild (stdio on /dev/null, still in the
# command's group and session) that writes its pid to argv[1]; once it has (its exec closes
# the pipe), the command says so and exits 0.
DAEMONIZE = """\
import os, sys
r, w = os.pipe()
if os.fork() == 0:
    if os.fork() == 0:
        fd = os.open("/dev/null", os.O_RDWR)
        for i in (0, 1, 2):
            os.dup2(fd, i)
        with open(sys.argv[1], "a") as f:
            f.write(f"{os.getpid()}\\n")
        os.execvp("sleep", ["sleep", "1000"])
    os._exit(0)
os.close(w)
os.read(r, 1)
os.wait()
print("daemon started", flush=True)
"""

DETACH = """\
    fd = os.open("/dev/null", os.O_RDWR)
    for i in (0, 1, 2):
        os.dup2(fd, i)
    with open(sys.argv[1], "a") as f:
        f.write(f"{os.getpid()}\\n")
"""
"""In a child (indented once): stdio on /dev/null, its pid appended to argv[1]."""

# A command that keeps running while a child of it leaves its session and group (setsid),
# environment intact, and writes its pid to argv[1].
ESCAPE = """\
import os, sys, time
if os.fork() == 0:
    os.setsid()
""" + DETACH + """\
    os.execvp("sleep", ["sleep", "1000"])
print("up", flush=True)
time.sleep(1000)
"""


def pids_in(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def sid_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2:].split()[3])


def watcher(tmp_path: Path, script: str, pattern: str, **extra: object) -> tuple[Path, Path]:
    """A config running `script` (which writes the pids to watch to the returned file)."""
    (tmp_path / "cmd.py").write_text(script)
    pids = tmp_path / "pids"
    config = write_config(tmp_path, {"limits": {"stopTimeout": "2s"}, "watchers": [
        {"id": "svc", "command": [sys.executable, "cmd.py", str(pids)], "pattern": pattern,
         **extra}]})
    return config, pids


def kinds(r: LiveRunner, kind: str) -> list[dict[str, object]]:
    return [rec for rec in r.records("svc") if rec["kind"] == kind]


# --- a daemon left by a run that ended ---------------------------------------------------


def test_a_daemon_left_by_a_run_is_stopped_when_the_run_ends(tmp_path: Path) -> None:
    config, pids = watcher(tmp_path, DAEMONIZE, "started")
    r = LiveRunner(config)
    try:
        wait_for(lambda: kinds(r, "exit"), "the run to end")
        [daemon] = pids_in(pids)
        assert not alive(daemon)  # stopped while the runner goes on
        assert r.proc.poll() is None
        [error] = kinds(r, "error")
        assert (error["code"], error["run"], error["count"]) == ("left-running", 1, 1)
        assert "1 process it started kept running; stopped it" in str(error["message"])
        [exit_] = kinds(r, "exit")
        assert (exit_["exitCode"], exit_["status"], exit_["signals"]) == (0, "exited",
                                                                          ["SIGTERM"])
        assert r.stop() == 0
        assert r.left == []
    finally:
        r.close()
    records = validate_records(tmp_path / ".watchrun" / "watchers" / "svc.jsonl")
    assert [rec["kind"] for rec in records if rec["kind"] in ("error", "exit")] == [
        "error", "exit"]


# A daemon that ignores SIGTERM (its grace runs out: SIGKILL) and, once it got one, appends a
# line to `ticks` every 0.1 s; the command exits as soon as the daemon's trap is set (before,
# on a loaded host, a SIGTERM at once could come first and end it: no tick, ever).
DEAF = ("sh -c 'trap \"T=1\" TERM; : > deaf; while :; do sleep 0.1;"
        " [ -n \"$T\" ] && echo t >> ticks; done'")
READY = "until [ -e deaf ]; do sleep 0.01; done; echo started"
DEAF_DAEMON = f"{DEAF} </dev/null >/dev/null 2>&1 & {READY}"


# A holder of the command's output that ignores SIGTERM (its grace runs out: SIGKILL) and, once
# it got one, appends a line to `ticks` every 0.1 s; the command exits once its trap is set.
DEAF_HOLDER = f"{DEAF} & {READY}"


@pytest.mark.parametrize(("command", "code", "said"), [
    (DEAF_DAEMON, "left-running", "kept running; stopped"),
    (DEAF_HOLDER, "output-held-open", "kept its output open for 4s; stopped"),
], ids=["daemon", "output-holder"])
def test_a_stop_during_the_stop_of_what_a_run_left_records_it_and_gives_no_second_grace(
        tmp_path: Path, command: str, code: str, said: str) -> None:
    """A SIGTERM to the runner while what a finished run left (a daemon, or a holder of its
    output) was in its grace cancelled that stop: no `error{left-running}` /
    `error{output-held-open}` record or log line, and a second full stopTimeout from the
    runner's stop. Now the stop under way goes on (one grace) and is recorded."""
    config = write_config(tmp_path, {"limits": {"stopTimeout": "4s"}, "watchers": [
        {"id": "svc", "command": command, "pattern": "started"}]})
    ticks = tmp_path / "ticks"
    r = LiveRunner(config)
    try:
        wait_for(lambda: ticks.exists() and len(ticks.read_text()) >= 50,
                 "it to have ignored its SIGTERM for 25 ticks", timeout=30)  # (2.5 s of 4 s)
        r.send(signal.SIGTERM)
        sent = time.monotonic()
        assert r.proc.wait(timeout=30) == 0
        took = time.monotonic() - sent
    finally:
        r.close()
    assert took < 3.5, f"the runner's stop took {took:.1f}s: what was left got a second grace"
    records = validate_records(tmp_path / ".watchrun" / "watchers" / "svc.jsonl")
    ends = [rec for rec in records if rec["kind"] in ("error", "exit", "stop")]
    assert [rec["kind"] for rec in ends] == ["error", "exit", "stop"]
    assert (ends[0]["code"], ends[0]["run"]) == (code, 1)  # (a daemon's sleeps count too)
    assert said in str(ends[0]["message"])
    assert (ends[1]["exitCode"], ends[1]["signals"]) == (0, ["SIGTERM", "SIGKILL"])
    assert code in r.stderr()


def test_a_once_command_that_exited_is_judged_by_its_exit_when_its_daemon_is_being_stopped(
        tmp_path: Path) -> None:
    """`run --once` interrupted while the daemon a command that exited 0 left was in its
    grace: the verdict said the command "did not run to its exit", its exit `-`. Now it is
    judged by its own exit (the run is still INTERRUPTED: exit 3)."""
    config = write_config(tmp_path, {"limits": {"stopTimeout": "4s"}, "watchers": [
        {"id": "svc", "command": DEAF_DAEMON, "pattern": "started", "gate": {"exitCode": True}}]})
    ticks, err = tmp_path / "ticks", tmp_path / "stderr.txt"
    with err.open("wb") as fh:  # (its log, said if the daemon's SIGTERM never comes)
        proc = subprocess.Popen([watchrun_bin(), "run", "--once", "--json", "-c", str(config)],
                                cwd=tmp_path, env=base_env(), stdout=subprocess.PIPE, stderr=fh)
    try:
        try:
            wait_for(lambda: ticks.exists() and ticks.read_text(), "the daemon's SIGTERM")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the run's log:\n{err.read_text()}") from None
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    doc = json.loads(out)
    assert (proc.returncode, doc["interrupted"]) == (3, "SIGTERM"), out
    (v,) = doc["verdicts"]
    assert (v["status"], v["exit"], v["reasons"]) == ("pass", "0", []), out


def test_restarts_do_not_pile_up_daemons_and_sigterm_leaves_none(tmp_path: Path) -> None:
    config, pids = watcher(tmp_path, DAEMONIZE, "started", restart="always",
                           restartDelay="100ms")
    r = LiveRunner(config)
    try:
        wait_for(lambda: len(kinds(r, "exit")) >= 3, "three runs to end")
        ended = len(kinds(r, "exit"))
        started = pids_in(pids)
        assert len(started) >= ended
        assert not any(alive(p) for p in started[:ended])  # one daemon per finished run: gone
        assert len(kinds(r, "error")) >= 3
        assert {e["code"] for e in kinds(r, "error")} == {"left-running"}
        assert r.stop() == 0
        assert r.left == []
        assert not any(alive(p) for p in pids_in(pids))
    finally:
        r.close()
    validate_records(tmp_path / ".watchrun" / "watchers" / "svc.jsonl")


# A command whose child leaves its session and group and wipes its environment (no
# WATCHRUN_SPAWN_ID: nothing names it as the command's), writes its pid to argv[1], then the
# command exits 0: the child, orphaned, is re-parented to the runner.
WIPED = """\
import os, sys
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
""" + DETACH + """\
    os.execve("/bin/sleep", ["sleep", "1000"], {})
os.close(w)
os.read(r, 1)
print("escaped", flush=True)
"""


def test_escapees_without_a_spawn_id_do_not_pile_up_across_restarts(tmp_path: Path) -> None:
    """With no other child running, a run's end stops the unattributed orphans too (they can
    only be its own): each run of a `restart: always` command left one more running, and the
    runner's stop, with no command running to sweep them, left them all."""
    config, pids = watcher(tmp_path, WIPED, "escaped", restart="always", restartDelay="100ms")
    r = LiveRunner(config)
    started: list[int] = []
    try:
        wait_for(lambda: len(kinds(r, "exit")) >= 3, "three runs to end")
        ended = len(kinds(r, "exit"))
        started = pids_in(pids)
        assert len(started) >= ended
        assert not any(alive(p) for p in started[:ended])
        assert [e["count"] for e in kinds(r, "error")][:ended] == [1] * ended
        assert r.stop() == 0
        assert not any(alive(p) for p in pids_in(pids))
    finally:
        r.close()
        for pid in pids_in(pids):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


# --- a setsid escapee of a running command, runner SIGKILLed -----------------------------


def escapee_up(r: LiveRunner, pids: Path) -> int:
    wait_for(lambda: r.matches("svc") and pids_in(pids), "the command and its escapee")
    [escapee] = pids_in(pids)
    comm = Path(f"/proc/{escapee}/comm")  # (its pid is written before its exec: mid-exec,
    wait_for(lambda: comm.read_text() == "sleep\n", "its exec")  # its environ reads empty)
    [start] = [rec for rec in r.records("svc") if rec["kind"] == "start"]
    assert sid_of(escapee) not in (start["pid"], r.pid)  # it left the command's session
    assert f"WATCHRUN_SPAWN_ID={r.pid}.".encode() in Path(f"/proc/{escapee}/environ").read_bytes()
    return escapee


def test_the_guardian_ends_a_setsid_escapee_of_a_sigkilled_runner(tmp_path: Path) -> None:
    config, pids = watcher(tmp_path, ESCAPE, "up")
    r = LiveRunner(config)
    try:
        escapee = escapee_up(r, pids)
        r.proc.kill()  # SIGKILL: no shutdown; only the guardian is left to end it
        r.proc.wait()
        wait_for(lambda: not alive(escapee), "the guardian to end the escapee", 10)
    finally:
        r.close()


def test_a_guardian_that_ended_is_replaced_and_told_the_groups(tmp_path: Path) -> None:
    """A tester's F7: a guardian killed while the runner ran (an operator's `kill`, the OOM
    killer) was neither noticed nor replaced, and a later SIGKILL of the runner left the
    command's escapee and its group running. Now another guardian starts, told every group."""
    config, pids = watcher(tmp_path, ESCAPE, "up")
    r = LiveRunner(config)
    try:
        escapee = escapee_up(r, pids)
        first = guardian_of(r.pid)
        os.kill(first, signal.SIGKILL)
        r.wait_log(f"the guardian process (pid {first}) ended (killed by SIGKILL); starting "
                   "another, told the process groups")
        second = guardian_of(r.pid)
        assert second != first
        r.proc.kill()
        r.proc.wait()
        wait_for(lambda: not alive(escapee), "the new guardian to end the escapee", 10)
    finally:
        r.close()


def test_the_next_runner_ends_a_setsid_escapee_a_killed_runner_left(tmp_path: Path) -> None:
    config, pids = watcher(tmp_path, ESCAPE, "up")
    first = LiveRunner(config)
    second: LiveRunner | None = None
    try:
        escapee = escapee_up(first, pids)
        [start] = [rec for rec in first.records("svc") if rec["kind"] == "start"]
        first.send(signal.SIGSTOP)  # (a runner that ran on would start another guardian)
        os.kill(guardian_of(first.pid), signal.SIGKILL)
        first.proc.kill()
        first.proc.wait()
        wait_for(lambda: not alive(int(str(start["pid"]))), "PR_SET_PDEATHSIG to end the command",
                 10)
        assert alive(escapee)  # only a runner can end it now
        pids.unlink()
        second = LiveRunner(config)
        second.wait_log("ended 1 processes left running by a previous runner "
                        f"(pid {first.pid}) of this output dir")
        assert not alive(escapee)
        wait_for(lambda: pids_in(pids), "the watcher to start again")
        assert second.stop() == 0
        assert second.left == []
    finally:
        if second is not None:
            second.close()
        first.close()  # only now: it kills what the first runner left, if a check failed


def st(pgid: int, start: int) -> Stat:
    return Stat("S", 1, pgid, pgid, start)


def owned(owners: dict[int, str | None]) -> Callable[[int], str | None]:
    return lambda pid: owners.get(pid, "")


def test_members_include_escapees_by_spawn_id_and_no_one_else() -> None:
    group = Group(10, 500, "me.1.x")
    cases: list[tuple[dict[int, Stat], dict[int, str | None], set[int]]] = [
        ({10: st(10, 500), 13: st(13, 520)}, {13: "me.1.x"}, {10, 13}),  # a setsid escapee
        ({11: st(10, 510), 13: st(13, 520)}, {13: "me.1.x"}, {11, 13}),  # the leader died
        ({10: st(10, 900), 13: st(13, 920)}, {13: "me.1.x"}, {13}),  # group id reused
        ({13: st(13, 520)}, {13: "other.1.x"}, set()),  # another child's escapee
        ({13: st(13, 400)}, {13: "me.1.x"}, set()),  # older than our leader: not ours
        ({13: st(13, 520)}, {13: None}, set()),  # outside the group, environ unreadable
    ]
    for table, owners, expected in cases:
        assert members(table, group, owned(owners)) == expected, table
    # without a spawn id to go by, nothing outside the group is taken
    assert members({13: st(13, 520)}, Group(10, 500, ""), lambda pid: "") == set()


def test_stopping_one_command_leaves_the_guardian_to_end_the_others(tmp_path: Path) -> None:
    """Stopping a command sweeps the runner's unattributed adopted orphans into its tree; the
    guardian, the runner's own child in a session of its own, was taken for one and killed, so
    a SIGKILL afterwards left every other command's escapee running."""
    config, pids = watcher(tmp_path, ESCAPE, "up")
    spec = yaml.safe_load(config.read_text())
    spec["watchers"].append({"id": "other", "command": "exec sleep 1000", "pattern": "x"})
    config.write_text(yaml.safe_dump(spec))
    r = LiveRunner(config)
    try:
        escapee = escapee_up(r, pids)
        guardian = guardian_of(r.pid)
        wait_for(lambda: [rec for rec in r.records("other") if rec["kind"] == "start"],
                 "the other command")
        assert r.control({"cmd": "stop", "id": "other"})["ok"]
        wait_for(lambda: [rec for rec in r.records("other") if rec["kind"] == "stop"],
                 "the other command's stop")
        assert alive(guardian)
        r.proc.kill()
        r.proc.wait()
        wait_for(lambda: not alive(escapee), "the guardian to end the escapee", 10)
    finally:
        r.close()


def test_an_agent_turn_that_ends_leaves_the_guardian(tmp_path: Path) -> None:
    """The end of a turn sweeps its tree as a command's end does: the guardian outlives it."""
    log, config = waking_mock(tmp_path)
    r = LiveRunner(config)
    try:
        r.wait_running()
        with log.open("a") as fh:
            fh.write("ERROR one\n")
        guardian = guardian_of(r.pid)
        wait_for(lambda: [x for x in r.records("ag", "agents")
                          if x["kind"] == "dispatch-finished"], "the turn to end")
        assert alive(guardian)
        assert r.stop() == 0
    finally:
        r.close()
