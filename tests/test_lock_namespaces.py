"""Runners and `agent run`s in other pid namespaces (containers sharing an output dir): whether
one holds its lock is the kernel's answer, not /proc/locks' (which lists only the locks of the
processes its pid namespace can see), and a pid is named only as the caller sees it (an
explorer's F1)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pidns
from liverunner import cli, processes, wait_for, write_config

pytestmark = pidns.needs_pid_namespaces


def _ns_pid(pid: int) -> str:
    """The pid of a process in its own (innermost) pid namespace."""
    status = Path(f"/proc/{pid}/status").read_text()
    return status.split("NSpid:")[1].split("\n")[0].split()[-1]


def _child_of(parent: int) -> int:
    """The host pid of the process `unshare` forked (pid 1 of its namespace)."""
    return int(wait_for(lambda: next((pid for pid, st, _ in processes()
                                      if int(st[1]) == parent), None), "unshare's child"))


def _error(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    """The `--json` error document of a command that failed."""
    err = json.loads(done.stdout or done.stderr)["error"]
    assert isinstance(err, dict), done
    return err


def test_a_runner_in_another_pid_namespace_is_no_answer_never_no_runner(tmp_path: Path) -> None:
    """F1: a runner in one pid namespace, its socket removed (a tmp cleaner); a CLI in a
    sibling namespace read an empty /proc/locks: `stop` said "already stopped (no runner is
    live)", exit 0, `status` `no_runner`, and the MCP server took no runner for none, while
    the runner held control.lock and ran on."""
    (tmp_path / "app.log").write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    out = tmp_path / ".watchrun"
    runner = pidns.start(tmp_path, "run", "-c", str(config))
    try:
        wait_for(lambda: (out / "state" / "app.status.json").exists(), "the runner's snapshot")
        (out / "control.sock").rename(out / "saved.sock")
        stop = pidns.run(tmp_path, "stop", "app", "-c", str(config), "--json")
        assert stop.returncode == 3, (stop.stdout, stop.stderr)
        err = _error(stop)
        assert err["code"] == "no_answer", err
        assert str(err["message"]).startswith(
            f"a runner (pid not visible from here) holds {out / 'control.lock'} but cannot be "
            "reached"), err
        status = pidns.run(tmp_path, "status", "-c", str(config), "--json")
        assert (status.returncode, _error(status)["code"]) == (3, "no_answer"), status
        live = pidns.run(tmp_path, sys.executable, "-c",
                         "import sys; from pathlib import Path\n"
                         "from watchrun.mcp.runners import LiveRunner\n"
                         "print(LiveRunner(Path(sys.argv[1])).live())", str(out / "control.sock"))
        assert live.stdout.split() == ["True"], live  # (the session does not start its own)
        host = cli("stop", "app", "-c", config, "--json")  # the host sees it: named, host pid
        pid = _child_of(runner.pid)
        assert _ns_pid(pid) == "1"
        assert str(_error(host)["message"]).startswith(f"a runner (pid {pid}) holds "), host
        second = pidns.run(tmp_path, "run", "-c", str(config))
        assert second.returncode == 3, second.stderr
        assert (f"another runner is live on {out} (pid not visible from here, which holds "
                "control.lock)") in second.stderr
        (out / "saved.sock").rename(out / "control.sock")
        listed = cli("list", "-c", config, "--json")  # it ran on all along
        assert [w["status"] for w in json.loads(listed.stdout)["watchers"]] == ["running"]
    finally:
        pidns.end(runner, out / "control.lock")
