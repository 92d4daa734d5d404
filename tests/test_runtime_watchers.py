"""Runtime watchers (`watchrun add`), `start`/`restart`, and the live `list`, against real runners:
validation as `validate` does it, duplicate ids, maxWatchers, wake, reload, a runner restart.

The `watchrun` commands that ask the runner or read (`add`, `stop`, `restart`, `clear`,
`list`, `validate`) run in this process (tests/inproc.py: the same `main`, stdout, stderr and
status, without a new interpreter each), `start` too; one real call each of `add`, `list`,
`restart` and `stop` runs as a process of its own (`wr_proc`)."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

from inproc import inproc
from liverunner import LiveRunner, cli, wait_for, write_config
from recordcheck import validate_records


def wr(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`watchrun ARGS` run from `cwd` (its ./watch.yaml is the config), in this process."""
    return inproc(cwd, *args)


def wr_proc(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`watchrun ARGS` run from `cwd` as a process of its own (liverunner.cli)."""
    return cli(*args, cwd=cwd, timeout=60)


def listed(r: LiveRunner) -> dict[str, dict[str, Any]]:
    reply = r.control({"cmd": "list"})
    assert reply["ok"], reply
    return {w["id"]: w for w in reply["watchers"]}


def lines_of(r: LiveRunner, wid: str) -> list[str]:
    return [m["line"] for m in r.matches(wid)]


MOCK_AGENT = {"name": "triage", "provider": "mock"}


def test_add_follows_a_file_and_list_says_where_each_came_from(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"watchers": [
        {"id": "cfg", "command": "exec sleep 600", "pattern": "ERROR"}]})
    (tmp_path / "logs").mkdir()
    app = tmp_path / "logs" / "app.log"
    app.write_text("ERROR before the add: not matched (followed from the end)\n")
    r = LiveRunner(config)
    try:
        r.wait_running()
        p = wr_proc(tmp_path / "logs", "add", "app", "--path", "app.log", "--pattern", "error",
               "--exclude", "ignore", "--label", "the app", "-c", str(config), "--json")
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert doc["id"] == "app" and doc["added"] is True
        rec = doc["watcher"]  # the reply comes once the file's start position is held
        assert (rec["origin"], rec["status"], rec["kind"], rec["label"]) == \
            ("runtime", "running", "file", "the app")
        assert rec["source"] == str(app)  # relative to where `add` ran, not the runner
        with app.open("a") as f:
            f.write("ERROR one\nerror two, ignore me\nINFO three\nERROR four\n")
        wait_for(lambda: lines_of(r, "app") == ["ERROR one", "ERROR four"], "two matches")
        validate_records(r.out / "watchers" / "app.jsonl")
        wait_for(lambda: listed(r)["app"]["matchCount"] == 2, "the count")
        both = listed(r)
        assert both["cfg"]["origin"] == "config" and both["app"]["origin"] == "runtime"
        assert isinstance(both["cfg"]["pid"], int) and both["app"]["pid"] is None
        for w in both.values():
            assert w["restarts"] == 0 and w["lastError"] is None and w["uptimeS"] >= 0
            assert w["startedAt"] and w["live"] is True
        assert both["app"]["linesRead"] == 4 and both["app"]["lastMatchAt"]
        table = wr_proc(tmp_path, "list")  # the live runner answers `watchrun list`
        assert table.returncode == 0
        row = next(x for x in table.stdout.splitlines() if x.startswith("app "))
        assert "runtime" in row and "running" in row
        assert "ORIGIN" in table.stdout and "UPTIME" in table.stdout
    finally:
        assert r.stop() == 0


def bad_watchers(tmp_path: Path) -> list[dict[str, Any]]:
    log = str(tmp_path / "x.log")
    return [
        {"id": "b1", "path": log, "pattern": "(", "wake": "nobody"},
        {"id": "b2", "path": log, "command": "true", "pattern": "x", "exclude": ["[", "ok"]},
        {"id": "b3", "command": "true", "pattern": "a(?=b)", "fromStart": True},
        {"id": "b4", "path": log, "pattern": "x", "wake": "triag", "patern": "y"},
        {"id": "b5", "command": ["sh", "-c", "true"], "pattern": "x", "schedule": "every day",
         "restart": "sometimes", "restartDelay": "soon"},
        {"id": "-bad id", "path": log, "pattern": "x", "caseSensitive": "yes"},
    ]


def test_add_refuses_what_validate_refuses_with_the_same_messages(tmp_path: Path) -> None:
    """Each bad watcher is sent to the live runner and, as the only watcher of a config beside
    the same agents, to `watchrun validate`: the same paths, messages and severities."""
    config = write_config(tmp_path, {"agents": [MOCK_AGENT], "watchers": [
        {"id": "cfg", "path": "cfg.log", "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        for bad in bad_watchers(tmp_path):
            reply = r.control({"cmd": "add", "watcher": bad})
            assert reply["ok"] is False and reply["error"]["code"] == "invalid", reply
            got = [(d["path"], d["message"], d["severity"])
                   for d in reply["error"]["diagnostics"]]
            one = write_config(tmp_path, {"agents": [MOCK_AGENT], "watchers": [bad]},
                               name="one.yaml")
            v = wr(tmp_path, "validate", "-c", str(one), "--format", "json")
            assert v.returncode == 2
            want = [(d["path"], d["message"], d["severity"]) for d in
                    json.loads(v.stdout)["diagnostics"] if d["path"].startswith("watchers[0]")]
            assert sorted(got) == sorted(want) and got, bad
        p = wr(tmp_path, "add", "b1", "--path", "x.log", "--pattern", "(", "--wake", "nobody")
        assert p.returncode == 2 and p.stdout == ""
        assert "error: watchers[0].pattern: invalid regex \"(\"" in p.stderr
        assert "error: watchers[0].wake: no agent named `nobody`" in p.stderr
        assert set(listed(r)) == {"cfg"}  # nothing was started, nothing was written
        assert sorted(x.name for x in (r.out / "watchers").iterdir()) == ["cfg.jsonl"]
    finally:
        assert r.stop() == 0


def test_a_relative_path_on_the_socket_is_refused_and_warnings_come_back(
        tmp_path: Path) -> None:
    config = write_config(tmp_path, {"watchers": [{"id": "cfg", "path": "c.log",
                                                   "pattern": "x"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        reply = r.control({"cmd": "add", "watcher": {"id": "rel", "command": "true",
                                                     "cwd": "sub", "pattern": "x"}})
        (d,) = reply["error"]["diagnostics"]
        assert d["path"] == "watchers[0].cwd" and "not an absolute path" in d["message"]
        action = {"name": "a", "type": "exec", "command": ["true"], "cwd": "rel/dir"}
        reply = r.control({"cmd": "add", "watcher": {"id": "act", "path": str(tmp_path / "a.log"),
                                                     "pattern": "x", "actions": [action]}})
        (d,) = reply["error"]["diagnostics"]  # (resolved against the runner's folder before)
        assert d["path"] == "watchers[0].actions[0].cwd" and "not an absolute" in d["message"]
        reply = r.control({"cmd": "add", "watcher": {  # (its own records: helper-92's F7)
            "id": "selfw", "path": str(r.out / "watchers" / "selfw.jsonl"), "pattern": "."}})
        (d,) = reply["error"]["diagnostics"]
        assert d["path"] == "watchers[0].path" and d["message"] == (
            f"{r.out}/watchers/selfw.jsonl is one of the runner's own files in the output dir "
            f"{r.out}: a watcher of its records would record each match again, without end "
            "(`watchrun matches --follow ID` follows a watcher's records)")
        reply = r.control({"cmd": "add", "watcher": {"id": "w", "path": str(tmp_path / "w.log"),
                                                     "pattern": "x", "wake": True}})
        assert reply["ok"] and [(w["path"], w["severity"]) for w in reply["warnings"]] == \
            [("watchers[0].wake", "warning")]  # wake: true, but there are no agents
        p = wr(tmp_path, "add", "w2", "--path", "w.log", "--pattern", "x", "--wake", "a")
        assert p.returncode == 2 and "the config has no agents" in p.stderr
    finally:
        assert r.stop() == 0


def test_add_refuses_an_id_in_use_and_more_than_max_watchers(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"limits": {"maxWatchers": 2}, "watchers": [
        {"id": "cfg", "path": "cfg.log", "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        assert wr(tmp_path, "add", "one", "--path", "one.log", "--pattern", "x").returncode == 0
        for wid in ("cfg", "one", "ONE"):  # ids are file names: unique ignoring case
            p = wr(tmp_path, "add", wid, "--path", "z.log", "--pattern", "x", "--json")
            err = json.loads(p.stdout)["error"]
            assert (p.returncode, err["code"]) == (2, "exists"), p.stdout
        p = wr(tmp_path, "add", "two", "--command", "sleep 600", "--pattern", "x")
        assert p.returncode == 3 and "limits.maxWatchers is 2" in p.stderr
        assert not (r.out / "watchers" / "two.jsonl").exists()
        assert wr(tmp_path, "stop", "one").returncode == 0  # a stopped one holds nothing
        p = wr(tmp_path, "add", "one", "--path", "z.log", "--pattern", "x")
        assert p.returncode == 2 and "in use" in p.stderr  # ...but keeps its id until cleared
        p = wr(tmp_path, "add", "two", "--command", "sleep 600", "--pattern", "x")
        assert p.returncode == 0, p.stderr
        p = wr(tmp_path, "start", "one")  # ...and starting it again needs room again
        assert p.returncode == 3 and "limits.maxWatchers" in p.stderr
        assert wr(tmp_path, "stop", "two").returncode == 0
        p = wr(tmp_path, "start", "one", "--json")  # with its own settings, still `runtime`
        w = json.loads(p.stdout)["watcher"]
        assert (p.returncode, w["origin"], w["source"], w["restarts"]) == \
            (0, "runtime", str(tmp_path / "one.log"), 1)
        assert json.loads(wr(tmp_path, "clear", "--json").stdout)["cleared"] == 1  # two
        p = wr(tmp_path, "start", "two")
        assert p.returncode == 2 and "no watcher 'two'" in p.stderr  # forgotten for good
        assert set(listed(r)) == {"cfg", "one"}
    finally:
        assert r.stop() == 0


def test_add_refuses_a_previous_id_in_use(tmp_path: Path) -> None:
    """A config's `previousId: app` next to a watcher `app` is an error; an `add` with it was
    accepted and renamed app's checkpoint to the new id while app read on."""
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    (tmp_path / "app.log").write_text("one\n")
    (tmp_path / "one.log").write_text("two\n")
    r = LiveRunner(config)
    try:
        r.wait_running()
        state = r.out / "state"
        wait_for(lambda: (state / "app.checkpoint.json").exists(), "app's checkpoint")
        assert wr(tmp_path, "add", "one", "--path", "one.log", "--pattern", "x").returncode == 0
        wait_for(lambda: (state / "one.checkpoint.json").exists(), "one's checkpoint")
        for prev, other, origin in (("app", "app", "config"), ("APP", "app", "config"),
                                    ("one", "one", "runtime")):
            reply = r.control({"cmd": "add", "watcher": {
                "id": "renamed", "path": str(tmp_path / "app.log"), "pattern": "x",
                "previousId": prev}})
            assert reply["error"]["code"] == "invalid", reply
            assert reply["error"]["diagnostics"] == [{
                "path": "watchers[0].previousId", "severity": "error", "message":
                f"{prev!r} is the id of a {origin} watcher (`{other}`), whose checkpoint it "
                "reads on with; previousId names the id this watcher had before it was renamed "
                "(a checkpoint no watcher uses)"}]
        assert sorted(p.name for p in state.glob("*.checkpoint.json")) == [
            "app.checkpoint.json", "one.checkpoint.json"]
        assert set(listed(r)) == {"app", "one"}
        reply = r.control({"cmd": "add", "watcher": {  # an id no watcher uses: adopted
            "id": "renamed", "path": str(tmp_path / "app.log"), "pattern": "x",
            "previousId": "gone"}})
        assert reply["ok"], reply
    finally:
        assert r.stop() == 0


def test_a_runtime_watcher_wakes_an_agent(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"agents": [MOCK_AGENT], "watchers": [
        {"id": "cfg", "path": "cfg.log", "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        sub = tmp_path / "sub"
        sub.mkdir()
        p = wr(sub, "add", "w1", "--command", "echo FATAL in $(pwd)", "--pattern",
               "FATAL", "--wake", "triage", "-c", str(config))
        assert p.returncode == 0, p.stderr
        wait_for(lambda: lines_of(r, "w1"), "the command's match")
        assert lines_of(r, "w1") == [f"FATAL in {sub}"]  # it ran where `add` was run

        def delivered() -> bool:
            return any(x["kind"] == "delivery" and x.get("watcher") == "w1"
                       for x in r.records("triage", "agents"))
        wait_for(delivered, "the match delivered to the agent")
    finally:
        assert r.stop() == 0


def test_start_and_restart_a_command_watcher_that_exited(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"watchers": [
        {"id": "job", "command": "echo ERROR run; exit 3", "pattern": "ERROR"},
        {"id": "srv", "command": "echo ERROR up; exec sleep 600", "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        wait_for(lambda: listed(r)["job"]["status"] == "exited", "the job to exit")
        job = listed(r)["job"]
        assert job["lastError"] == "run 1 exited with code 3" and job["exitCode"] == 3
        p = wr(tmp_path, "start", "job", "--json")
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert (doc["started"], doc["wasRunning"], doc["watcher"]["restarts"]) == \
            (True, False, 1)
        wait_for(lambda: len(r.matches("job")) == 2, "the second run's match")
        wait_for(lambda: listed(r)["job"]["status"] == "exited", "the second run to end")
        kinds = [x["kind"] for x in r.records("job")]
        assert kinds == ["start", "match", "exit", "stop", "start", "match", "exit"]
        assert r.records("job")[3]["reason"] == "restart"

        wait_for(lambda: listed(r)["srv"]["pid"], "srv running")
        pid = listed(r)["srv"]["pid"]
        p = wr(tmp_path, "start", "srv")  # running already: nothing to do, and it says so
        assert p.returncode == 0 and "running already" in p.stdout
        assert listed(r)["srv"]["pid"] == pid
        p = wr(tmp_path, "restart", "srv", "--json")
        assert p.returncode == 0 and json.loads(p.stdout)["wasRunning"] is True
        srv = listed(r)["srv"]
        assert srv["pid"] not in (None, pid) and srv["restarts"] == 1
        assert srv["lastError"] is None  # stopping it on request is not an error of it
        wait_for(lambda: len(r.matches("srv")) == 2, "the restarted command's match")

        for cmd in ("start", "restart"):
            p = wr(tmp_path, cmd, "nosuch", "--json")
            assert p.returncode == 2 and json.loads(p.stdout)["error"]["code"] == "not_found"
    finally:
        assert r.stop() == 0


def test_restart_of_a_file_watcher_keeps_its_position(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.touch()
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        with log.open("a") as f:
            f.writelines(f"ERROR {i}\n" for i in range(3))
        wait_for(lambda: len(r.matches("app")) == 3, "three matches")
        assert wr_proc(tmp_path, "restart", "app").returncode == 0
        with log.open("a") as f:
            f.writelines(f"ERROR {i}\n" for i in range(3, 6))
        wait_for(lambda: len(r.matches("app")) >= 6, "six matches")
        assert wr_proc(tmp_path, "stop", "app").returncode == 0
        with log.open("a") as f:  # written while it is stopped: read when it starts again
            f.writelines(f"ERROR {i}\n" for i in range(6, 8))
        assert wr(tmp_path, "start", "app").returncode == 0
        wait_for(lambda: len(r.matches("app")) >= 8, "eight matches")
        assert lines_of(r, "app") == [f"ERROR {i}" for i in range(8)]  # none twice
        assert [m["lineNo"] for m in r.matches("app")] == list(range(1, 9))
        assert listed(r)["app"]["restarts"] == 2 and listed(r)["app"]["origin"] == "config"
    finally:
        assert r.stop() == 0


def test_reload_keeps_runtime_watchers_and_a_new_runner_has_none(tmp_path: Path) -> None:
    base = {"watchers": [{"id": "cfg", "path": "cfg.log", "pattern": "ERROR"}]}
    config = write_config(tmp_path, base)
    r = LiveRunner(config)
    try:
        r.wait_running()
        assert wr(tmp_path, "add", "rt", "--command", "echo ERROR rt; exec sleep 600",
                  "--pattern", "ERROR").returncode == 0
        wait_for(lambda: listed(r)["rt"]["pid"], "rt running")
        before = listed(r)["rt"]
        write_config(tmp_path, {"watchers": [*base["watchers"],
                                             {"id": "more", "path": "m.log", "pattern": "x"}]})
        r.send(signal.SIGHUP)
        wait_for(lambda: "more" in listed(r), "the new config watcher")
        after = listed(r)["rt"]
        assert (after["origin"], after["status"], after["pid"], after["startedAt"]) == \
            ("runtime", "running", before["pid"], before["startedAt"])  # untouched
        assert len(r.matches("rt")) == 1
        # A limit read at a start restarts every watcher, the added one too, still `runtime`.
        write_config(tmp_path, {"limits": {"maxLineBytes": 4096}, "watchers": [
            *base["watchers"], {"id": "more", "path": "m.log", "pattern": "x"}]})
        r.send(signal.SIGHUP)
        wait_for(lambda: listed(r)["rt"]["restarts"] == 1 and listed(r)["rt"]["pid"], "rt again")
        assert listed(r)["rt"]["origin"] == "runtime" and listed(r)["rt"]["pid"] != before["pid"]
        # A config that now names the id takes it over (and says so).
        write_config(tmp_path, {"watchers": [*base["watchers"],
                                             {"id": "rt", "path": "rt.log", "pattern": "x"}]})
        r.send(signal.SIGHUP)
        wait_for(lambda: listed(r)["rt"]["kind"] == "file", "the config's rt")
        assert listed(r)["rt"]["origin"] == "config"
        problems = r.control({"cmd": "status"})["problems"]
        assert any("replaces the one added at runtime" in x for x in problems)
        assert wr(tmp_path, "add", "rt2", "--path", "x.log", "--pattern", "x").returncode == 0
    finally:
        assert r.stop() == 0
    r2 = LiveRunner(config)  # runtime watchers are in no file: a new runner has none
    try:
        r2.wait_running()
        assert set(listed(r2)) == {"cfg", "rt"}
        p = wr(tmp_path, "list", "--json")
        assert {w["id"] for w in json.loads(p.stdout)["watchers"]} == {"cfg", "rt"}
    finally:
        assert r2.stop() == 0
    p = wr(tmp_path, "list", "--json")  # no runner: the snapshots, each stopped
    snaps = {w["id"]: w for w in json.loads(p.stdout)["watchers"]}
    assert snaps["rt2"]["origin"] == "runtime" and snaps["rt2"]["status"] == "stopped"


def test_add_is_refused_when_watchers_are_disabled(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"limits": {"enabled": False}, "watchers": [
        {"id": "cfg", "path": "c.log", "pattern": "x"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        p = wr(tmp_path, "add", "a", "--path", "a.log", "--pattern", "x", "--json")
        err = json.loads(p.stdout)["error"]
        assert (p.returncode, err["code"]) == (3, "refused")
        assert "disabled by `limits.enabled: false`" in err["message"]
    finally:
        assert r.stop() == 0


def test_add_is_refused_by_a_once_runner(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"watchers": [
        {"id": "slow", "command": "exec sleep 600", "pattern": "x"}]})
    r = LiveRunner(config, "--once")
    try:
        r.wait_running()  # (the socket file is there a moment before it takes connections)
        wait_for(lambda: listed(r).get("slow"), "the once runner's command")
        reply = r.control({"cmd": "add", "watcher": {"id": "a", "path": "/tmp/a",
                                                     "pattern": "x"}})
        assert reply["error"]["code"] == "refused" and "--once" in reply["error"]["message"]
    finally:
        r.stop()


def test_an_added_watcher_whose_jsonl_cannot_be_opened_leaves_nothing(tmp_path: Path) -> None:
    """A symlink in place of its JSONL (never followed under the output dir): the add fails
    with the reason, and nothing is left running, listed or written."""
    config = write_config(tmp_path, {"watchers": [{"id": "cfg", "path": "c.log",
                                                   "pattern": "x"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        target = tmp_path / "elsewhere"
        target.write_text("")
        (r.out / "watchers" / "evil.jsonl").symlink_to(target)
        p = wr(tmp_path, "add", "evil", "--path", "e.log", "--pattern", "x", "--json")
        err = json.loads(p.stdout)["error"]
        assert (p.returncode, err["code"]) == (3, "start_failed")
        assert "symlink" in err["message"]
        assert set(listed(r)) == {"cfg"} and target.read_text() == ""
        (r.out / "watchers" / "evil.jsonl").unlink()  # the id is free: nothing held it
        assert wr(tmp_path, "add", "evil", "--path", "e.log", "--pattern", "x").returncode == 0
    finally:
        assert r.stop() == 0


def test_a_reloaded_watcher_renamed_from_a_runtime_one_takes_its_place(tmp_path: Path) -> None:
    """A config watcher with `previousId: one`, `one` added at runtime: the reload started it on
    one's checkpoint (renamed away) while `one` read on beside it, no problem said; each line
    of one.log was then matched twice, in two streams. A config id `APP` beside a runtime `app`
    was let run beside it too."""
    base = {"watchers": [{"id": "cfg", "path": "cfg.log", "pattern": "ERROR"}]}
    config = write_config(tmp_path, base)
    (tmp_path / "one.log").write_text("before the add\n")
    r = LiveRunner(config)
    try:
        r.wait_running()
        state = r.out / "state"
        assert wr(tmp_path, "add", "one", "--path", "one.log", "--pattern", "ERROR").returncode == 0
        wait_for(lambda: (state / "one.checkpoint.json").exists(), "one's checkpoint")
        with open(tmp_path / "one.log", "a") as f:
            f.write("ERROR 1\n")
        wait_for(lambda: len(r.matches("one")) == 1, "one's match")
        write_config(tmp_path, {"watchers": [*base["watchers"], {
            "id": "two", "path": "one.log", "pattern": "ERROR", "previousId": "one"}]})
        r.send(signal.SIGHUP)
        wait_for(lambda: "one" not in listed(r) and  # (listed as soon as it starts)
                 listed(r).get("two", {}).get("status") == "running", "two in one's place")
        assert listed(r)["two"]["origin"] == "config"
        assert (state / "two.checkpoint.json").exists()
        assert not (state / "one.checkpoint.json").exists()
        problems = r.control({"cmd": "status"})["problems"]
        assert any(x.startswith("one: reload: the config's watcher two has this id as its "
                                "previousId") for x in problems), problems
        with open(tmp_path / "one.log", "a") as f:
            f.write("ERROR 2\n")
        wait_for(lambda: len(r.matches("two")) == 1, "two's match")
        assert [m["line"] for m in r.matches("two")] == ["ERROR 2"]  # not ERROR 1 again
        assert [m["line"] for m in r.matches("one")] == ["ERROR 1"]  # not ERROR 2 as well
        p = wr(tmp_path, "start", "one")
        assert p.returncode == 2 and "no watcher 'one'" in p.stderr
        p = wr(tmp_path, "add", "ONE", "--path", "one.log", "--pattern", "x")  # (a retired name)
        assert p.returncode == 2 and "watcher id `ONE` is the previousId of the config's " \
            "watcher two" in p.stderr
        # An id that differs only in case (both JSONL files share a name where case is not
        # told apart, as `add` refuses): the config's takes its place too.
        assert wr(tmp_path, "add", "app", "--path", "one.log", "--pattern", "x").returncode == 0
        write_config(tmp_path, {"watchers": [*base["watchers"], {
            "id": "two", "path": "one.log", "pattern": "ERROR"},
            {"id": "APP", "path": "one.log", "pattern": "y"}]})
        r.send(signal.SIGHUP)
        wait_for(lambda: "app" not in listed(r) and "APP" in listed(r), "APP in app's place")
        problems = r.control({"cmd": "status"})["problems"]
        assert any(x.startswith("app: reload: the config's watcher APP differs from this id "
                                "only in case") for x in problems), problems
        # ... and `app` is forgotten for good, its checkpoint too (it stayed, and `app` added
        # again read on from it: it matched a line written before the add)
        assert not (state / "app.checkpoint.json").exists()
        write_config(tmp_path, base)
        r.send(signal.SIGHUP)
        wait_for(lambda: listed(r).get("APP", {}).get("status") == "stopped", "APP removed")
        assert wr(tmp_path, "clear").returncode == 0  # (APP forgotten: its id is free)
        with open(tmp_path / "one.log", "a") as f:
            f.write("x written before the add\n")
        assert wr(tmp_path, "add", "app", "--path", "one.log", "--pattern", "^x").returncode == 0
        wait_for(lambda: listed(r).get("app", {}).get("status") == "running", "app again")
        with open(tmp_path / "one.log", "a") as f:
            f.write("x written after it\n")
        wait_for(lambda: r.matches("app"), "app's match")
        assert [m["line"] for m in r.matches("app")] == ["x written after it"]
    finally:
        assert r.stop() == 0


def test_a_reloaded_watcher_whose_jsonl_is_a_symlink_is_not_started(tmp_path: Path) -> None:
    """docs/security.md: on a reload, a new watcher whose JSONL is a planted symlink is not
    started, the target is untouched, the log names the path and `status` lists the problem;
    the watchers that were running go on. It is listed `stopped`, with why."""
    base = {"watchers": [{"id": "cfg", "path": "c.log", "pattern": "x"}]}
    config = write_config(tmp_path, base)
    r = LiveRunner(config)
    try:
        r.wait_running()
        target = tmp_path / "elsewhere"
        target.write_text("kept\n")
        planted = r.out / "watchers" / "nw.jsonl"
        planted.symlink_to(target)
        write_config(tmp_path, {"watchers": [*base["watchers"],
                                             {"id": "nw", "path": "n.log", "pattern": "x"}]})
        r.send(signal.SIGHUP)
        wait_for(lambda: any(str(planted) in p and "symlink" in p
                             for p in r.control({"cmd": "status"})["problems"]), "the problem")
        assert str(planted) in r.stderr() and set(listed(r)) == {"cfg", "nw"}
        assert listed(r)["nw"]["status"] == "stopped" and "symlink" in listed(r)["nw"]["lastError"]
        assert target.read_text() == "kept\n" and planted.is_symlink()
    finally:
        assert r.stop() == 0


def test_a_reload_that_lowers_max_watchers_keeps_the_oldest_runtime_watchers_that_fit(
        tmp_path: Path) -> None:
    """`limits.maxWatchers` lowered by a reload: the runtime watchers were all restarted (a
    change of `limits` restarts every watcher), past the limit, and nothing said so. Those that
    fit, oldest first, after the config's, start again; the others are stopped, said in
    `status`, and `start` starts one again once there is room."""
    conf: dict[str, Any] = {"limits": {"maxWatchers": 4},
                            "watchers": [{"id": "cfg", "path": "cfg.log", "pattern": "x"}]}
    config = write_config(tmp_path, conf)
    for name in ("cfg", "rt0", "rt1", "rt2"):
        (tmp_path / f"{name}.log").write_text("")
    r = LiveRunner(config)
    try:
        r.wait_running()
        for i in range(3):
            reply = r.control({"cmd": "add", "watcher": {
                "id": f"rt{i}", "path": str(tmp_path / f"rt{i}.log"), "pattern": "x"}})
            assert reply["ok"], reply
        conf["limits"]["maxWatchers"] = 2
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        wait_for(lambda: r.control({"cmd": "status"})["watchers"] == ["cfg", "rt0"],
                 "the config's watcher and the oldest runtime one")
        status = r.control({"cmd": "status"})
        assert sorted(p.split(":")[0] for p in status["problems"]) == ["rt1", "rt2"]
        assert all("limits.maxWatchers is 2" in p for p in status["problems"])
        wait_for(lambda: {w["id"]: w["status"] for w in r.control({"cmd": "list"})["watchers"]}
                 == {"cfg": "running", "rt0": "running", "rt1": "stopped", "rt2": "stopped"},
                 "rt0 started again, rt1 and rt2 stopped")  # (rt0 says `starting` meanwhile)
        assert r.control({"cmd": "start", "id": "rt1"})["error"]["code"] == "limit"
        assert r.control({"cmd": "stop", "id": "rt0"})["ok"]
        assert r.control({"cmd": "start", "id": "rt1"})["ok"]
    finally:
        assert r.stop() == 0
    assert "Traceback" not in r.stderr()
