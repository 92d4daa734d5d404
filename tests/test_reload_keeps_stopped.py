"""A SIGHUP reload leaves a watcher stopped with `watchrun stop` stopped (as supervisord's
`update` leaves a program a user stopped), changed or not, and its summary counts the watchers
by what they do instead of calling every one it holds running; a stopped one takes no room
from runtime watchers, and a reload that disables watchers says why it stopped each."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from liverunner import LiveRunner, wait_for, write_config

KEPT = "[ticker] stopped by request: kept stopped by the reload"


def _ticker(word: str) -> dict[str, Any]:
    return {"id": "ticker", "command": f"echo {word}; exec sleep 1000", "pattern": word}


def _config(tmp_path: Path, ticker: dict[str, Any]) -> dict[str, Any]:
    (tmp_path / "app.log").touch()
    return {"watchers": [ticker, {"id": "app", "path": "app.log", "pattern": "ERROR"}]}


def _starts(r: LiveRunner) -> list[dict[str, Any]]:
    return [x for x in r.records("ticker") if x["kind"] == "start"]


def _listed(r: LiveRunner, wid: str) -> dict[str, Any]:
    reply = r.control({"cmd": "list"})
    return next(w for w in reply["watchers"] if w["id"] == wid)


def _stop_ticker(r: LiveRunner) -> None:
    """Once the runner runs and the ticker has run once, `watchrun stop ticker`."""
    r.wait_running()
    wait_for(lambda: r.matches("ticker"), "the ticker's first run")
    assert r.control({"cmd": "stop", "id": "ticker"})["ok"]


def _stop_ticker_then_reload(r: LiveRunner) -> None:
    _stop_ticker(r)
    r.send(signal.SIGHUP)
    r.wait_log("reloaded:")  # the reload is over: a start it made is launched by now


def test_a_reload_of_an_unchanged_config_keeps_a_stopped_watcher_stopped(tmp_path: Path) -> None:
    """`watchrun stop ticker` then a SIGHUP with the config unchanged (logrotate's postrotate):
    the reload started `ticker` again (`[ticker] started run 1`), saying nothing, while a
    stopped runtime watcher stayed stopped and an exited one stayed exited."""
    r = LiveRunner(write_config(tmp_path, _config(tmp_path, _ticker("tick"))))
    try:
        _stop_ticker_then_reload(r)
        assert KEPT in r.stderr(), r.stderr()
        assert r.control({"cmd": "status"})["watchers"] == ["app"]
        assert _listed(r, "ticker")["status"] == "stopped"
        assert len(_starts(r)) == 1  # no run since the stop
        reply = r.control({"cmd": "start", "id": "ticker"})  # the operator's start does
        assert reply["ok"] and reply["started"] and not reply["wasRunning"], reply
        assert r.control({"cmd": "status"})["watchers"] == ["app", "ticker"]
        assert len(_starts(r)) == 2
    finally:
        assert r.stop() == 0
    assert r.left == []


def test_a_reload_that_changes_a_stopped_watcher_keeps_it_stopped_and_start_runs_the_new_one(
        tmp_path: Path) -> None:
    """Changed while stopped: it stays stopped; `watchrun start` runs its new settings."""
    conf = _config(tmp_path, _ticker("old"))
    config = write_config(tmp_path, conf)
    r = LiveRunner(config)
    try:
        _stop_ticker(r)
        conf["watchers"][0] = _ticker("new")
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        r.wait_log("reloaded:")
        assert KEPT in r.stderr(), r.stderr()
        assert r.control({"cmd": "status"})["watchers"] == ["app"]
        listed = _listed(r, "ticker")
        assert (listed["status"], listed["pattern"]) == ("stopped", "new")  # what starts next
        assert len(_starts(r)) == 1
        reply = r.control({"cmd": "start", "id": "ticker"})
        assert reply["ok"] and reply["started"] and not reply["wasRunning"], reply
        wait_for(lambda: any(m["line"] == "new" for m in r.matches("ticker")), "the new run")
        (_, second) = _starts(r)
        assert "echo new" in second["command"], second
        assert [m["line"] for m in r.matches("ticker")] == ["old", "new"]
    finally:
        assert r.stop() == 0
    assert r.left == []


def test_a_stopped_watcher_the_reload_removes_is_gone_and_one_added_back_starts(
        tmp_path: Path) -> None:
    """Removed from the config, a stopped watcher is gone as before (`start` does not know it);
    named again by a later reload it is a new watcher of the config, and starts."""
    conf = _config(tmp_path, _ticker("tick"))
    config = write_config(tmp_path, conf)
    r = LiveRunner(config)
    try:
        _stop_ticker(r)
        ticker = conf["watchers"].pop(0)
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        wait_for(lambda: r.stderr().count("reloaded:") == 1, "the first reload")
        assert r.control({"cmd": "start", "id": "ticker"})["error"]["code"] == "not_found"
        conf["watchers"].insert(0, ticker)
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        wait_for(lambda: r.stderr().count("reloaded:") == 2, "the second reload")
        wait_for(lambda: len(_starts(r)) == 2, "the ticker started by the config again")
        assert r.stderr().count(KEPT) == 0
    finally:
        assert r.stop() == 0
    assert r.left == []


def test_the_start_and_reload_lines_count_only_running_watchers_as_running(
        tmp_path: Path) -> None:
    """`2 watchers, 0 agents running` from a runner whose two commands could not start, and
    `reloaded: N watchers running` counting exited, fatal and stopped ones too: each state is
    counted now."""
    (tmp_path / "app.log").touch()
    conf = {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"},
        {"id": "bad1", "command": [str(tmp_path / "no-such-program")], "pattern": "x"},
        {"id": "bad2", "command": [str(tmp_path / "no-such-program")], "pattern": "x"},
    ]}
    config = write_config(tmp_path, conf)
    r = LiveRunner(config)
    try:
        r.wait_log("3 watchers (1 running, 2 fatal), 0 agents running")
        conf["watchers"].append({"id": "done", "command": "echo done", "pattern": "done"})
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        r.wait_log("reloaded: 4 watchers (")
        wait_for(lambda: _listed(r, "done")["status"] == "exited", "`done` to exit")
        extra = {"id": "extra", "path": str(tmp_path / "app.log"), "pattern": "WARN"}
        assert r.control({"cmd": "add", "watcher": extra})["ok"]
        assert r.control({"cmd": "stop", "id": "extra"})["ok"]
        r.send(signal.SIGHUP)
        r.wait_log("reloaded: 5 watchers (1 running, 1 exited, 2 fatal, 1 stopped)")
    finally:
        assert r.stop() == 0
    err = r.stderr()
    assert "3 watchers, 0 agents running" not in err and "watchers running" not in err, err


def test_clear_forgets_a_stopped_config_watchers_status_not_that_it_was_stopped(
        tmp_path: Path) -> None:
    """docs/control.md: `clear` of a config watcher forgets its status (its row, its
    `state/…status.json`), not that it was stopped: `stop ticker`, `clear`, then a SIGHUP
    keeps it stopped, says so, and `start` still runs it."""
    r = LiveRunner(write_config(tmp_path, _config(tmp_path, _ticker("tick"))))
    snapshot = r.out / "state" / "ticker.status.json"
    try:
        _stop_ticker(r)
        assert snapshot.exists()
        reply = r.control({"cmd": "clear"})
        assert reply["ok"] and reply["cleared"] == 1, reply
        assert not snapshot.exists()
        assert [w["id"] for w in r.control({"cmd": "list"})["watchers"]] == ["app"]
        r.send(signal.SIGHUP)
        r.wait_log("reloaded:")  # the reload is over: a start it made is launched by now
        assert KEPT in r.stderr(), r.stderr()
        assert r.control({"cmd": "status"})["watchers"] == ["app"]
        assert len(_starts(r)) == 1  # no run since the stop
        reply = r.control({"cmd": "start", "id": "ticker"})  # the config still names it
        assert reply["ok"] and reply["started"] and not reply["wasRunning"], reply
        assert r.control({"cmd": "status"})["watchers"] == ["app", "ticker"]
    finally:
        assert r.stop() == 0
    assert r.left == []


def test_a_config_watcher_stopped_by_request_takes_no_room_from_runtime_ones_at_a_reload(
        tmp_path: Path) -> None:
    """`add` and `start` count only the watchers that run under `limits.maxWatchers`; the
    reload counted the config's stopped `ticker` too, so a SIGHUP with nothing changed stopped
    a runtime watcher `add` had accepted (`no room`), `start` ran it, the next SIGHUP stopped it
    again."""
    conf = {"limits": {"maxWatchers": 2}, **_config(tmp_path, _ticker("tick"))}
    r = LiveRunner(write_config(tmp_path, conf))
    try:
        _stop_ticker(r)  # running: app; stopped by request: ticker
        extra = {"id": "extra", "path": str(tmp_path / "app.log"), "pattern": "WARN"}
        assert r.control({"cmd": "add", "watcher": extra})["ok"]
        r.send(signal.SIGHUP)
        r.wait_log("reloaded:")
        assert KEPT in r.stderr(), r.stderr()
        assert r.control({"cmd": "status"})["watchers"] == ["app", "extra"]
        assert r.control({"cmd": "status"})["problems"] == []
        assert _listed(r, "extra")["status"] == "running"
    finally:
        assert r.stop() == 0
    assert "no room" not in r.stderr(), r.stderr()


def test_a_reload_that_disables_watchers_says_why_a_runtime_one_stopped(tmp_path: Path) -> None:
    """A reload to `limits.enabled: false` stopped a runtime watcher as `removed`, with no
    `lastError` and no problem in `status`; once enabled again it stayed stopped, unexplained."""
    conf = _config(tmp_path, _ticker("tick"))
    r = LiveRunner(write_config(tmp_path, conf))
    try:
        r.wait_running()
        extra = {"id": "extra", "path": str(tmp_path / "app.log"), "pattern": "WARN"}
        assert r.control({"cmd": "add", "watcher": extra})["ok"]
        write_config(tmp_path, {"limits": {"enabled": False}, **conf})
        r.send(signal.SIGHUP)
        r.wait_log("reloaded:")
        why = "limits.enabled is false: stopped (`watchrun start extra` once it is true again"
        listed = _listed(r, "extra")
        assert listed["status"] == "stopped" and why in listed["lastError"], listed
        assert [p for p in r.control({"cmd": "status"})["problems"] if why in p], \
            r.control({"cmd": "status"})
        assert "[extra] limits.enabled is false; stopped" in r.stderr(), r.stderr()
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        wait_for(lambda: r.stderr().count("reloaded:") == 2, "the second reload")
        assert why in _listed(r, "extra")["lastError"]
        assert r.control({"cmd": "start", "id": "extra"})["ok"]
        wait_for(lambda: _listed(r, "extra")["status"] == "running", "extra started again")
    finally:
        assert r.stop() == 0
    assert "[extra] removed" not in r.stderr(), r.stderr()
