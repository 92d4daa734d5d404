"""docs/control.md `add`: `endWithClient: true` ties a watcher to the process that sent the
request; when that process ends the runner stops the watcher (`stop` reason `client-gone`, listed
stopped: tests/test_end_with_client_kept.py for how long). One added again under the same id
after a `clear` is a new watcher, not stopped then — neither because of the first client nor
when its pid-watch fires late."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from liverunner import DEADLINE_S, LiveRunner, alive, wait_for, write_config

CLIENT = """\
import json, sys
from pathlib import Path
from watchrun.runtime.client import request
for payload in json.loads(sys.argv[2]):
    print(json.dumps(request(Path(sys.argv[1]), payload)), flush=True)
sys.stdin.read()  # alive until the test closes stdin (or kills it)
"""
"""A client process: sends its `add` requests, prints each reply, lives until told to end."""


class Client:
    """A separate process that added watchers on the runner's control socket (its pid is the
    SO_PEERCRED pid the runner sees) and stays alive until `end`."""

    def __init__(self, runner: LiveRunner, *payloads: dict[str, Any]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CLIENT, str(runner.out / "control.sock"),
             json.dumps(payloads)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.replies = [json.loads(self.proc.stdout.readline() or "null") for _ in payloads]
        assert all(r and r["ok"] for r in self.replies), self.replies

    @property
    def pid(self) -> int:
        return self.proc.pid

    def end(self, *, kill: bool = False) -> None:
        """Exit (stdin closed), or be killed (SIGKILL); reaped before this returns."""
        if kill:
            self.proc.kill()
        elif self.proc.stdin is not None:
            self.proc.stdin.close()
        assert self.proc.wait(timeout=DEADLINE_S) == (-9 if kill else 0)
        assert not alive(self.pid)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


def add(folder: Path, wid: str, *, end_with_client: bool) -> dict[str, Any]:
    """An `add` request of a file watcher on `<folder>/<wid>.log`."""
    log = folder / f"{wid}.log"
    log.touch()
    return {"cmd": "add", "watcher": {"id": wid, "path": str(log), "pattern": "ERROR"},
            "endWithClient": end_with_client}


def listed(r: LiveRunner) -> dict[str, str]:
    return {w["id"]: w["status"] for w in r.control({"cmd": "list"})["watchers"]}


def stops(r: LiveRunner, wid: str) -> list[str]:
    return [x["reason"] for x in r.records(wid) if x["kind"] == "stop"]


def matches_line(r: LiveRunner, folder: Path, wid: str, text: str) -> None:
    """`wid` reads on: a line appended to its file is matched."""
    with (folder / f"{wid}.log").open("a") as fh:
        fh.write(f"ERROR {text}\n")
    wait_for(lambda: any(m["line"] == f"ERROR {text}" for m in r.matches(wid)),
             f"{wid} to match {text!r}")


def settled(r: LiveRunner) -> None:
    """Once this returns, whatever stop the runner was making for a client that ended is done:
    `stop` waits for the lock a client-gone stop holds (here: of an id that is not running)."""
    assert r.control({"cmd": "stop", "id": "no-such"})["error"]["code"] == "not_found"


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[LiveRunner]:
    r = LiveRunner(write_config(tmp_path, {"watchers": []}))
    try:
        r.wait_running()
        yield r
    finally:
        assert r.stop() == 0


@pytest.mark.parametrize("again_ends_with_client", [True, False])
def test_a_watcher_added_again_after_clear_is_not_stopped_for_the_gone_client(
        runner: LiveRunner, tmp_path: Path, again_ends_with_client: bool) -> None:
    """docs/control.md `add`: the first client's watcher is stopped when it ends
    (`client-gone`, listed stopped); one added again under the same id after the
    `clear`, by a second client that lives on, is a new watcher, not stopped then; with
    `endWithClient` it is stopped when that second client ends (`client-gone`), not before."""
    r = runner
    first = Client(r, add(tmp_path, "w", end_with_client=True))
    matches_line(r, tmp_path, "w", "one")
    first.end(kill=True)
    wait_for(lambda: listed(r).get("w") == "stopped", "w stopped when its client ended")
    assert stops(r, "w") == ["client-gone"]
    r.wait_log(f"process {first.pid}, which added w, has ended")
    assert r.control({"cmd": "clear"})["cleared"] == 1
    assert "w" not in listed(r)

    # the same id again, from a second client; its own `sentinel` ends with it in any case
    second = Client(r, add(tmp_path, "w", end_with_client=again_ends_with_client),
                    add(tmp_path, "sentinel", end_with_client=True))
    try:
        matches_line(r, tmp_path, "w", "two")
        settled(r)
        assert listed(r) == {"w": "running", "sentinel": "running"}
        assert stops(r, "w") == ["client-gone"]  # the first one's only
        second.end()
        wait_for(lambda: listed(r).get("sentinel") == "stopped", "sentinel stopped with its "
                 "client")
        settled(r)
    finally:
        second.close()
    assert stops(r, "sentinel") == ["client-gone"]
    if again_ends_with_client:
        assert listed(r)["w"] == "stopped"
        assert stops(r, "w") == ["client-gone", "client-gone"]
        r.wait_log(f"process {second.pid}, which added w, sentinel, has ended")
    else:  # tied to no one: it reads on
        assert listed(r)["w"] == "running"
        assert stops(r, "w") == ["client-gone"]
        r.wait_log(f"process {second.pid}, which added sentinel, has ended")
        matches_line(r, tmp_path, "w", "three")
    assert first.pid != second.pid


def test_the_first_clients_late_end_does_not_stop_the_watcher_added_again(
        runner: LiveRunner, tmp_path: Path) -> None:
    """docs/control.md `add`: one added again under the same id after a `clear` is a new
    watcher: when the client that added the first one ends only after that (its pid-watch
    fires late), the runner stops that client's other watchers, not the new one, which ends
    with its own client (`client-gone`) when that one ends, not before."""
    r = runner
    first = Client(r, add(tmp_path, "w", end_with_client=True),
                   add(tmp_path, "other", end_with_client=True))
    second: Client | None = None
    try:
        assert r.control({"cmd": "stop", "id": "w"})["ok"]
        assert r.control({"cmd": "clear"})["cleared"] == 1
        second = Client(r, add(tmp_path, "w", end_with_client=True))
        assert stops(r, "w") == ["requested"]

        first.end(kill=True)  # its watch of `w` is one of an old watcher now
        wait_for(lambda: stops(r, "other") == ["client-gone"], "other stopped with its client")
        settled(r)
        assert listed(r) == {"w": "running", "other": "stopped"}
        assert stops(r, "w") == ["requested"]
        matches_line(r, tmp_path, "w", "after the first client")
        r.wait_log(f"process {first.pid}, which added other, has ended")

        second.end()
        wait_for(lambda: listed(r)["w"] == "stopped", "w stopped with the second client")
        assert stops(r, "w") == ["requested", "client-gone"]
        r.wait_log(f"process {second.pid}, which added w, has ended")
    finally:
        first.close()
        if second is not None:
            second.close()
    assert "which added w, other" not in r.stderr()


def test_a_runner_stops_while_a_client_that_added_a_watcher_lives_on(tmp_path: Path) -> None:
    """The task following the client sat in the supervisor's TaskGroup, never cancelled: a
    runner told to stop while a `watchrun mcp` (or this test process) that had added a watcher
    with `endWithClient` still lived finished its stop and then waited for that process to end
    (found by the MCP test pass: a session's server outlived the stop by seconds, until the
    SDK killed it). The client here is the test process itself: it lives on."""
    r = LiveRunner(write_config(tmp_path, {"watchers": []}))
    try:
        r.wait_running()
        assert r.control(add(tmp_path, "mine", end_with_client=True))["ok"] is True
        matches_line(r, tmp_path, "mine", "one")
    finally:
        code = r.stop(timeout=20)
    assert code == 0, r.stderr()
    assert stops(r, "mine") == ["shutdown"]


def test_mine_stops_and_clears_only_the_clients_own_watchers_as_it_added_them(
        runner: LiveRunner, tmp_path: Path) -> None:
    """docs/control.md: `stop` and `clear` with `mine: true` (`watchrun mcp`'s) act only on
    the watchers the requesting process added with `endWithClient`, still as it added them:
    not one another client added (under an id it had, after a `clear`), nor one added without
    `endWithClient`."""
    r = runner  # the client is the test process itself
    for wid, tied in (("w", True), ("x", True), ("loose", False)):
        assert r.control(add(tmp_path, wid, end_with_client=tied))["ok"] is True
    refused = r.control({"cmd": "stop", "id": "loose", "mine": True})
    assert (refused["error"]["code"], refused["error"]["mine"]) == ("not_found", False), refused
    assert r.control({"cmd": "stop", "id": "w", "mine": True})["wasRunning"] is True
    # its own, no longer running: `not_found` without `mine: false`
    again = r.control({"cmd": "stop", "id": "w", "mine": True})
    assert (again["error"]["code"], again["error"]["message"]) == (
        "not_found", "no running watcher 'w'")
    assert "mine" not in again["error"], again
    assert r.control({"cmd": "clear", "mine": True})["cleared"] == 1  # w: stopped, its own
    other = Client(r, add(tmp_path, "w", end_with_client=True))  # w again, another's
    try:
        refused = r.control({"cmd": "stop", "id": "w", "mine": True})
        assert (refused["error"]["code"], refused["error"]["mine"]) == ("not_found", False)
        cleared = r.control({"cmd": "clear", "all": True, "mine": True, "ids": ["w", "loose"]})
        assert cleared["cleared"] == 0
        assert r.control({"cmd": "clear", "all": True, "mine": True})["cleared"] == 1  # x
        assert listed(r) == {"w": "running", "loose": "running"}
        assert stops(r, "w") == ["requested"] and stops(r, "loose") == []
        matches_line(r, tmp_path, "w", "the other client's")
    finally:
        other.close()
