"""`endWithClient` from a client the runner cannot see (its pid namespace is not the runner's,
nor one of its children: SO_PEERCRED gives pid 0) is refused, never accepted for a watcher that
then outlives its client; and `mine` never takes two such clients for one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
from liverunner import DEADLINE_S, write_config
from mcpclient import mcp_inproc
from pidns import NsRunner, needs_pid_namespaces

LOOP = "while true; do echo ERROR s; sleep 0.3; done"
ADD = ("import json, sys; from pathlib import Path; from watchrun.runtime.client import request; "
       "print(json.dumps(request(Path(sys.argv[1]), json.loads(sys.argv[2]), 30)))")


def _ask(sock: Path, payload: str) -> dict[str, object]:
    """The reply to a request sent by a process of its own, which has ended when this returns."""
    import json

    done = subprocess.run([sys.executable, "-c", ADD, str(sock), payload], capture_output=True,
                          text=True, timeout=DEADLINE_S, check=False)
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout)
    assert isinstance(reply, dict)
    return reply


def _listed(runner: NsRunner) -> dict[str, str]:
    found = runner.request({"cmd": "list"})["watchers"]
    assert isinstance(found, list)
    return {str(w["id"]): str(w["status"]) for w in found}


@needs_pid_namespaces
def test_an_unseen_client_cannot_tie_a_watcher_to_itself(tmp_path: Path) -> None:
    """explore-multirun F4: the runner in a container, clients on the host. The add was `ok`;
    its client ended and the watcher ran on (the runner logged that it could not follow
    "process 0"), and another host process's `stop sess mine:true` stopped it."""
    (tmp_path / "app.log").write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    runner = NsRunner(config)
    sock = runner.out / "control.sock"
    try:
        runner.wait_running()
        reply = _ask(sock, '{"cmd": "add", "endWithClient": true, "watcher": '
                     f'{{"id": "sess", "command": "{LOOP}", "pattern": "ERROR"}}}}')
        assert reply["ok"] is False, reply
        error = reply["error"]
        assert isinstance(error, dict) and error["code"] == "cannot_follow_client", reply
        assert "pid namespace the runner cannot see" in str(error["message"])
        assert "nothing was added" in str(error["message"])
        assert "sess" not in _listed(runner)
        kept = _ask(sock, '{"cmd": "add", "watcher": '
                    f'{{"id": "kept", "command": "{LOOP}", "pattern": "ERROR"}}}}')
        assert kept["ok"] is True, kept  # (without endWithClient: the client stops it)
        other = _ask(sock, '{"cmd": "stop", "id": "kept", "mine": true}')
        assert other["ok"] is False and isinstance(other["error"], dict), other
        assert other["error"]["code"] == "not_found"
        assert "it can have added none" in str(other["error"]["message"])
        assert _listed(runner)["kept"] == "running"
        assert runner.request({"cmd": "status"})["problems"] == []  # (none it could not follow)
    finally:
        runner.close()


@needs_pid_namespaces
def test_an_mcp_session_outside_the_runners_namespace_adds_nothing_and_says_why(
        tmp_path: Path) -> None:
    """Every `watchrun mcp` add sends `endWithClient`: a session on the host of a runner in a
    container had its watchers accepted, and a killed server left them running."""
    (tmp_path / "app.log").write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    runner = NsRunner(config)
    try:
        runner.wait_running()

        async def body() -> None:
            async with mcp_inproc(tmp_path, "-c", str(config)) as c:
                said = await c.error(action="add", command=LOOP, pattern="ERROR", id="m1")
                assert said.startswith(f"watch add: the runner live on {runner.out} ")
                assert "cannot see this MCP server's process" in said
                assert "nothing was added" in said
        anyio.run(body)
        assert "m1" not in _listed(runner)
    finally:
        runner.close()
