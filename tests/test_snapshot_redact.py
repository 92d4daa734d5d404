"""With `output.redact`, a secret in a watcher's command line (a `${VAR}` password, also its
default label) leaves the machine in no status answer and no record: not in the snapshot files
or the JSONL a shipper sends on, not in `list --json`/`status`, not in the `watch` tool's answer
an MCP client sends its model."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import anyio
import mcp_types as types
from liverunner import LiveRunner, cli, wait_for, write_config
from mcpclient import mcp_inproc

SECRET = "s3cretPassw0rdValue"
TOKEN = "AKIAIOSFODNN7EXAMPLE"


def _cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DB_URL": f"postgres://app:{SECRET}@db.internal/x", "KEY": TOKEN}
    return cli(*args, cwd=folder, env=env)


def test_a_command_lines_secret_is_redacted_in_every_status_answer(tmp_path: Path) -> None:
    # before: the snapshot's `label` and `source`, the `start` record's `command`, the woken
    # agent's `delivery` records' `label`, `list --json` and the MCP `status` answer all held
    # postgres://app:s3cretPassw0rdValue@… and AKIA… verbatim
    cfg = tmp_path / "cfg"  # (the MCP server, started without the variables, reads no config)
    cfg.mkdir()
    write_config(cfg, {"output": {"redact": True}, "agents": [{"name": "t", "provider": "mock"}],
                       "watchers": [
        {"id": "db", "command": ["sh", "-c", "echo ERROR migrate ${DB_URL} --key=${KEY}"],
         "pattern": "ERROR", "wake": "t"},
        {"id": "dbs", "command": "echo migrate ${DB_URL} password=${KEY}", "pattern": "ERROR",
         "cwd": "."}]})
    done = _cli(cfg, "run", "--once")
    assert done.returncode == 0, done.stderr
    out = cfg / ".watchrun"
    state = out / "state"
    for name in ("db.status.json", "dbs.status.json"):
        data = (state / name).read_text()
        assert SECRET not in data and TOKEN not in data, data
        assert "[REDACTED:" in json.loads(data)["label"]
    for path in sorted(p for p in out.rglob("*") if p.is_file()):  # a `start` record too
        data = path.read_text(errors="replace")
        assert SECRET not in data and TOKEN not in data, (path.name, data[:600])
    for args in (["list", "--json"], ["status", "db"], ["status", "dbs", "--json"], ["list"]):
        shown = _cli(cfg, *args)
        assert shown.returncode == 0, shown.stderr
        assert SECRET not in shown.stdout and TOKEN not in shown.stdout, (args, shown.stdout)

    async def body() -> None:
        async with mcp_inproc(tmp_path, "--output-dir", str(out)) as c:
            for wid in ("db", "dbs"):
                result = await c.call(action="status", id=wid)
                assert not result.is_error and result.structured_content is not None
                block = result.content[0]
                assert isinstance(block, types.TextContent)
                said = block.text + json.dumps(result.structured_content)
                assert SECRET not in said and TOKEN not in said, said
                assert result.structured_content["watch"]["id"] == wid
    anyio.run(body)


GHP = "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def test_a_watched_for_secret_in_pattern_or_exclude_is_redacted_in_status(
        tmp_path: Path) -> None:
    # before (sec finding 4): with `output.redact`, `status` (text and --json), `list --json`
    # and state/c.status.json showed `pattern: ERR|ghp_…` and `exclude: AKIA…` as written, while
    # the label beside them was redacted and the MCP answer redacted them
    config = write_config(tmp_path, {"output": {"redact": True}, "watchers": [
        {"id": "c", "command": "echo ERR; exec sleep 60", "pattern": "ERR|${GHP}",
         "exclude": [TOKEN, "DEBUG"]}]})
    env = {**os.environ, "GHP": GHP}
    runner = LiveRunner(config, env=env)
    try:
        runner.wait_running()
        snap = tmp_path / ".watchrun" / "state" / "c.status.json"
        wait_for(lambda: snap.exists() and json.loads(snap.read_text())["linesRead"] >= 1,
                 "the watcher's snapshot")
        data = json.loads(snap.read_text())
        assert data["pattern"] == "ERR|[REDACTED:github-token]", data
        assert data["exclude"] == ["[REDACTED:aws-access-key-id]", "DEBUG"], data
        for args in (["status", "c"], ["status", "c", "--json"], ["list", "--json"], ["list"]):
            shown = cli(*args, cwd=tmp_path, env=env)
            assert shown.returncode == 0, (args, shown.stderr)
            assert GHP not in shown.stdout and TOKEN not in shown.stdout, (args, shown.stdout)
        status = cli("status", "c", cwd=tmp_path, env=env)
        assert status.returncode == 0, status.stderr
        text = status.stdout
        assert "ERR|[REDACTED:github-token]" in text and "[REDACTED:aws-access-key-id]" in text
        assert runner.stop() == 0
    finally:
        runner.close()


def test_without_output_redact_status_shows_the_pattern_as_written(tmp_path: Path) -> None:
    write_config(tmp_path, {"watchers": [{"id": "c", "command": "echo ERR",
                                          "pattern": "ERR|${GHP}", "exclude": [TOKEN]}]})
    done = cli("run", "--once", cwd=tmp_path, env={**os.environ, "GHP": GHP})
    assert done.returncode == 0, done.stderr
    data = json.loads((tmp_path / ".watchrun" / "state" / "c.status.json").read_text())
    assert (data["pattern"], data["exclude"]) == (f"ERR|{GHP}", [TOKEN])
