"""Actions in a live `watchrun run`: the supervisor hands matches over, a real throttle window
ends on the real clock and sends what it held, counters in `--metrics`, a reload closes the
changed watcher's actions in its own stream, and SIGTERM stops a running program (recorded)."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from inproc import inproc
from liverunner import LiveRunner, alive, read_records, wait_for, write_config
from recordcheck import validate_records
from test_metrics import free_port, scrape
from webhook_server import receiver


def append(path: Path, text: str) -> None:
    with open(path, "a") as fh:
        fh.write(text)


def kinds(r: LiveRunner, kind: str, **match: Any) -> list[dict[str, Any]]:
    return [x for x in r.records("app") if x["kind"] == kind
            and all(x.get(k) == v for k, v in match.items())]


def test_throttle_metrics_and_a_running_program_stopped_at_shutdown(tmp_path: Path) -> None:
    log, pidfile = tmp_path / "app.log", tmp_path / "pid"
    log.write_text("")
    with receiver(200) as rx:
        conf = {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR", "actions": [
            {"type": "webhook", "name": "hook", "url": rx.url, "throttle": "1s"},
            {"type": "exec", "name": "hang", "command": [
                "sh", "-c", f"echo $$$$ > {pidfile}; exec sleep 60"], "timeout": "10m",
             "when": {"threshold": "3 in 1m"}}]}],
            "limits": {"stopTimeout": "1s"}}
        port = free_port()
        r = LiveRunner(write_config(tmp_path, conf), "--metrics", f"127.0.0.1:{port}")
        try:
            r.wait_log("running")
            append(log, "ERROR 1\n")
            wait_for(lambda: rx.count() == 1, "the first POST")
            append(log, "ERROR 2\nERROR 3\n")  # the third match trips the exec's threshold
            wait_for(lambda: rx.count() == 2, "the POST when the window ended")
            doc = rx.bodies()[1]
            assert (doc["reason"], doc["count"], doc["suppressed"]["matches"]) == (
                "throttle-end", 2, 2)
            assert doc["suppressed"]["firings"] == len(kinds(r, "action-suppressed")) >= 1
            assert [x["line"] for x in doc["lines"]] == ["ERROR 2", "ERROR 3"]
            wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), "the program")
            m = wait_for(lambda: (s := scrape(port)).get(
                'watchrun_action_results_total{action="hook",status="ok",watcher="app"}') == 2
                and s, "both POSTs counted")
            assert m['watchrun_action_firings_total{action="hook",watcher="app"}'] == 2
            assert m['watchrun_action_suppressed_total{action="hook",watcher="app"}'] == len(
                kinds(r, "action-suppressed"))
            assert m['watchrun_action_firings_total{action="hang",watcher="app"}'] == 1
        finally:
            assert r.stop() == 0
    (result,) = kinds(r, "action-result", action="hang")
    assert (result["status"], result["error"]["code"]) == ("cancelled", "cancelled")
    assert not alive(int(pidfile.read_text()))
    recs = validate_records(r.out / "watchers" / "app.jsonl")
    assert recs[-1]["kind"] == "stop"  # the action's records came before the watcher stopped
    assert rx.url.split("/hooks")[1] not in r.stderr()


def test_a_reload_closes_the_changed_watchers_actions_in_its_own_stream(tmp_path: Path) -> None:
    log, pidfile = tmp_path / "app.log", tmp_path / "pid"
    log.write_text("")
    slow = {"type": "exec", "name": "slow",
            "command": ["sh", "-c", f"echo $$$$ > {pidfile}; exec sleep 60"]}
    conf: dict[str, Any] = {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR",
                                          "actions": [slow]}]}
    config = write_config(tmp_path, conf)
    r = LiveRunner(config)
    try:
        r.wait_log("running")
        append(log, "ERROR 1\n")
        wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), "the program")
        conf["watchers"][0]["actions"][0]["command"] = [sys.executable, "-c", "pass"]
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        r.wait_log("reloaded")
        recs = r.records("app")
        cancelled = [x for x in recs if x["kind"] == "action-result"]
        stop = [i for i, x in enumerate(recs) if x["kind"] == "stop"]
        assert cancelled and cancelled[0]["status"] == "cancelled"
        assert recs.index(cancelled[0]) < stop[0]  # written before the old stream stopped
        assert not alive(int(pidfile.read_text()))
        append(log, "ERROR 2\n")
        wait_for(lambda: [x for x in r.records("app") if x["kind"] == "action-result"
                          and x["status"] == "ok"], "the new action's firing")
    finally:
        assert r.stop() == 0
    validate_records(r.out / "watchers" / "app.jsonl")


def test_a_reload_that_removes_an_action_records_what_it_held_as_dropped(
        tmp_path: Path) -> None:
    """docs/records.md: `action-dropped{reason: action-removed}` for the firings a throttled
    action held when a reload removed it, in the stream, before the reload's `stop` (the
    agent-records audit: no test had this reason)."""
    log = tmp_path / "app.log"
    log.write_text("")
    with receiver() as rx:
        hook = {"type": "webhook", "name": "hook", "url": rx.url, "throttle": "1h"}
        conf: dict[str, Any] = {"watchers": [{"id": "app", "path": "app.log",
                                              "pattern": "ERROR", "actions": [hook]}]}
        config = write_config(tmp_path, conf)
        r = LiveRunner(config)
        try:
            r.wait_log("running")
            append(log, "ERROR 1\n")
            wait_for(lambda: kinds(r, "action-result", status="ok"), "the first firing sent")
            append(log, "ERROR 2\nERROR 3\n")  # held by the throttle: one firing, 2 matches
            wait_for(lambda: len(kinds(r, "match")) == 3, "the held matches recorded")
            conf["watchers"][0]["actions"] = []
            write_config(tmp_path, conf)
            r.send(signal.SIGHUP)
            r.wait_log("reloaded")
            recs = r.records("app")
        finally:
            assert r.stop() == 0
        assert len(rx.requests) == 1
    (dropped,) = [x for x in recs if x["kind"] == "action-dropped"]
    assert (dropped["action"], dropped["reason"], dropped["count"], dropped["matches"]) == (
        "hook", "action-removed", 1, 2), dropped
    assert recs.index(dropped) < next(i for i, x in enumerate(recs) if x["kind"] == "stop")
    validate_records(r.out / "watchers" / "app.jsonl")


def test_actions_get_the_cursors_of_the_match_records(tmp_path: Path) -> None:
    """Since matches became columns (#14), every cursor an action got was "": the body's
    `cursors` and `lines[].cursor`, WATCHRUN_FIRST/LAST_CURSOR and `action-fired`'s."""
    from test_once import once

    seen = tmp_path / "seen"
    dump = ("import os, sys; open(sys.argv[1], 'w').write(os.environ['WATCHRUN_FIRST_CURSOR'] + "
            "' ' + os.environ['WATCHRUN_LAST_CURSOR'] + '\\n' + sys.stdin.read())")
    (tmp_path / "app.log").write_text("ERROR one\nok\nERROR two\n")
    with receiver(200) as rx:
        run = once(tmp_path, {"watchers": [{
            "id": "app", "path": "app.log", "fromStart": True, "pattern": "ERROR",
            "actions": [{"type": "webhook", "url": rx.url},
                        {"type": "exec", "command": [sys.executable, "-c", dump, str(seen)]}]}]})
        assert run.rc == 0, run.err
        (doc,) = rx.bodies()
    recs = read_records(tmp_path / ".watchrun" / "watchers" / "app.jsonl")
    cursors = [r["cursor"] for r in recs if r["kind"] == "match"]
    assert cursors == ["app:0000000000000002", "app:0000000000000003"]
    assert doc["cursors"] == {"first": cursors[0], "last": cursors[1]}
    assert [x["cursor"] for x in doc["lines"]] == cursors
    env, *lines = seen.read_text().splitlines()
    assert env.split() == cursors
    assert [json.loads(x)["cursor"] for x in lines] == cursors
    for fired in (r for r in recs if r["kind"] == "action-fired"):
        assert (fired["firstCursor"], fired["lastCursor"]) == tuple(cursors)


def test_a_once_run_waits_for_its_firings_and_a_failed_one_leaves_its_exit_status(
        tmp_path: Path) -> None:
    """README, "React to matches": a `run --once` exits after its firings (each bounded by its
    timeout and retries), and one that failed does not change its exit status; a SIGTERM while
    it waits for a receiver that never answers ends it as interrupted (exit 3), the firing
    recorded `cancelled`."""
    import subprocess

    from test_once import base_env, once

    (tmp_path / "app.log").write_text("ERROR one\n")
    hook = {"type": "webhook", "url": "", "retries": 1, "timeout": "1s"}
    conf = {"watchers": [{"id": "app", "path": "app.log", "fromStart": True,
                          "pattern": "ERROR", "actions": [hook]}]}
    with receiver(500, 500) as rx:
        hook["url"] = rx.url
        run = once(tmp_path, conf)
        assert run.rc == 0 and rx.count() == 2, run.out + run.err  # (its retry went out too)
    (result,) = [r for r in read_records(tmp_path / ".watchrun" / "watchers" / "app.jsonl")
                 if r["kind"] == "action-result"]
    assert (result["status"], result["attempts"]) == ("failed", 2)
    (tmp_path / "app.log").write_text("ERROR two\n")
    hook.update(retries=0, timeout="10m")
    with receiver("hang") as rx:
        hook["url"] = rx.url
        proc = subprocess.Popen([sys.executable, "-m", "watchrun", "run", "--once", "-c",
                                 str(write_config(tmp_path, conf))], cwd=tmp_path,
                                env=base_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        try:
            wait_for(lambda: rx.count() == 1, "the firing at the receiver")
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 3, out.decode() + err.decode()
    results = [r for r in read_records(tmp_path / ".watchrun" / "watchers" / "app.jsonl")
               if r["kind"] == "action-result"]
    assert [r["status"] for r in results] == ["failed", "cancelled"]


def test_matches_after_the_actions_stopped_are_recorded_as_dropped(tmp_path: Path) -> None:
    """At a stop the actions stop first, while the watchers still read: a match in that window
    (here while a program that ignores SIGTERM has its grace) was recorded as a match and
    fired nothing, with no record, count or log line to say so."""
    log, pidfile = tmp_path / "app.log", tmp_path / "pid"
    log.write_text("")
    stubborn = f"trap '' TERM; echo $$$$ > {pidfile}; while :; do sleep 0.05; done"
    conf = {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR", "actions": [
        {"type": "exec", "name": "slow", "command": ["sh", "-c", stubborn]}]}],
        "limits": {"stopTimeout": "20s"}}
    r = LiveRunner(write_config(tmp_path, conf))
    try:
        r.wait_log("running")
        append(log, "ERROR 1\n")
        wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), "the program")
        r.send(signal.SIGTERM)  # the action's stop waits for the program's grace (20 s)
        r.wait_log("stopping")
        append(log, "ERROR 2\nERROR 3\n")
        try:
            wait_for(lambda: len(kinds(r, "match")) == 3, "the matches read while stopping")
        except AssertionError as exc:  # (it failed once in a loaded run: what did it say?)
            raise AssertionError(f"{exc}; the runner said:\n{r.stderr()}") from None
    finally:
        assert r.stop() == 0  # (a second SIGTERM: what remains is killed now)
    recs = validate_records(r.out / "watchers" / "app.jsonl")
    (late,) = [x for x in recs if x["kind"] == "action-dropped"]
    assert (late["action"], late["reason"], late["matches"]) == ("slow", "runner-stopped", 2)
    assert recs[-1]["kind"] == "stop" and recs.index(late) < len(recs) - 1
    assert "2 matches came after the actions stopped" in r.stderr()


def test_watchrun_stop_cancels_the_watchers_running_program_and_records_it(
        tmp_path: Path) -> None:
    """`watchrun stop app` while its exec action's program ran: the program kept running
    after the watcher's JSONL closed, and its `action-result` was lost (an error in the log);
    the firing waiting behind it was never recorded. Now the stop cancels the program (its
    tree stopped), records the result `cancelled` and the waiting firing dropped, then `stop`."""
    log, pidfile = tmp_path / "app.log", tmp_path / "pid"
    log.write_text("")
    slow = {"type": "exec", "name": "slow", "timeout": "10m",
            "command": ["sh", "-c", f"echo $$$$ > {pidfile}; exec sleep 60"]}
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR", "actions": [slow]}],
        "limits": {"stopTimeout": "2s"}})
    r = LiveRunner(config)
    try:
        r.wait_log("running")
        append(log, "ERROR 1\n")
        wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), "the program")
        append(log, "ERROR 2\n")  # waits behind the running firing (concurrency 1)
        wait_for(lambda: len(kinds(r, "match")) == 2, "the second match")
        stop = inproc(tmp_path, "stop", "app", "-c", str(config))  # (asks the runner)
        assert (stop.returncode, stop.stdout) == (0, "stopped app\n"), stop.stderr
        recs = validate_records(r.out / "watchers" / "app.jsonl")  # (closed: all of it)
        assert not alive(int(pidfile.read_text()))
    finally:
        assert r.stop() == 0
    (result,) = [x for x in recs if x["kind"] == "action-result"]
    assert (result["action"], result["status"]) == ("slow", "cancelled")
    assert "the watcher was stopped (`watchrun stop`" in result["error"]["message"]
    (dropped,) = [x for x in recs if x["kind"] == "action-dropped"]
    assert (dropped["reason"], dropped["count"], dropped["matches"]) == ("watcher-stopped", 1, 1)
    assert recs[-1]["kind"] == "stop" and recs[-1]["reason"] == "requested"
    assert "lost" not in r.stderr()


def test_watchrun_stop_cancels_the_watchers_webhook_in_flight_and_records_it(
        tmp_path: Path) -> None:
    """A POST the receiver holds open when `watchrun stop app` comes: its result was lost
    after the watcher's JSONL closed. Now it is cancelled and recorded before `stop`."""
    log = tmp_path / "app.log"
    log.write_text("")
    with receiver("hang") as rx:
        config = write_config(tmp_path, {"watchers": [
            {"id": "app", "path": "app.log", "pattern": "ERROR", "actions": [
                {"type": "webhook", "name": "hook", "url": rx.url, "timeout": "10m"}]}]})
        r = LiveRunner(config)
        try:
            r.wait_log("running")
            append(log, "ERROR 1\n")
            wait_for(lambda: rx.count() == 1, "the POST the receiver holds")
            stop = inproc(tmp_path, "stop", "app", "-c", str(config))  # (asks the runner)
            assert stop.returncode == 0, stop.stderr
            recs = validate_records(r.out / "watchers" / "app.jsonl")
        finally:
            rx.release.set()
            assert r.stop() == 0
    (result,) = [x for x in recs if x["kind"] == "action-result"]
    assert (result["action"], result["status"]) == ("hook", "cancelled")
    assert recs[-1]["kind"] == "stop"
    assert "lost" not in r.stderr()


def test_the_actions_of_a_watcher_added_at_runtime_fire(tmp_path: Path) -> None:
    """`watchrun add` (and MCP's `add`) took a watcher with `actions` and started it, but its
    actions never fired: the action hub knew only the config's watchers (and was not even
    started when none of them had actions). They fire now, and a reload keeps them."""
    seen, added = tmp_path / "a.log", tmp_path / "b.log"
    seen.write_text("")
    added.write_text("")
    with receiver(200) as rx:
        config = write_config(tmp_path, {"watchers": [
            {"id": "a", "path": "a.log", "pattern": "ERROR"}]})
        r = LiveRunner(config)
        try:
            r.wait_log("running")
            reply = r.control({"cmd": "add", "watcher": {
                "id": "b", "path": str(added), "pattern": "ERROR",
                "actions": [{"type": "webhook", "name": "hook", "url": rx.url}]}})
            assert reply["ok"], reply
            append(added, "ERROR 1\n")
            wait_for(lambda: rx.count() == 1, "the added watcher's POST")
            r.send(signal.SIGHUP)  # the runtime watcher is kept, and so are its actions
            r.wait_log("reloaded")
            append(added, "ERROR 2\n")
            wait_for(lambda: rx.count() == 2, "its POST after the reload")
        finally:
            assert r.stop() == 0
        assert [d["lines"][0]["line"] for d in rx.bodies()] == ["ERROR 1", "ERROR 2"]
    results = [x for x in r.records("b") if x["kind"] == "action-result"]
    assert [x["status"] for x in results] == ["ok", "ok"]
    assert not [x for x in r.records("b") if x["kind"] == "action-dropped"]


def test_a_stop_sends_no_queued_firing_and_records_every_result(tmp_path: Path) -> None:
    """At a stop, the firings in flight are cancelled and those waiting in a queue are dropped.
    The `action-result` of one action's cancelled firing started a worker for another action
    whose own worker had ended: the next firing in its queue was sent to the receiver after the
    SIGTERM, and its `action-fired` record was written with no `action-result` (the watcher's
    files had closed by then)."""
    log = tmp_path / "app.log"
    log.write_text("")
    with receiver("hang") as rx:
        conf = {"watchers": [{"id": "app", "path": "app.log", "pattern": "LATE", "actions": [
            {"type": "webhook", "name": "slow", "url": rx.url, "timeout": "20s",
             "retries": 0, "queue": 5},
            {"type": "webhook", "name": "once", "url": rx.url, "timeout": "20s",
             "retries": 0, "throttle": "1m"}]}], "limits": {"stopTimeout": "1s"}}
        r = LiveRunner(write_config(tmp_path, conf))
        try:
            r.wait_running()
            for n in (1, 2, 3):  # one firing each: the first in flight, two waiting
                append(log, f"LATE {n}\n")
                wait_for(lambda n=n: len(kinds(r, "match")) == n, f"match {n}")
            wait_for(lambda: rx.count() == 2, "the first firing of each at the receiver")
            r.send(signal.SIGTERM)
            assert r.proc.wait(timeout=20) == 0
        finally:
            r.close()
        sent = sorted((q.json()["action"], q.json()["firing"]) for q in rx.requests)
        assert sent == [("once", 1), ("slow", 1)], sent
    recs = validate_records(r.out / "watchers" / "app.jsonl")
    fired = sorted((x["action"], x["firing"]) for x in recs if x["kind"] == "action-fired")
    results = sorted((x["action"], x["firing"], x["status"]) for x in recs
                     if x["kind"] == "action-result")
    assert fired == [("once", 1), ("slow", 1)], fired
    assert results == [("once", 1, "cancelled"), ("slow", 1, "cancelled")], results
    dropped = {x["action"]: (x["count"], x["matches"], x["reason"]) for x in recs
               if x["kind"] == "action-dropped"}
    assert dropped == {"slow": (2, 2, "runner-stopped"), "once": (1, 2, "runner-stopped")}
    assert recs[-1]["kind"] == "stop"


def test_a_second_signal_while_an_action_stops_leaves_no_false_left_running(
        tmp_path: Path) -> None:
    """A second SIGTERM while the actions' stop waited for a program that ignores SIGTERM
    killed every group at once; the command watcher's run (a shell and its `sleep`) was then
    said to have "exited but 1 process it started kept running": an `error{left-running}` of
    what the runner itself had just killed (found by an actions explorer, 3 runs of 3)."""
    pidfile = tmp_path / "pid"
    stubborn = f"trap '' TERM; echo $$$$ > {pidfile}; sleep 900"
    conf = {"watchers": [{"id": "app", "command": ["sh", "-c", "echo ERROR a; sleep 1000"],
                          "pattern": "ERROR", "actions": [
                              {"type": "exec", "name": "ex", "command": ["sh", "-c", stubborn],
                               "timeout": "5m"}]}],
            "limits": {"stopTimeout": "20s"}}
    r = LiveRunner(write_config(tmp_path, conf))
    try:
        wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), "the program")
        r.send(signal.SIGTERM)  # the actions' stop waits for the program's grace (20 s)
        r.wait_log("stopping")
    finally:
        assert r.stop() == 0, r.stderr()  # a second SIGTERM: every group is killed now
    recs = validate_records(r.out / "watchers" / "app.jsonl")
    assert [x for x in recs if x.get("code") == "left-running"] == []
    assert "left-running" not in r.stderr()
    (end,) = [x for x in recs if x["kind"] == "exit"]
    assert (end["status"], end["signal"]) == ("killed", "SIGKILL")
    assert "second signal: killing what remains now" in r.stderr()


def test_a_reload_that_restarts_the_watcher_says_so_not_that_the_action_changed(
        tmp_path: Path) -> None:
    """Only `limits.maxLineBytes` changed: the watcher restarts and its running firing is
    cancelled, which was said as "a reload changed the action" (found by an actions
    explorer)."""
    log, pidfile = tmp_path / "app.log", tmp_path / "pid"
    log.write_text("")
    slow = {"type": "exec", "name": "slow",
            "command": ["sh", "-c", f"echo $$$$ > {pidfile}; exec sleep 60"]}
    conf: dict[str, Any] = {"limits": {"maxLineBytes": 4096}, "watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR", "actions": [slow]}]}
    r = LiveRunner(write_config(tmp_path, conf))
    try:
        r.wait_log("running")
        append(log, "ERROR 1\n")
        wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), "the program")
        conf["limits"]["maxLineBytes"] = 8192
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        r.wait_log("reloaded")
        (result,) = kinds(r, "action-result")
    finally:
        assert r.stop() == 0
    assert (result["status"], result["error"]["message"]) == ("cancelled", (
        "a reload restarted the watcher or made its actions anew (its own config, a limit it "
        "reads at its start or limits.matchLines changed; the action did not) while it ran"))
    assert "changed the action" not in r.stderr()
    validate_records(r.out / "watchers" / "app.jsonl")


@pytest.mark.parametrize("change", [("output", "keep", 6), ("limits", "matchLines", 20)])
def test_a_throttled_page_held_over_a_reload_of_the_output_goes_out(
        tmp_path: Path, change: tuple[str, str, int]) -> None:
    """Only `output.keep` changed: the watcher restarted and the match its throttle window held
    was dropped, so the page that would have said it never went out (found by an actions
    explorer). It goes out when the window ends: the watcher runs on, set in place, and a
    matchLines change, which makes its actions anew, hands them the window at once."""
    log = tmp_path / "app.log"
    log.write_text("")
    with receiver(200) as rx:
        conf: dict[str, Any] = {"output": {"keep": 5}, "limits": {}, "watchers": [
            {"id": "app", "path": "app.log", "pattern": "ERROR", "actions": [
                {"type": "webhook", "name": "page", "url": rx.url, "throttle": "2s"}]}]}
        r = LiveRunner(write_config(tmp_path, conf))
        try:
            r.wait_log("running")
            append(log, "ERROR 1\n")
            wait_for(lambda: rx.count() == 1, "the first page")
            append(log, "ERROR 2\n")
            wait_for(lambda: kinds(r, "action-suppressed"), "the second match held")
            conf[change[0]][change[1]] = change[2]
            write_config(tmp_path, conf)
            r.send(signal.SIGHUP)
            r.wait_log("reloaded")
            wait_for(lambda: rx.count() == 2, "the held match's page")
        finally:
            assert r.stop() == 0
        assert [[x["line"] for x in doc["lines"]] for doc in rx.bodies()] == [
            ["ERROR 1"], ["ERROR 2"]]
    assert kinds(r, "action-dropped") == []
    assert [f["reason"] for f in kinds(r, "action-fired")] == ["match", "throttle-end"]
    validate_records(r.out / "watchers" / "app.jsonl")
