"""A live runner whose control.sock does not reach it (removed, a file, a symlink, another
process's socket) is never taken for "no runner", and a runner that does not answer is
`no_answer` for every command (a tester's F2, F3 and F11)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inproc import inproc
from liverunner import (
    DEADLINE_S,
    LiveRunner,
    cli,
    hold_runner_lock,
    wait_for,
    watchrun_bin,
    write_config,
)
from mcpclient import mcp_inproc
from test_control_faults import resetting_runner

from watchrun.runtime.client import NoReply, NotListening, request


def wr(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`watchrun ARGS -c CONFIG` in this process (tests/inproc.py: the same `main`, output and
    status); `start`, which inproc refuses, as a process of its own (`cli`)."""
    if args[:1] == ("start",):
        return cli(*args, "-c", config)
    return inproc(config.parent, *args, "-c", str(config))


def wr_all(config: Path, runs: dict[str, tuple[str, ...]]
           ) -> dict[str, subprocess.CompletedProcess[str]]:
    """`wr` of each of `runs` at once (each waits out the client's SETTLE_S on its own)."""
    started = {name: subprocess.Popen([watchrun_bin(), *args, "-c", str(config)], text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
               for name, args in runs.items()}
    done: dict[str, subprocess.CompletedProcess[str]] = {}
    for name, proc in started.items():
        out, err = proc.communicate(timeout=DEADLINE_S)
        done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


def error_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The `--json` error document of a command that failed."""
    err = json.loads(done.stdout)["error"]
    assert isinstance(err, dict)
    return err


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveRunner]:
    """A runner with one file watcher, `app`, running."""
    (tmp_path / "app.log").write_text("")
    config = write_config(tmp_path, {"watchers": [{"id": "app", "path": "app.log",
                                                   "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        yield r
    finally:
        assert r.stop() == 0


class FakeRunner:
    """A socket at `path` that answers every request `{"ok": true, …}` (as a stranger's might)
    and counts the connections it accepted."""

    def __init__(self, path: Path) -> None:
        self.accepted = 0
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.server.accept()
                self.accepted += 1
                with conn:
                    conn.recv(65536)
                    conn.sendall(b'{"ok": true, "wasRunning": true, "message": "stopped FAKE",'
                                 b' "state": "running", "watchers": []}\n')

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()
        self.thread.join(DEADLINE_S)


def still_running(r: LiveRunner, sock: Path) -> None:
    """The runner (asked through its own socket, moved to `sock`) still runs `app`."""
    reply = request(sock, {"cmd": "list"}, timeout=DEADLINE_S)
    assert [(w["id"], w["status"]) for w in reply["watchers"]] == [("app", "running")]


@pytest.mark.parametrize("replaced", ["removed", "a file"])
def test_a_runner_whose_socket_is_gone_is_no_answer_never_no_runner(
        live: LiveRunner, replaced: str) -> None:
    """control.sock removed (a tmp cleaner) or replaced by a file while the runner lives:
    `stop` said "already stopped (no runner is live)", exit 0, and `status` said `no_runner`,
    though the runner held control.lock and ran the watcher. Now every command that needs the
    runner is `no_answer` (exit 3) naming its pid, and `list` says it cannot be reached."""
    saved = live.out / "saved.sock"
    (live.out / "control.sock").rename(saved)
    if replaced == "a file":
        (live.out / "control.sock").write_text("junk\n")
    config, log = live.config, str(live.config.parent / "new.log")
    runs = wr_all(config, {
        "stop": ("stop", "app", "--json"), "status": ("status", "--json"),
        "clear": ("clear", "--json"), "start": ("start", "app", "--json"),
        "restart": ("restart", "app", "--json"),
        "add": ("add", "new", "--path", log, "--pattern", "x", "--json"),
        "plain stop": ("stop", "app"), "list": ("list",)})
    plain, listed = runs.pop("plain stop"), runs.pop("list")
    for cmd, done in runs.items():
        assert done.returncode == 3, (cmd, done.stdout, done.stderr)
        err = error_of(done)
        assert err["code"] == "no_answer", (cmd, err)
        assert err["message"].startswith(f"a runner (pid {live.pid}) holds "), (cmd, err)
        assert f"cannot be reached on {live.out / 'control.sock'}: " in err["message"]
        assert "nothing was sent to it" in err["message"]
    assert plain.returncode == 3 and "already stopped" not in plain.stdout, plain
    assert listed.returncode == 0, listed.stderr
    assert listed.stderr.startswith(f"watchrun: warning: a runner (pid {live.pid}) holds "), \
        listed.stderr
    assert "may be stale" in listed.stderr
    still_running(live, saved)
    assert not (live.out / "watchers" / "new.jsonl").exists()  # the add was never sent


def test_the_mcp_tool_says_a_runner_it_cannot_reach_is_there(live: LiveRunner) -> None:
    """`watch list` said `no watchers (no runner)` and `watch stop` `cmd was not running` of a
    runner whose socket was moved away; now each is an error naming it."""
    saved = live.out / "saved.sock"
    (live.out / "control.sock").rename(saved)

    async def body() -> None:
        async with mcp_inproc(live.config.parent, "-c", str(live.config)) as c:
            for args in ({"action": "list"}, {"action": "stop", "id": "app"},
                         {"action": "add", "path": "new.log", "pattern": "x"}):
                text = await c.error(**args)
                assert f": a runner (pid {live.pid}) holds " in text, (args, text)
                assert "cannot be reached" in text and "try again" not in text, text

    asyncio.run(body())
    still_running(live, saved)


def test_a_symlink_at_the_socket_is_never_connected_through(live: LiveRunner,
                                                            tmp_path: Path) -> None:
    """docs/security.md: a symlink at control.sock is never connected through. Clients followed
    it and took the answers of whatever listened at its target (`stopped FAKE`, exit 0)."""
    saved = live.out / "saved.sock"
    (live.out / "control.sock").rename(saved)
    (tmp_path / "fake").mkdir()
    fake = FakeRunner(tmp_path / "fake" / "s.sock")
    try:
        (live.out / "control.sock").symlink_to(tmp_path / "fake" / "s.sock")
        done = wr(live.config, "stop", "app", "--json")
        assert done.returncode == 3, (done.stdout, done.stderr)
        err = error_of(done)
        assert err["code"] == "no_answer"
        assert "it is a symlink, never connected through" in err["message"], err
        with pytest.raises(NoReply, match="symlink"):  # (Unreachable: not "no runner")
            request(live.out / "control.sock", {"cmd": "list"})
        assert fake.accepted == 0
    finally:
        fake.close()
    still_running(live, saved)


def test_a_socket_served_by_another_process_than_the_runner_is_not_trusted(
        live: LiveRunner) -> None:
    """A socket bound at control.sock by a process other than the holder of control.lock (its
    peer pid, SO_PEERCRED) is refused before anything is sent."""
    saved = live.out / "saved.sock"
    (live.out / "control.sock").rename(saved)
    fake = FakeRunner(live.out / "control.sock")
    try:
        done = wr(live.config, "stop", "app", "--json")
        assert done.returncode == 3, (done.stdout, done.stderr)
        err = error_of(done)
        assert err["code"] == "no_answer"
        assert err["message"] == (
            f"process {os.getpid()} answers on {live.out / 'control.sock'}, not the runner "
            f"that holds {live.out / 'control.lock'} (pid {live.pid}): not trusted, nothing "
            "was sent to it")
        wait_for(lambda: fake.accepted == 1, "the fake's one connection")
    finally:
        fake.close()
    still_running(live, saved)


def test_a_symlink_or_a_file_with_no_runner_is_no_runner(tmp_path: Path) -> None:
    """With nothing holding control.lock, a symlink or a file at control.sock is no runner, and
    the symlink's target is not connected to."""
    out = tmp_path / "out"
    out.mkdir()
    fake = FakeRunner(tmp_path / "s.sock")
    try:
        (out / "control.sock").symlink_to(tmp_path / "s.sock")
        with pytest.raises(NotListening, match="it is a symlink, never connected through"):
            request(out / "control.sock", {"cmd": "list"})
        (out / "control.sock").unlink()
        (out / "control.sock").write_text("")
        with pytest.raises(NotListening, match="it is not a socket"):
            request(out / "control.sock", {"cmd": "list"})
        assert fake.accepted == 0
    finally:
        fake.close()


@pytest.mark.parametrize("argv", [["add", "zz", "--path", "zz.log", "--pattern", "x"],
                                  ["start", "app"], ["restart", "app"]])
def test_add_start_restart_that_get_no_reply_are_no_answer(tmp_path: Path,
                                                           argv: list[str]) -> None:
    """A runner reached that gives no reply (reset here; a SIGSTOPped one times out): `add`,
    `start` and `restart` said `no_runner`, which tells a script nothing was done, though the
    runner may carry the request out (a stalled one did, once continued). Now `no_answer`,
    exit 3, as `stop`, `status` and `clear` say, and the message says it."""
    config = write_config(tmp_path, {"watchers": [{"id": "app", "path": "app.log",
                                                   "pattern": "ERROR"}]})
    with resetting_runner(tmp_path / ".watchrun"):
        done = wr(config, *argv, "--json")
    assert done.returncode == 3, (done.stdout, done.stderr)
    err = error_of(done)
    assert err["code"] == "no_answer", err
    assert err["message"].startswith("the runner did not answer: "), err
    assert err["message"].endswith("; it may still be carried out (`watchrun list` shows what "
                                   "the runner holds once it answers)"), err


def test_a_runner_that_holds_the_lock_before_its_socket_is_waited_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A runner takes control.lock, then binds control.sock (and at its end removes the socket,
    then lets go): a client in between found the lock held and no socket, and said the runner
    could not be reached (the full suite hit it while tests waited for a runner to start). It
    tries again for up to SETTLE_S: here the socket is bound once the client has looked at the
    lock, and the request is answered."""
    from watchrun.runtime import client

    out = tmp_path / "out"
    hold_runner_lock(out)  # this process is the "runner": its socket's peer is the holder
    looked = threading.Event()

    def holders(path: Path) -> list[int]:
        found = real(path)
        looked.set()
        return found

    real = client.holders
    monkeypatch.setattr(client, "holders", holders)
    replies: list[dict[str, Any]] = []
    asking = threading.Thread(target=lambda: replies.append(
        request(out / "control.sock", {"cmd": "status"}, timeout=DEADLINE_S)))
    asking.start()
    assert looked.wait(DEADLINE_S)
    fake = FakeRunner(out / "control.sock")
    try:
        asking.join(DEADLINE_S)
    finally:
        fake.close()
    assert replies and replies[0]["ok"] is True
    assert fake.accepted == 1
