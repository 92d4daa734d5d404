"""`watchrun add --wake yes`: the CLI's error advises what `--wake` takes, not the config's
`true`/`false` (which the flag cannot say); a control request's `wake` keeps that advice."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from liverunner import LiveRunner, cli, write_config

HINT = ("(--wake takes an agent's name, once per agent; leave it out and the runner's "
        "limits.wakeOnMatch decides)")


def wr(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli(*args, cwd=cwd, timeout=60)


@pytest.mark.parametrize("agents", [[], [{"name": "triage", "provider": "mock"}]])
def test_add_wake_yes_is_told_what_the_flag_takes(tmp_path: Path,
                                                  agents: list[dict[str, str]]) -> None:
    """It said "(write true or false)": `--wake true` is an agent named `true` too, so the
    user could do nothing with it. Now it says what `--wake` takes, in text and in --json;
    the same `wake: "yes"` in a control request is still told to write true or false."""
    (tmp_path / "cfg.log").write_text("")
    write_config(tmp_path, {"output": {"dir": "out"}, "agents": agents,
                            "watchers": [{"id": "cfg", "path": "cfg.log", "pattern": "x"}]})
    r = LiveRunner(tmp_path / "watch.yaml")
    r.out = tmp_path / "out"
    try:
        r.wait_running()
        known = "; the config has no agents" if not agents else "; agents: triage"
        p = wr(tmp_path, "add", "w", "--wake", "yes", "--path", "a.log", "--pattern", "x")
        assert p.returncode == 2, p
        assert f"error: watchers[0].wake: no agent named `yes`{known} {HINT}" in p.stderr
        assert "true or false" not in p.stderr
        p = wr(tmp_path, "add", "w", "--wake", "yes", "--path", "a.log", "--pattern", "x",
               "--json")
        (d,) = json.loads(p.stdout)["error"]["diagnostics"]
        assert d["message"] == f"no agent named `yes`{known} {HINT}"
        reply = r.control({"cmd": "add", "watcher": {
            "id": "w", "path": str(tmp_path / "a.log"), "pattern": "x", "wake": "yes"}})
        (d,) = reply["error"]["diagnostics"]
        assert d["message"] == f"no agent named `yes`{known} (write true or false)"
    finally:
        assert r.stop() == 0
