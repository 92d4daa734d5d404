"""Control-socket faults found by a tester: an `add` with a large pattern checked on the runner's
loop (and no bound on its size), a client past MAX_CLIENTS reset instead of told `busy`, a reset
taken by `watchrun stop` for "no runner", and request fields of the wrong type taken as true or
turned into strings."""

from __future__ import annotations

import asyncio
import contextlib
import json
import select
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inproc import inproc
from liverunner import DEADLINE_S, LiveRunner, alive, cli, wait_for, write_config

from watchrun.runtime import control
from watchrun.runtime.client import request
from watchrun.runtime.control import ControlServer

MAX_PATTERN = MAX_EXCLUDE = 16 * 1024
MAX_LABEL = 1024
"""docs/control.md's bounds of an added watcher's `pattern`, `exclude` (together), `label`."""


def running(r: LiveRunner) -> bool:
    try:
        return bool(r.control({"cmd": "status"}).get("state") == "running")
    except ConnectionError:
        return False


def a_runner(folder: Path) -> Iterator[LiveRunner]:
    """A runner of `folder` with the mock agent `a` and one file watcher, `app`."""
    (folder / "app.log").write_text("")
    config = write_config(folder, {"agents": [{"name": "a", "provider": "mock"}],
                                   "watchers": [{"id": "app", "path": "app.log",
                                                 "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        wait_for(lambda: running(r), "the runner to be running")
        yield r
    finally:
        assert r.stop() == 0
    assert "Traceback" not in r.stderr()


@pytest.fixture
def own_runner(tmp_path: Path) -> Iterator[LiveRunner]:
    yield from a_runner(tmp_path)


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRunner]:
    """`a_runner`, one for the module's tests whose every request is refused: each asserts
    that its runner still has `app` alone running (and nothing delivered, no internal error),
    so none of them changes what the next one finds."""
    yield from a_runner(tmp_path_factory.mktemp("runner"))


CLEARS = "`all`, `ids`, `mine`"
"""`clear`'s fields, as a refusal names them."""


@pytest.mark.parametrize(("req", "field", "expected"), [
    ({"cmd": "clear", "id": "app"}, "id", CLEARS),  # (cleared every ended watcher)
    ({"cmd": "clear", "all": True, "idz": ["x"]}, "idz", CLEARS),  # (cleared all)
    ({"cmd": "stop", "id": "nope", "all": True}, "all", "`id`, `mine`"),
    ({"cmd": "list", "junk": 1}, "junk", "none but `cmd`"),
    ({"cmd": 5}, "cmd", "a string"),
])
def test_a_field_a_command_does_not_have_is_refused_not_ignored(
        runner: LiveRunner, req: dict[str, Any], field: str, expected: str) -> None:
    """Unknown fields were ignored, so a typo widened a request: `{"cmd": "clear", "id": "e2"}`
    forgot every ended watcher, and `"all": true` with `idz` stopped and forgot every watcher,
    the config's too. Now the field is named, and nothing is done."""
    reply = runner.control(req)
    assert reply["ok"] is False and reply["error"]["code"] == "bad_request", reply
    assert (reply["error"]["field"], reply["error"]["expected"]) == (field, expected), reply
    assert runner.control({"cmd": "status"})["watchers"] == ["app"]


def test_stop_of_a_watcher_the_runner_is_stopping_waits_for_its_stop(tmp_path: Path) -> None:
    """`watchrun stop slow` while the runner's own stop had `slow` `stopping` (its command
    takes a second to end after SIGTERM) said "already stopped (it was not running)", exit 0,
    while the command ran on. It now answers once that stop is over: the command is gone."""
    pidfile = tmp_path / "pid"
    script = (f"echo $$$$ > {pidfile}; trap 'sleep 1; exit 0' TERM; "
              "while :; do sleep 0.05; done")
    r = LiveRunner(write_config(tmp_path, {"watchers": [
        {"id": "slow", "command": ["sh", "-c", script], "pattern": "ERROR"}]}))
    try:
        wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), "the command")
        pid = int(pidfile.read_text())
        sent = r.control({"cmd": "agent-send", "name": "x", "text": "y"})  # (a runner with no
        assert sent["error"]["code"] == "unknown_agent", sent  # agents: docs/control.md's code)
        r.send(signal.SIGTERM)
        wait_for(lambda: "slow" in r.control({"cmd": "status"}).get("stopping", []),
                 "the runner stopping `slow`")
        reply = r.control({"cmd": "stop", "id": "slow"})
        assert reply == {"ok": True, "wasRunning": True,
                         "message": "stopped slow (the runner was stopping it)"}, reply
        assert not alive(pid)
    finally:
        assert r.stop() == 0, r.stderr()


def test_status_is_answered_while_a_large_pattern_is_checked(own_runner: LiveRunner,
                                                             tmp_path: Path) -> None:
    """docs/control.md: `status` does not wait for an `add`. The check of a pattern and excludes
    at their bounds takes seconds; it runs off the loop, so the loop never stalls for it. (The
    add is refused `exists` once checked: nothing is compiled.)"""
    refused: list[dict[str, Any]] = []

    def add() -> None:
        heavy = {"id": "app", "path": str(tmp_path / "other.log"),
                 "pattern": "a?" * (MAX_PATTERN // 2),
                 "exclude": ["ay?" * (MAX_EXCLUDE // 6), "az?" * (MAX_EXCLUDE // 6)]}
        refused.append(own_runner.control({"cmd": "add", "watcher": heavy}))

    adding = threading.Thread(target=add)
    began = time.monotonic()
    adding.start()
    waits = []
    while adding.is_alive():
        asked = time.monotonic()
        assert own_runner.control({"cmd": "status"})["ok"] is True
        waits.append(time.monotonic() - asked)
        adding.join(0.02)  # a status every 20 ms (back to back, they took the check's CPU)
    took = time.monotonic() - began
    assert [r["error"]["code"] for r in refused] == ["exists"], refused
    assert len(waits) >= 3, f"only {len(waits)} status replies while {took:.2f}s of an add ran"
    assert max(waits) < took / 2, f"a status waited {max(waits):.3f}s for the add"
    lag = own_runner.control({"cmd": "status"})["loopLagMaxS"]  # the loop's worst stall
    assert lag < took / 2, f"the loop stalled {lag:.3f}s of the add's {took:.3f}s"
    at_bound = {"id": "big", "path": str(tmp_path / "other.log"),
                "pattern": ("E|" * MAX_PATTERN)[:MAX_PATTERN - 1] + "E"}
    assert own_runner.control({"cmd": "add", "watcher": at_bound})["ok"] is True


def test_the_documented_bounds_are_the_runners() -> None:
    from watchrun.runtime import manage

    assert (manage.MAX_PATTERN, manage.MAX_EXCLUDE, manage.MAX_LABEL) == (
        MAX_PATTERN, MAX_EXCLUDE, MAX_LABEL)


@pytest.mark.parametrize(("field", "watcher", "size", "limit"), [
    ("pattern", {"pattern": "E" * (MAX_PATTERN + 1)}, MAX_PATTERN + 1, MAX_PATTERN),
    ("exclude[1]", {"pattern": "E", "exclude": ["x", "é" * (MAX_EXCLUDE // 2 + 1)]},
     MAX_EXCLUDE + 2, MAX_EXCLUDE),
    ("exclude", {"pattern": "E", "exclude": ["x" * (MAX_EXCLUDE // 2)] * 3},
     MAX_EXCLUDE // 2 * 3, MAX_EXCLUDE),
    ("label", {"pattern": "E", "label": "L" * (MAX_LABEL + 1)}, MAX_LABEL + 1, MAX_LABEL),
])
def test_an_oversized_pattern_exclude_or_label_is_refused(runner: LiveRunner, tmp_path: Path,
                                                          field: str, watcher: dict[str, Any],
                                                          size: int, limit: int) -> None:
    reply = runner.control({"cmd": "add", "watcher": {
        "id": "big", "path": str(tmp_path / "other.log"), **watcher}})
    whole = " in all" if field == "exclude" else ""
    assert reply == {"ok": False, "error": {
        "code": "bad_request", "message": f"`{field}` is {size} bytes{whole}, over the "
        f"{limit}-byte ({limit // 1024} KiB) limit of a watcher added at runtime",
        "field": field, "size": size, "limit": limit}}
    assert runner.control({"cmd": "status"})["watchers"] == ["app"]


NAN = float("nan")


@pytest.mark.parametrize(("payload", "field", "allowed", "got"), [
    ({"cmd": "clear", "all": "no"}, "all", "true or false", "a string"),
    ({"cmd": "clear", "all": 1}, "all", "true or false", "a number"),
    ({"cmd": "clear", "all": None}, "all", "true or false", "null"),
    ({"cmd": "clear", "ids": "app"}, "ids", "an array of watcher ids", "a string"),
    ({"cmd": "clear", "ids": ["app", 5]}, "ids", "an array of watcher ids",
     "an array with a non-string"),
    ({"cmd": "clear", "mine": "yes"}, "mine", "true or false", "a string"),
    ({"cmd": "stop", "id": "app", "mine": 1}, "mine", "true or false", "a number"),
    ({"cmd": "stop", "id": NAN}, "id", "a string", "a number"),
    ({"cmd": "stop", "id": ["app"]}, "id", "a string", "an array"),
    ({"cmd": "stop"}, "id", "a string", None),
    ({"cmd": "start", "id": 5}, "id", "a string", "a number"),
    ({"cmd": "restart", "id": {"id": "app"}}, "id", "a string", "an object"),
    ({"cmd": "agent-send", "name": "a", "text": {"a": 1}}, "text", "a string", "an object"),
    ({"cmd": "agent-send", "name": "a"}, "text", "a string", None),
    ({"cmd": "agent-send", "name": True, "text": "hi"}, "name", "a string", "a boolean"),
    ({"cmd": "agent-stop", "name": 7}, "name", "a string", "a number"),
    ({"cmd": "add", "watcher": "app.log"}, "watcher", "an object", "a string"),
    ({"cmd": "add", "watcher": {"id": "w", "command": "true", "pattern": "x"},
      "endWithClient": "yes"}, "endWithClient", "true or false", "a string"),
])
def test_a_field_of_the_wrong_type_is_a_bad_request(runner: LiveRunner, payload: dict[str, Any],
                                                    field: str, allowed: str,
                                                    got: str | None) -> None:
    reply = runner.control(payload)
    cmd = payload["cmd"]
    if got is None:
        error = {"code": "bad_request", "message": f"`{cmd}` needs `{field}`: {allowed}",
                 "field": field, "expected": allowed}
    else:
        error = {"code": "bad_request", "message": f"`{cmd}`: `{field}` must be {allowed}, "
                 f"not {got}", "field": field, "expected": allowed, "got": got}
    assert reply == {"ok": False, "error": error}
    assert runner.control({"cmd": "status"})["watchers"] == ["app"]  # nothing stopped
    assert not [r for r in runner.records("a", "agents") if r["kind"] == "delivery"]


def test_an_added_command_without_cwd_runs_in_the_configs_folder(tmp_path: Path) -> None:
    """docs/control.md: a request has no file, so a command added without `cwd` runs in the
    folder of the runner's first config file, not in the runner's own working directory."""
    conf, elsewhere = tmp_path / "conf", tmp_path / "elsewhere"
    conf.mkdir()
    elsewhere.mkdir()
    r = LiveRunner(write_config(conf, {"watchers": []}), cwd=elsewhere)
    try:
        wait_for(lambda: running(r), "the runner to be running")
        reply = r.control({"cmd": "add", "watcher": {"id": "where", "command": "pwd",
                                                     "pattern": "/"}})
        assert reply["ok"], reply
        wait_for(lambda: r.matches("where"), "the command's one line")
    finally:
        assert r.stop() == 0
    assert [m["line"] for m in r.matches("where")] == [str(conf)]


def test_an_unknown_or_missing_command_is_a_bad_request(runner: LiveRunner) -> None:
    """docs/control.md: an unknown `cmd` is `bad_request` (`watchrun` exits 2 for it)."""
    known = "add, agent-send, agent-stop, clear, list, restart, start, status, stop"
    for payload, said in (({"cmd": "reboot"}, f"unknown command 'reboot'; known: {known}"),
                          ({"id": "app"}, f"the request has no `cmd`: one of {known}")):
        assert runner.control(payload) == {"ok": False, "error": {"code": "bad_request",
                                                                  "message": said}}
    assert runner.control({"cmd": "status"})["watchers"] == ["app"]  # nothing stopped


async def _echo(req: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, "echo": req}


def test_past_max_clients_every_request_is_told_busy_never_reset(tmp_path: Path) -> None:
    sock = tmp_path / "control.sock"

    async def main() -> None:
        server = ControlServer(sock, _echo)
        await server.start()
        held = [await asyncio.open_unix_connection(str(sock))
                for _ in range(control.MAX_CLIENTS)]  # idle: each holds a client slot
        try:
            deadline = time.monotonic() + DEADLINE_S
            while len(server._clients) < control.MAX_CLIENTS:
                assert time.monotonic() < deadline, "the held clients were not accepted"
                await asyncio.sleep(0.005)
            for _ in range(40):
                reply = await asyncio.to_thread(request, sock, {"cmd": "stop", "id": "app"}, 5)
                assert reply["error"]["code"] == "busy", reply
        finally:
            for _, writer in held:
                writer.close()
            await server.close()

    asyncio.run(main())


def test_a_list_the_runner_refuses_is_said_as_its_refusal(tmp_path: Path) -> None:
    """A runner that answered `list` with `busy` was said to have "not answered", with its
    error shown as a Python dict (`{'code': 'busy', …}`)."""
    from watchrun.cli.live import NoAnswer, live_statuses

    async def busy(req: dict[str, Any]) -> dict[str, Any]:
        return {"ok": False, "error": {"code": "busy",
                                       "message": "more than 16 clients at once; retry"}}

    async def main() -> None:
        server = ControlServer(tmp_path / "control.sock", busy)
        await server.start()
        try:
            with pytest.raises(NoAnswer) as said:
                await asyncio.to_thread(live_statuses, tmp_path)
        finally:
            await server.close()
        assert str(said.value) == ("the runner refused `list` (busy: more than 16 clients at "
                                   "once; retry)")

    asyncio.run(main())


def _resetting_runner(path: Path, stop: threading.Event, listening: threading.Event) -> None:
    """A runner that accepts, lets the request arrive and closes with it unread (a reset)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen(8)
        listening.set()
        listener.settimeout(0.05)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            select.select([conn], [], [], DEADLINE_S)
            conn.close()


@contextlib.contextmanager
def resetting_runner(root: Path) -> Iterator[None]:
    """`_resetting_runner` on `root`'s control socket, from when it listens (a client in this
    process may connect at once: between bind and listen it would be refused, "no runner")."""
    root.mkdir(exist_ok=True)
    stop, listening = threading.Event(), threading.Event()
    server = threading.Thread(target=_resetting_runner,
                              args=(root / "control.sock", stop, listening))
    server.start()
    try:
        assert listening.wait(DEADLINE_S), "the socket"
        yield
    finally:
        stop.set()
        server.join()


def test_stop_against_a_runner_that_does_not_answer_is_an_error(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"watchers": [{"id": "app", "path": "app.log",
                                                   "pattern": "ERROR"}]})
    argv = ["stop", "app", "-c", str(config)]
    nobody = cli(*argv)
    assert (nobody.returncode, nobody.stdout) == (
        0, "app is already stopped (no runner is live on this output dir)\n")
    with resetting_runner(tmp_path / ".watchrun"):
        done = cli(*argv)
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert "stopped" not in done.stdout
    assert done.stderr.startswith("watchrun: error: the runner did not answer: "), done.stderr


def _trickling_runner(path: Path, stop: threading.Event) -> None:
    """A runner that accepts and sends a byte of its reply every 0.1 s, never its end (a
    runner stalled in the middle of a reply)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen(8)
        listener.settimeout(0.05)
        conns: list[socket.socket] = []
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                conns.append(listener.accept()[0])
            for conn in conns:
                with contextlib.suppress(OSError):
                    conn.send(b" ")
            stop.wait(0.1)
        for conn in conns:
            conn.close()


def test_a_reply_that_never_ends_is_bounded_by_the_timeout(tmp_path: Path) -> None:
    """`list` waits LIST_TIMEOUT_S (5 s) for a runner's answer, then says so and reads the
    snapshots. A runner that sent a byte now and then, never the reply's end, held it forever:
    each byte restarted the socket's timeout."""
    from watchrun.cli.live import LIST_TIMEOUT_S

    out = tmp_path / "out"
    out.mkdir()
    stop = threading.Event()
    server = threading.Thread(target=_trickling_runner, args=(out / "control.sock", stop))
    server.start()
    try:
        wait_for(lambda: (out / "control.sock").exists(), "the socket")
        began = time.monotonic()
        done = cli("list", "--output-dir", out)
        took = time.monotonic() - began
    finally:
        stop.set()
        server.join()
    assert done.returncode == 0, done.stderr
    assert done.stderr == ("watchrun: warning: the runner did not answer (timed out (on "
                           f"{out}/control.sock)); showing the status snapshots it last "
                           "wrote, which may be stale\n")
    assert done.stdout == f"no watchers have run with output dir {out}\n"
    assert LIST_TIMEOUT_S <= took < DEADLINE_S


def test_list_and_status_say_when_a_live_runner_did_not_answer(tmp_path: Path) -> None:
    """A runner that is there but does not answer (its loop stuck, a reset) was taken for no
    runner: `list` and `status` showed the last snapshots without a word, and `status` of a
    watcher only the live runner knew (added at run time, no snapshot yet) said `not_found`
    (exit 2) of a watcher that may well be running. Now they say the runner did not answer;
    `status` of an id no snapshot holds cannot say it is not there (exit 3, `no_answer`)."""
    config = write_config(tmp_path, {"watchers": [{"id": "app", "path": "app.log",
                                                   "pattern": "ERROR"}]})
    state = tmp_path / ".watchrun" / "state"
    state.mkdir(parents=True)
    snapshot = {"id": "app", "status": "running", "source": "file", "matchCount": 2}
    (state / "app.status.json").write_text(json.dumps(snapshot))
    with resetting_runner(tmp_path / ".watchrun"):
        ran = {cmd: inproc(tmp_path, *cmd.split(), "-c", str(config))  # (tests/inproc.py)
               for cmd in ("list", "status app", "status added-live", "list --json")}
    stale = ("watchrun: warning: the runner did not answer (", "); showing the status "
             "snapshots it last wrote, which may be stale\n")
    for cmd in ("list", "status app", "list --json"):
        done = ran[cmd]
        assert done.returncode == 0, (cmd, done.stderr)
        assert done.stderr.startswith(stale[0]) and done.stderr.endswith(stale[1]), done.stderr
    assert "app" in ran["list"].stdout
    assert [w["id"] for w in json.loads(ran["list --json"].stdout)["watchers"]] == ["app"]
    unknown = ran["status added-live"]
    assert unknown.returncode == 3, unknown.stderr
    assert "watchrun: error: the runner did not answer (" in unknown.stderr
    assert "and no status snapshot of 'added-live' is in " in unknown.stderr, unknown.stderr


def test_a_stop_sent_while_a_restart_holds_the_watcher_stops_it(tmp_path: Path) -> None:
    """`stop` looked for the watcher before it waited its turn: sent while a `restart` (or a
    reload) had it stopped and was starting it again, it was answered `not_found` (`watchrun
    stop`: "already stopped", exit 0), and the watcher ran on. It waits its turn now, then
    stops the watcher the restart started."""
    go = tmp_path / "go"
    script = (f"trap 'until [ -e {go} ]; do sleep 0.02; done; exit 0' TERM; echo up; "
              "while :; do sleep 0.02; done")
    config = write_config(tmp_path, {"limits": {"stopTimeout": "30s"}, "watchers": [
        {"id": "c", "command": script, "pattern": "up"}]})
    r = LiveRunner(config)
    replies: dict[str, dict[str, Any]] = {}

    def ask(name: str, payload: dict[str, Any]) -> threading.Thread:
        def call() -> None:
            replies[name] = r.control(payload)
        thread = threading.Thread(target=call)
        thread.start()
        return thread

    try:
        wait_for(lambda: r.matches("c"), "the command to be up")
        restart = ask("restart", {"cmd": "restart", "id": "c"})
        wait_for(lambda: r.control({"cmd": "status"})["watchers"] == [], "the restart's stop")
        stop = ask("stop", {"cmd": "stop", "id": "c"})
        r.control({"cmd": "status"})  # (the stop is in: answered, or waiting its turn)
        go.touch()
        restart.join(DEADLINE_S)
        stop.join(DEADLINE_S)
        assert replies["restart"]["ok"] is True
        assert replies["stop"] == {"ok": True, "wasRunning": True, "message": "stopped c"}
        assert r.control({"cmd": "status"})["watchers"] == []
        (record,) = r.control({"cmd": "list"})["watchers"]
        assert record["status"] == "stopped"
    finally:
        assert r.stop() == 0


@pytest.mark.parametrize("field", [
    {"path": "/tmp/\ud800.log"},
    {"command": "echo \udbff"},
    {"command": ["echo", "a\ud800"]},
    {"command": "true", "cwd": "/tmp/\udc00"},
    {"command": "true", "env": {"A": "\ud83d"}},
])
def test_an_add_whose_path_or_command_no_os_call_takes_is_invalid(
        runner: LiveRunner, field: dict[str, Any]) -> None:
    """JSON allows a lone surrogate (`"\\ud800"`), which no file name, argv or environment can
    hold: such an `add` passed every check, failed at its start (`start_failed`, a `warning:
    internal: UnicodeEncodeError(…)` in the log) and was held, stopped, until `clear`. It is
    refused `invalid` with the others now. (U+DC80-U+DCFF, a name's undecodable bytes, pass.)"""
    watcher = {"id": "odd", "pattern": "x", **field}
    reply = runner.control({"cmd": "add", "watcher": watcher})
    assert reply["ok"] is False and reply["error"]["code"] == "invalid", reply
    (d,) = reply["error"]["diagnostics"]
    assert "lone surrogate" in d["message"] and d["path"].startswith(
        f"watchers[0].{next(k for k in ('env', 'cwd', 'command', 'path') if k in field)}")
    assert [w["id"] for w in runner.control({"cmd": "list"})["watchers"]] == ["app"]
    assert "internal" not in runner.stderr()
