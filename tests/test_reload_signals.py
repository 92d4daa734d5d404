"""Real-runner SIGHUPs: storms coalesce, none kills a stop, an unloadable config is in status."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from inproc import inproc
from liverunner import LiveRunner, wait_for, watchrun_bin, write_config


def _held(tmp_path: Path) -> tuple[dict[str, Any], Path]:
    """A config of one command that, on its SIGTERM, makes the file `termed` and exits only
    once the file `go` exists (so a stop of it, a reload's or the runner's, lasts until the
    test says)."""
    go = tmp_path / "go"
    script = (f"trap 'touch {tmp_path}/termed; until [ -e {go} ]; do sleep 0.02; done; exit 0' "
              "TERM; echo up; "
              "while :; do sleep 0.02; done")
    conf = {"limits": {"stopTimeout": "30s"},
            "watchers": [{"id": "c", "command": script, "pattern": "up"}]}
    return conf, go


def test_a_sighup_while_stopping_is_no_second_signal(tmp_path: Path) -> None:
    """A SIGHUP (logrotate's postrotate, a `systemctl reload`) during a graceful stop was taken
    for the second stop signal: every command was SIGKILLed without its grace period."""
    conf, go = _held(tmp_path)
    r = LiveRunner(write_config(tmp_path, conf))
    try:
        wait_for(lambda: r.matches("c"), "the command to be up")
        r.send(signal.SIGTERM)
        r.wait_log("stopping (SIGTERM)")  # (a SIGHUP sent with it would be the stop's to drop)
        r.send(signal.SIGHUP)
        r.wait_log("SIGHUP while stopping", timeout=10)
        go.touch()
        assert r.proc.wait(timeout=15) == 0
    finally:
        r.close()
    assert "second signal" not in r.stderr(), r.stderr()
    (exit_rec,) = [x for x in r.records("c") if x["kind"] == "exit"]
    assert (exit_rec["exitCode"], exit_rec["signals"]) == (0, ["SIGTERM"])
    assert r.left == []


def test_a_sighup_storm_is_one_reload_and_a_stop_drops_the_waiting_one(tmp_path: Path) -> None:
    """SIGHUPs sent while a reload runs were queued one reload each (300 of them on 300
    watchers held a SIGTERM behind them for 5.6 s, the runner `reloading` all along); now they
    are one reload waiting, and a stop signal drops that one."""
    conf, go = _held(tmp_path)
    config = write_config(tmp_path, conf)
    r = LiveRunner(config)
    try:
        wait_for(lambda: r.matches("c"), "the command to be up")
        conf["watchers"][0]["pattern"] = "up|down"  # changed: the reload stops it, and waits
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        # (past its config read, which a SIGTERM gives up: the reload is stopping the command)
        wait_for(lambda: (tmp_path / "termed").exists(), "the reload to stop the command")
        assert r.control({"cmd": "status"})["state"] == "reloading"
        for _ in range(20):
            r.send(signal.SIGHUP)
            assert r.control({"cmd": "status"})["state"] == "reloading"  # (each one taken)
        r.send(signal.SIGTERM)
        go.touch()
        assert r.proc.wait(timeout=15) == 0
    finally:
        r.close()
    assert r.stderr().count("reloaded:") == 1, r.stderr()
    assert r.left == []


def app_runner(tmp_path: Path) -> tuple[LiveRunner, Path, dict[str, Any]]:
    """A runner started on a config that follows app.log for ERROR: it, its file, its dict."""
    (tmp_path / "app.log").write_text("")
    conf: dict[str, Any] = {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR"}]}
    config = write_config(tmp_path, conf)
    return LiveRunner(config), config, conf


def test_a_reload_to_a_config_invalid_or_gone_is_in_status_and_the_old_one_runs_on(
        tmp_path: Path) -> None:
    """A SIGHUP whose config no longer validates (or was removed between the write and the
    read) kept the running config, but said it only in the log: `status` had no problem, so a
    `systemctl reload` then `watchrun status` looked like the new config ran. A reload that
    applies clears them: they would say the config running is an old one."""
    r, config, conf = app_runner(tmp_path)
    try:
        r.wait_running()
        conf["watchers"][0]["pattern"] = "("
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        wait_for(lambda: r.control({"cmd": "status"})["problems"], "a problem in status")
        config.unlink()
        r.send(signal.SIGHUP)
        wait_for(lambda: len(r.control({"cmd": "status"})["problems"]) == 2, "a second problem")
        status = r.control({"cmd": "status"})
        assert status["state"] == "running" and status["watchers"] == ["app"]
        assert all("reload failed: the new config is invalid or could not be read" in p
                   for p in status["problems"])
        with open(tmp_path / "app.log", "a") as fh:
            fh.write("ERROR still watched as before\n")
        wait_for(lambda: r.matches("app"), "the old config's match")
        conf["watchers"][0]["pattern"] = "ERROR|FATAL"  # fixed: the next reload applies it
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        wait_for(lambda: not r.control({"cmd": "status"})["problems"],
                 "the failed reloads' problems gone with the one that applied")
    finally:
        assert r.stop() == 0
    err = r.stderr()
    assert "invalid regex" in err and "config file not found" in err and "Traceback" not in err


HUNG_READ = """
import os, sys, threading
import watchrun.config, watchrun.runtime.workers
watchrun.runtime.workers.GRACE_S = 1.0  # (5 s: the exit's wait for a call still running)
real = watchrun.config.load_config
def load_config(*args, **kwargs):
    if os.path.exists("hang"):  # from now on the config's file system never answers
        print("the config read hangs", file=sys.stderr, flush=True)
        threading.Event().wait()
    return real(*args, **kwargs)
watchrun.config.load_config = load_config
sys.argv = ["watchrun", *sys.argv[1:]]
from watchrun.cli import entry
sys.exit(entry())
"""
"""`watchrun` whose config reads never return once the file `hang` exists."""


HUP_IN_START = HUNG_READ.replace("    return real(*args, **kwargs)\n", """\
    config = real(*args, **kwargs)
    import signal
    os.kill(os.getpid(), signal.SIGHUP)  # a SIGHUP while the runner starts,
    open("hang", "w").close()  # whose reload will never read its config
    return config
""")
"""`watchrun` sent a SIGHUP as it starts, whose reload's config read never returns."""


@pytest.mark.parametrize("hup", ["running", "during the start"])
def test_a_stop_gives_up_a_reload_whose_config_read_never_returns(tmp_path: Path,
                                                                    hup: str) -> None:
    """A SIGHUP's config read on a mount that stopped answering never returned, and no signal
    was heard while a reload ran: SIGTERM did nothing, the runner had to be SIGKILLed (its
    commands orphaned to the guardian). The stop now gives the reload up. A SIGHUP during the
    start is one reload after it, which ran outside that watch (seen as a flake: the SIGHUP
    sent to a running runner came as the start ended)."""
    from test_stuck_calls import seamed_runner

    (tmp_path / "app.log").write_text("")
    cfg = write_config(tmp_path, {"watchers": [{"id": "a", "path": "app.log", "pattern": "x"}]})
    with seamed_runner(HUNG_READ if hup == "running" else HUP_IN_START, cfg) as (proc, err):
        wait_for(lambda: "1 watcher, 0 agents running" in "".join(err), "the start")
        if hup == "running":
            (tmp_path / "hang").touch()
            proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "the config read hangs" in "".join(err), "the reload's read")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 3  # (a call still running at the exit: said, exit 3)
    said = "".join(err)
    assert "reload given up: SIGTERM came before the new config was read" in said
    assert "[a] stopped (shutdown)" in said


RELOAD_SAID = HUNG_READ.replace("from watchrun.cli import entry\n", """\
import watchrun.runtime.supervisor as supervisor
reload = supervisor.Supervisor.reload
async def said(self):
    print("a reload begins", file=sys.stderr, flush=True)
    await reload(self)
supervisor.Supervisor.reload = said
from watchrun.cli import entry
""")
"""HUNG_READ that says on stderr when a reload begins (before it waits for anything)."""


def test_a_stop_gives_up_a_reload_waiting_for_a_change_under_way(tmp_path: Path) -> None:
    """A SIGHUP while a `watchrun stop` still stopped a command (it ignores SIGTERM: its
    stopTimeout runs out), then SIGTERM: the reload, waiting for that change, was not given up
    (only one reading its config was), so it read the config after the stop was heard, and
    when that read never returned the runner ignored SIGTERM for good (found by an explorer,
    2026-12-06)."""
    from test_stuck_calls import seamed_runner

    (tmp_path / "app.log").write_text("")
    cfg = write_config(tmp_path, {"limits": {"stopTimeout": "3s"}, "watchers": [
        {"id": "a", "command": "trap '' TERM; echo up; while :; do sleep 0.1; done",
         "pattern": "up"},
        {"id": "f", "path": "app.log", "pattern": "x"}]})
    snapshot = tmp_path / ".watchrun" / "state" / "a.status.json"
    with seamed_runner(RELOAD_SAID, cfg) as (proc, err):
        wait_for(lambda: "2 watchers, 0 agents running" in "".join(err), "the start")
        stopping = subprocess.Popen([watchrun_bin(), "stop", "a", "-c", str(cfg)],
                                    cwd=tmp_path, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: snapshot.exists() and  # (rewritten as its status changes)
                     json.loads(snapshot.read_bytes())["status"] == "stopping",
                     "the stop request under way")
            (tmp_path / "hang").touch()
            proc.send_signal(signal.SIGHUP)
            wait_for(lambda: "a reload begins" in "".join(err), "the reload, waiting")
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == 0
        finally:
            stopping.wait(timeout=20)
    said = "".join(err)
    assert "reload given up: SIGTERM came before the new config was read" in said
    assert "the config read hangs" not in said


def test_a_reload_stops_its_changed_commands_together(tmp_path: Path) -> None:
    """The reload stopped the watchers it changed one by one: three commands that each take
    their time to end (stopTimeout 30 s) held it, and every signal behind it, for the sum.
    Each is sent its SIGTERM at once now, as the runner's stop does."""
    go = tmp_path / "go"
    script = (f"trap 'touch {tmp_path}/term.%d; until [ -e {go} ]; do sleep 0.02; done; "
              "exit 0' TERM; echo up; while :; do sleep 0.02; done")
    conf: dict[str, Any] = {"limits": {"stopTimeout": "30s"}, "watchers": [
        {"id": f"c{i}", "command": script % i, "pattern": "up"} for i in range(3)]}
    r = LiveRunner(write_config(tmp_path, conf))
    try:
        wait_for(lambda: all(r.matches(f"c{i}") for i in range(3)), "the commands up")
        for w in conf["watchers"]:
            w["pattern"] = "up|down"
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        wait_for(lambda: len(list(tmp_path.glob("term.*"))) == 3, "a SIGTERM to each of them")
        go.touch()
        r.wait_log("reloaded: 3 watchers running")
    finally:
        assert r.stop() == 0


def test_status_lists_the_last_20_problems_and_counts_the_older_ones(tmp_path: Path) -> None:
    """`status` keeps the newest 20 problems; past them, the older ones were let go without a
    word, so a runner with 23 failed reloads looked like one with 20. They are counted in
    `problemsDropped`, and every one is in the log."""
    r, config, conf = app_runner(tmp_path)
    try:
        r.wait_running()
        assert r.control({"cmd": "status"})["problemsDropped"] == 0
        config.write_text("watchers: [")
        for n in range(1, 24):  # one at a time: a SIGHUP during a reload is one more after it
            r.send(signal.SIGHUP)
            wait_for(lambda n=n: r.stderr().count("reload failed") == n, f"failed reload {n}")
        status = r.control({"cmd": "status"})
        assert len(status["problems"]) == 20 and status["problemsDropped"] == 3
        assert status["state"] == "running" and status["watchers"] == ["app"]
        write_config(tmp_path, conf)  # fixed: a reload that applies clears them, dropped too
        r.send(signal.SIGHUP)

        def cleared() -> bool:
            now = r.control({"cmd": "status"})
            return (now["problems"], now["problemsDropped"]) == ([], 0)
        wait_for(cleared, "the failed reloads' problems gone, the dropped ones too")
    finally:
        assert r.stop() == 0


def test_watchrun_status_without_an_id_shows_a_failed_reload(tmp_path: Path) -> None:
    """README: a reload that fails is kept out and `status` lists it among the runner's
    problems; but `watchrun status` wanted a watcher id ("the following arguments are required:
    id"), so after `systemctl reload` no command showed that the reload had failed. Without an
    id it shows the live runner's state, watchers and problems; with no runner, exit 3. (The
    config no longer loads, so the output dir is named: `-c` would fail on it.)"""
    def status(*more: str) -> subprocess.CompletedProcess[str]:
        return inproc(tmp_path, "status", "--output-dir", ".watchrun", *more)  # (a read)

    r, config, _ = app_runner(tmp_path)
    try:
        r.wait_running()
        fine = status()
        assert (fine.returncode, fine.stdout.splitlines()[1:]) == (0, [
            f"runner: pid {r.pid}, config {config}", "problems: none"]), fine
        assert fine.stdout.startswith("runner running: 1 watcher, output dir ")
        config.write_text("watchers: [")
        r.send(signal.SIGHUP)
        r.wait_log("reload failed")
        failed = status()
        assert failed.returncode == 0, failed.stderr
        said = failed.stdout.splitlines()
        assert said[2] == "problems: 1" and said[3].startswith("  - reload failed"), said
        doc = json.loads(status("--json").stdout)
        assert doc["state"] == "running" and doc["watchers"] == ["app"]
        assert len(doc["problems"]) == 1 and doc["problems"][0] in said[3]
    finally:
        assert r.stop() == 0
    gone = status()
    assert gone.returncode == 3 and "no live runner" in gone.stderr, gone



def test_a_reload_that_moves_the_output_dir_is_refused_whole_and_said_so(
        tmp_path: Path) -> None:
    """A tester's F3: a new config with another `output.dir` was refused in the log only, and
    counted an ok reload: `status` had no problem and the metrics said the last reload worked,
    though nothing of the new config (a changed pattern too) ran."""
    r, _, conf = app_runner(tmp_path)
    try:
        r.wait_running()
        conf["output"] = {"dir": str(tmp_path / "other")}
        conf["watchers"][0]["pattern"] = "FATAL"
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        wait_for(lambda: r.control({"cmd": "status"})["problems"], "a problem in status")
        (problem,) = r.control({"cmd": "status"})["problems"]
        assert problem.endswith(
            f"reload failed: output.dir cannot change while running ({tmp_path}/.watchrun → "
            f"{tmp_path}/other): restart the runner; keeping the running one"), problem
        with open(tmp_path / "app.log", "a") as fh:
            fh.write("ERROR still watched as before\nFATAL not yet\n")
        wait_for(lambda: r.matches("app"), "the old config's match")
        assert [m["line"] for m in r.matches("app")] == ["ERROR still watched as before"]
        assert not (tmp_path / "other").exists()
    finally:
        assert r.stop() == 0


def test_a_stop_while_a_reload_is_applied_starts_nothing_more(tmp_path: Path) -> None:
    """A tester's F8: a SIGTERM while a reload waited for a changed command's stop let the
    reload start the new command after "stopping (SIGTERM)": a deploy run once more by a runner
    on its way out. Now the reload starts nothing more and says so."""
    stub = ("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('hi', flush=True)\nwhile True: time.sleep(1)")
    conf: dict[str, Any] = {"limits": {"stopTimeout": "2s"}, "watchers": [
        {"id": "stub", "command": ["python3", "-c", stub], "pattern": "hi"},
        {"id": "t", "command": "while :; do echo tick; sleep 0.2; done", "pattern": "tick"}]}
    config = write_config(tmp_path, conf)
    r = LiveRunner(config)
    try:
        wait_for(lambda: r.matches("stub") and r.matches("t"), "both commands up")
        conf["watchers"][0]["command"][2] = stub.replace("'hi'", "'ho'")
        conf["watchers"][1]["command"] = "while :; do echo tock; sleep 0.2; done"
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        r.wait_log("[t] config changed; stopped")  # stub waits out its stopTimeout meanwhile
        r.send(signal.SIGTERM)
        assert r.proc.wait(timeout=30) == 0
    finally:
        r.close()
    err = r.stderr()
    assert ("reload cut short: SIGTERM came while it was applied; 2 new or changed watchers "
            "not started") in err, err
    assert "started run 2" not in err and err.count("started run 1") == 2, err
    for wid in ("stub", "t"):
        assert [x["kind"] for x in r.records(wid) if x["kind"] in ("start", "stop")] == [
            "start", "stop"], r.records(wid)


@pytest.mark.parametrize("signals", [1, 2])
def test_a_stop_during_a_reloads_apply_ends_within_stoptimeout(tmp_path: Path,
                                                               signals: int) -> None:
    """A SIGTERM while a reload waited out the grace of a changed command gave the others a
    fresh stopTimeout after it (the runner took twice stopTimeout to end), and a second SIGTERM
    then was heard by no one (a tester's F3). What remains is now killed stopTimeout after the
    first signal, and at once after a second one."""
    script = ("trap 'touch termed.{}' TERM; echo up; while :; do sleep 0.05; done")
    conf: dict[str, Any] = {"limits": {"stopTimeout": "3s"}, "watchers": [
        {"id": w, "command": script.format(w), "pattern": "up"} for w in ("a", "b")]}
    r = LiveRunner(write_config(tmp_path, conf))
    try:
        wait_for(lambda: r.matches("a") and r.matches("b"), "the commands up")
        conf["watchers"][0]["pattern"] = "up|down"
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        wait_for((tmp_path / "termed.a").exists, "the reload's SIGTERM to a")
        began = time.monotonic()
        r.send(signal.SIGTERM)
        r.wait_log("SIGTERM during a reload: stopping once what it stops has ended")
        r.send(signal.SIGHUP)  # (nothing: the runner stops next)
        r.wait_log("SIGHUP while stopping: nothing is reloaded")
        if signals == 2:  # (each waits for the one before: sent at once, two can be one)
            r.send(signal.SIGTERM)
        assert r.proc.wait(timeout=20) == 0
        took = time.monotonic() - began
    finally:
        r.stop()
    said = r.stderr()
    if signals == 1:
        assert 2 < took < 5, said  # (6 s before: the reload's 3 s, then b's 3 s)
        assert "stopTimeout (3 s) has passed since SIGTERM, which came during a reload" in said
    else:
        assert took < 2, said  # (not the stopTimeout of the first)
        assert "second signal: killing what remains now" in said
    assert said.count("killing what remains") == 1, said
    assert [r["kind"] for r in r.records("b")[-2:]] == ["exit", "stop"]
    assert r.records("b")[-2]["signal"] == "SIGKILL"
