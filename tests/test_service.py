"""Running as a service: sd_notify, SIGHUP reload, the control socket, metrics, views."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import urllib.request
from pathlib import Path

import pytest
from inproc import inproc
from liverunner import LiveRunner, wait_for, write_config
from liverunner import cli as process_cli
from recordcheck import validate_records


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A `run` as a process; the views and requests to the live runner in this process
    (tests/inproc.py: the console script's `main`, without a new interpreter's CPU)."""
    if args[0] != "run":
        return inproc(cwd, *args)
    return process_cli(*args, cwd=cwd)


@pytest.fixture
def notify_socket(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(20)
    yield path, sock
    sock.close()


def recv_until(sock: socket.socket, word: str) -> list[str]:
    seen: list[str] = []
    while not any(word in m for m in seen):
        seen.append(sock.recv(4096).decode())
    return seen


def test_sd_notify_ready_reloading_stopping_and_children_do_not_inherit(
        tmp_path: Path, notify_socket: tuple[Path, socket.socket]) -> None:
    path, sock = notify_socket
    env_dump = tmp_path / "child-env"
    config = write_config(tmp_path, {"watchers": [
        {"id": "c", "command": f"env > {env_dump}; echo up; exec sleep 1000", "pattern": "up"}]})
    r = LiveRunner(config, env={"NOTIFY_SOCKET": str(path)})
    try:
        ready = recv_until(sock, "READY=1")
        assert any("STATUS=" in m for m in ready)
        wait_for(lambda: r.matches("c"), "the command's output")
        assert "NOTIFY_SOCKET" not in env_dump.read_text()
        r.send(signal.SIGHUP)
        msgs = recv_until(sock, "RELOADING=1")
        assert any("MONOTONIC_USEC=" in m for m in msgs)
        recv_until(sock, "READY=1")
    finally:
        r.send(signal.SIGTERM)
        recv_until(sock, "STOPPING=1")
        assert r.stop() == 0


def test_sighup_restarts_changed_watchers_keeps_unchanged_and_survives_bad_config(
        tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("")
    conf = {"watchers": [
        {"id": "keep", "command": "echo $$$$; exec sleep 1000", "pattern": "^[0-9]+$"},
        {"id": "file", "path": "app.log", "pattern": "ERROR"},
        {"id": "change", "path": "app.log", "pattern": "WARN"},
    ]}
    config = write_config(tmp_path, conf)
    r = LiveRunner(config)
    try:
        wait_for(lambda: r.matches("keep"), "the pid line")
        pid_before = r.matches("keep")[0]["line"]
        r.wait_running()  # (the command can print before the file watchers hold the file's end)
        with open(log, "a") as fh:
            fh.write("ERROR 1\nWARN 1\n")
        wait_for(lambda: r.matches("file") and r.matches("change"), "first matches")
        conf["watchers"][2]["pattern"] = "INFO"
        write_config(tmp_path, conf)
        r.send(signal.SIGHUP)
        r.wait_log("reloaded")
        with open(log, "a") as fh:
            fh.write("ERROR 2\nINFO 2\n")
        wait_for(lambda: len(r.matches("file")) == 2, "the unchanged file watcher's next match")
        wait_for(lambda: any(m["line"] == "INFO 2" for m in r.matches("change")), "new pattern")
        config.write_text("watchers: [{id: broken, pattern: '('}]\n")
        r.send(signal.SIGHUP)
        r.wait_log("reload failed")
        assert r.proc.poll() is None
    finally:
        assert r.stop() == 0
    # the unchanged command was never restarted: one start record, the same pid throughout
    starts = [x for x in r.records("keep") if x["kind"] == "start"]
    assert len(starts) == 1 and str(starts[0]["pid"]) == pid_before
    assert [m["line"] for m in r.matches("file")] == ["ERROR 1", "ERROR 2"]  # no re-read
    assert "watchers[0].pattern" in r.stderr()


def test_views_and_control_socket(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"},
        {"id": "cmd", "command": "exec sleep 1000", "pattern": "x"},
    ]})
    r = LiveRunner(config)
    try:
        r.wait_log("running")
        with open(log, "a") as fh:
            fh.write("INFO a\nERROR \x1b[31mred\x1b[0m b\nINFO c\n")
        wait_for(lambda: r.matches("app"), "a match")
        sock = tmp_path / ".watchrun" / "control.sock"
        assert (os.stat(sock).st_mode & 0o777) == 0o600
        wait_for(lambda: "app" in cli("list", "-c", "watch.yaml", cwd=tmp_path).stdout, "list")
        p = cli("matches", "app", "-c", "watch.yaml", cwd=tmp_path)
        assert p.returncode == 0 and "ERROR red b" in p.stdout and "\x1b" not in p.stdout
        wait_for(lambda: "INFO c" in cli("logs", "app", "-c", "watch.yaml", cwd=tmp_path).stdout,
                 "logs")
        status = json.loads(cli("status", "app", "--json", "-c", "watch.yaml", cwd=tmp_path)
                            .stdout)
        assert status["id"] == "app" and status["live"] is True
        p = cli("stop", "cmd", "-c", "watch.yaml", cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        wait_for(lambda: r.records("cmd")[-1]["kind"] == "stop", "cmd stopped")
        p = cli("stop", "nope", "-c", "watch.yaml", cwd=tmp_path)
        assert p.returncode == 2 and "nope" in p.stderr
        p = cli("clear", "-c", "watch.yaml", cwd=tmp_path)
        assert p.returncode == 0 and "cleared 1" in p.stdout
    finally:
        assert r.stop() == 0
    listed = json.loads(cli("list", "--json", "-c", "watch.yaml", cwd=tmp_path).stdout)
    assert [s["id"] for s in listed["watchers"]] == ["app"]
    assert listed["watchers"][0]["live"] is False
    p = cli("stop", "app", "-c", "watch.yaml", cwd=tmp_path)  # idempotent, like systemctl stop
    assert p.returncode == 0 and "already stopped (no runner is live" in p.stdout
    p = cli("clear", "-c", "watch.yaml", cwd=tmp_path)  # needs the runner
    assert p.returncode == 3 and "no live runner" in p.stderr


def test_metrics_and_healthz(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = write_config(tmp_path, {"watchers": [
        {"id": "cmd", "command": "echo ERROR one; echo fine; exec sleep 1000",
         "pattern": "ERROR"}]})
    r = LiveRunner(config, "--metrics", f"127.0.0.1:{port}")
    try:
        wait_for(lambda: r.matches("cmd"), "a match")

        def get(path: str) -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
                return str(resp.read().decode())

        body = wait_for(lambda: get("/metrics"), "metrics")
        assert 'watchrun_matches_total{watcher="cmd"} 1' in body
        assert 'watchrun_lines_total{watcher="cmd"} 2' in body
        assert get("/healthz") == "ok\n"
    finally:
        assert r.stop() == 0


def test_bad_metrics_address_is_a_usage_error(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"watchers": [{"id": "c", "command": "true", "pattern": "x"}]})
    p = cli("run", "-c", str(config), "--metrics", "nonsense", cwd=tmp_path)
    assert p.returncode == 2 and "HOST:PORT" in p.stderr


def test_the_example_config_runs_end_to_end(tmp_path: Path) -> None:
    """What a newcomer sees: `watchrun -c watch.yaml.example` matches, wakes the mock agent,
    and SIGTERM ends it with exit 0 and no processes left."""
    example = Path(__file__).resolve().parents[1] / "watch.yaml.example"
    config = tmp_path / "watch.yaml.example"
    config.write_text(example.read_text())
    r = LiveRunner(config)
    try:
        wait_for(lambda: r.matches("app-log") and r.matches("demo-writer"), "demo matches")
        done = lambda: [x for x in r.records("triage", "agents")  # noqa: E731
                        if x["kind"] == "dispatch-finished"]
        finished = wait_for(done, "a finished agent turn")
    finally:
        assert r.stop() == 0
    assert r.left == []
    assert finished[0]["status"] == "done"
    assert "Mock triage" in finished[0]["reply"]
    validate_records(r.out / "watchers" / "app-log.jsonl")
    validate_records(r.out / "agents" / "triage.jsonl")


def test_json_log_format_for_machines(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"watchers": [
        {"id": "c", "command": "printf 'ERROR \\033[2Jboom\\n'", "pattern": "ERROR"}]})
    r = LiveRunner(config, "--log-format", "json")
    try:
        r.wait_log('"event":"exit"')
    finally:
        assert r.stop() == 0
    lines = [json.loads(x) for x in r.stderr().splitlines()]
    assert all({"ts", "level", "event", "msg"} <= set(x) for x in lines)
    ready = next(x for x in lines if x["event"] == "ready")
    assert (ready["watchers"], ready["agents"]) == (1, 0)
    match = next(x for x in lines if x["event"] == "match")
    assert match["watcher"] == "c" and match["line"] == "ERROR boom" and match["lineNo"] == 1
    assert "\x1b" not in match["msg"] and "ERROR boom" in match["msg"]
    exit_ = next(x for x in lines if x["event"] == "exit")
    assert (exit_["watcher"], exit_["run"], exit_["exitCode"]) == ("c", 1, 0)


def test_agent_send_past_max_turns_is_refused_not_queued_then_dropped(tmp_path: Path) -> None:
    """With `maxTurns` used up, `agent send` said "queued" (exit 0) for a prompt the turn's
    start dropped at once (`max-turns`): only the records and the runner's log said so. It is
    refused (`limit`, exit 3), saying when the next turn may start, and nothing is queued."""
    config = write_config(tmp_path, {
        "watchers": [{"id": "idle", "command": "exec sleep 1000", "pattern": "x"}],
        "agents": [{"name": "helper", "provider": "mock", "prompt": "{matches}",
                    "maxTurns": 1}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        assert cli("agent", "send", "helper", "one", "-c", "watch.yaml", cwd=tmp_path
                   ).returncode == 0
        wait_for(lambda: [x for x in r.records("helper", "agents")
                          if x["kind"] == "dispatch-finished"], "the first turn")
        p = cli("agent", "send", "helper", "two", "-c", "watch.yaml", cwd=tmp_path)
        assert p.returncode == 3, p.stdout + p.stderr
        assert "helper has had its 1 turn of the last hour (maxTurns)" in p.stderr, p.stderr
        assert "nothing was queued" in p.stderr
    finally:
        assert r.stop() == 0
    states = [x["deliveryState"] for x in r.records("helper", "agents") if x["kind"] == "delivery"]
    assert states == ["queued", "delivered"], states


def test_agent_send_and_stop_through_the_live_runner(tmp_path: Path) -> None:
    config = write_config(tmp_path, {
        "watchers": [{"id": "idle", "command": "exec sleep 1000", "pattern": "x"}],
        "agents": [{"name": "helper", "provider": "mock", "prompt": "{matches}"}]})
    r = LiveRunner(config)

    def finished() -> list[dict[str, object]]:
        return [x for x in r.records("helper", "agents") if x["kind"] == "dispatch-finished"]

    try:
        r.wait_log("running")
        p = cli("agent", "send", "helper", "say hi", "-c", "watch.yaml", cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        done = wait_for(finished, "the sent prompt's turn")
        assert done[0]["status"] == "done" and "say hi" in str(done[0]["reply"])
        p = cli("agent", "send", "helper", "[mock:hang] wait", "-c", "watch.yaml", cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        wait_for(lambda: len([x for x in r.records("helper", "agents")
                              if x["kind"] == "dispatch-start"]) == 2, "the second turn")
        p = cli("agent", "stop", "helper", "-c", "watch.yaml", cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        done = wait_for(lambda: finished()[1:], "the stopped turn")
        assert done[0]["status"] == "cancelled"
        p = cli("agent", "send", "nobody", "x", "-c", "watch.yaml", cwd=tmp_path)
        assert p.returncode == 2 and "nobody" in p.stderr
    finally:
        assert r.stop() == 0
    assert r.left == []
