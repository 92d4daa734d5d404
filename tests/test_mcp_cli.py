"""`watchrun mcp` as a command: the config it reads (./watch.yaml, its agents and limits), an
invalid config, the SDK as an optional extra that no other command imports, a server killed
outright leaving no orphans, and the README's client snippets."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import anyio
import forkserver
import pytest
from liverunner import (
    DEADLINE_S,
    cli,
    modules_after_commands,
    read_records,
    spawned_by,
    watchrun_bin,
    write_config,
)
from mcpclient import alive, mcp_session, until

from watchrun.cli.main import parse
from watchrun.cli.mcp_cmd import cmd_mcp

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def section() -> str:
    return README.split("## Agents call it: `watchrun mcp`", 1)[1].split("\n## ", 1)[0]


def test_without_a_config_flag_it_uses_watch_yaml_its_agents_and_limits(tmp_path: Path) -> None:
    write_config(tmp_path, {"limits": {"matchLines": 1},
                            "agents": [{"name": "triage", "provider": "mock"}],
                            "watchers": [{"id": "cfg", "command": "exec sleep 600",
                                          "pattern": "x"}]})
    log = tmp_path / "app.log"
    log.write_text("")

    async def body() -> None:
        async with mcp_session(tmp_path) as c:
            added = await c.ok(action="add", path="app.log", pattern="ERROR", wake="triage")
            assert added["outputDir"] == str(tmp_path / ".watchrun")
            assert added["watch"]["wakeAgents"] == ["triage"]
            ids = [w["id"] for w in (await c.ok(action="list"))["watches"]]
            assert ids == ["w1"]  # the session runs none of the config's watchers
            taken = await c.error(action="add", id="CFG", command="true", pattern="x")
            assert "watcher id `CFG` is the config's watcher `cfg`" in taken
            assert not (tmp_path / ".watchrun" / "watchers" / "CFG.jsonl").exists()
            with log.open("a") as f:
                f.write("ERROR one\nERROR two\n")

            async def both() -> bool:
                return bool((await c.status("w1"))["matchCount"] == 2)
            await until(both, "two matches")
            got = await c.ok(action="matches", id="w1")  # limits.matchLines: 1
            assert (got["matches"], got["truncated"]) == ("ERROR two", True)
            agent = tmp_path / ".watchrun" / "agents" / "triage.jsonl"

            async def woken() -> bool:
                return any(r["kind"] == "dispatch-finished" for r in read_records(agent))
            await until(woken, "the config's mock agent to run a turn")
            assert "using watch.yaml" in c.stderr()
    anyio.run(body)


def mcp_run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`watchrun mcp ARGS` in `cwd`, stdin /dev/null, its output captured as text: forked from
    a server that has imported the SDK (tests/forkserver.py) when it can be."""
    argv = [watchrun_bin(), "mcp", *args]
    done = forkserver.run(argv, env=dict(os.environ), cwd=cwd, timeout=DEADLINE_S, kind="mcp")
    if done is None:
        return subprocess.run(argv, capture_output=True, text=True, timeout=DEADLINE_S,
                              stdin=subprocess.DEVNULL, cwd=cwd)
    return subprocess.CompletedProcess(argv, done.returncode, done.stdout.decode(),
                                       done.stderr.decode())


def test_an_invalid_config_is_reported_and_nothing_served(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"watchers": [{"id": "a", "path": "x", "pattern": "("}]})
    p = mcp_run(Path.cwd(), "-c", str(config))
    assert p.returncode == 2 and p.stdout == ""
    assert 'watchers[0].pattern: invalid regex "(": missing )' in p.stderr


def test_with_log_format_json_every_line_on_stderr_is_json(tmp_path: Path) -> None:
    """The config's errors were printed as text before the JSON log began, as no `run
    --log-format json` prints them: a collector reading JSON lines failed on the first."""
    config = write_config(tmp_path, {"watchers": [{"id": "a", "path": "x", "pattern": "("}]})
    p = mcp_run(tmp_path, "-c", str(config), "--log-format", "json")
    assert p.returncode == 2 and p.stdout == ""
    lines = [json.loads(line) for line in p.stderr.splitlines()]
    assert lines[0]["event"] == "config" and lines[0]["level"] == "error"
    assert lines[0]["path"] == "watchers[0].pattern"
    assert 'invalid regex "(": missing )' in lines[0]["msg"]


def test_with_an_invalid_config_each_call_says_why(tmp_path: Path) -> None:
    """helper-92's F12: with a half-edited config the server closed before its handshake, and
    the client saw only "Connection closed"; its errors went to a stderr nobody reads."""
    config = write_config(tmp_path, {"watchers": [{"id": "a", "path": "x", "pattern": "("}]})

    async def body() -> None:
        async with mcp_session(tmp_path, "-c", str(config)) as c:
            said = await c.error(action="list")
            assert said.startswith(f"watch list: the config {config} is invalid, so this "
                                   "server does nothing: "), said
            assert 'watchers[0].pattern: invalid regex "(": missing )' in said
            assert said.endswith(f"Fix it and restart the MCP server (`watchrun validate -c "
                                 f"{config}` lists every error)")
            assert "is invalid" in await c.error(action="add", path="y.log", pattern="x")
    anyio.run(body)
    assert not (tmp_path / ".watchrun").exists()  # nothing was started


def test_a_clamped_limit_is_said_as_run_says_it(tmp_path: Path) -> None:
    """`run` says a limit it clamped; `mcp` said nothing, and the session's watchers ran under
    a limit other than the one the config asked for. The warning that a config with no
    watchers has nothing to run is not said (an `mcp` config adds them)."""
    config = write_config(tmp_path, {"limits": {"maxWatchers": 9999}})
    p = mcp_run(tmp_path, "-c", str(config))
    assert p.returncode == 0 and p.stdout == "", p.stderr
    assert "limits.maxWatchers: 9999 clamped to 500" in p.stderr, p.stderr
    assert "nothing to run" not in p.stderr, p.stderr
    ran = cli("validate", "-c", config)
    assert "limits.maxWatchers: 9999 clamped to 500" in ran.stdout + ran.stderr


def test_its_log_is_on_stderr_and_a_closed_stdin_ends_it_with_exit_0(tmp_path: Path) -> None:
    p = mcp_run(tmp_path, "--log-format", "json")
    assert p.returncode == 0 and p.stdout == ""
    lines = [json.loads(line) for line in p.stderr.splitlines()]
    assert lines[0]["event"] == "mcp" and "output dir" in lines[0]["msg"]
    assert not (tmp_path / ".watchrun").exists()  # no `add`, no runner, nothing written


def test_a_killed_server_leaves_no_orphans_and_holds_the_output_dir_while_it_runs(
        tmp_path: Path) -> None:
    config = write_config(tmp_path, {"watchers": []})
    seen: dict[str, Any] = {}

    async def body() -> None:
        async with mcp_session(tmp_path) as c:
            await c.ok(action="add", command="sleep 600 & exec sleep 601", pattern="x")
            pid = (await c.status("w1"))["pid"]
            spawn_id = re.search(rb"WATCHRUN_SPAWN_ID=(\d+)\.",
                                 Path(f"/proc/{pid}/environ").read_bytes())
            assert spawn_id is not None
            server = int(spawn_id.group(1))  # the MCP server: its session runner started it

            async def both() -> list[int]:
                found = spawned_by(server)
                return found if len(found) >= 2 else []
            seen["children"] = await until(both, "the command and its child")
            run = cli("run", "-c", config)
            assert run.returncode == 3 and "another runner is live" in run.stderr
            os.kill(server, signal.SIGKILL)

            async def orphans_gone() -> bool:
                return not alive(server) and not any(alive(p) for p in seen["children"])
            await until(orphans_gone, "the killed server's children to die with it")
    anyio.run(body)
    assert not any(alive(p) for p in seen["children"])


def test_without_the_sdk_it_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    for name in [m for m in sys.modules if m.split(".")[0] == "mcp"
                 or m.startswith("watchrun.mcp.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)  # import mcp fails as if missing
    args = argparse.Namespace(config=None, output_dir=tmp_path, log_format="text")
    assert cmd_mcp(args) == 3
    assert capsys.readouterr().err == ("watchrun: error: `watchrun mcp` needs the MCP SDK (mcp "
                                       "is missing): pip install 'watchrun[mcp]'\n")
    args.log_format = "json"
    assert cmd_mcp(args) == 3
    (line,) = capsys.readouterr().err.splitlines()
    said = json.loads(line)
    assert (said["level"], said["event"]) == ("error", "missing-dependency")
    assert said["msg"] == "`watchrun mcp` needs the MCP SDK (mcp is missing): pip install " \
        "'watchrun[mcp]'"


def test_no_other_command_imports_the_sdk(tmp_path: Path) -> None:
    (tmp_path / "app.log").write_text("ERROR x\n")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR", "fromStart": True}]})
    loaded = [m for m in modules_after_commands(config, tmp_path)
              if m.split(".")[0] in ("mcp", "mcp_types", "pydantic", "starlette", "anyio")
              or m.startswith("watchrun.mcp")]
    assert not loaded, loaded


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", section(), flags=re.S)


def _argv_ok(command: str, args: list[str]) -> None:
    """A snippet starts `watchrun mcp …`, and `watchrun` parses those arguments."""
    assert command == "watchrun" and args[0] == "mcp", (command, args)
    assert parse(args).command == "mcp"


def test_the_readme_registers_it_with_each_client() -> None:
    claude = [line for line in _blocks("sh")[1].splitlines() if line.startswith("claude ")]
    assert len(claude) == 2
    for line in claude:
        words = shlex.split(line)
        assert words[:4] == ["claude", "mcp", "add", *words[3:4]] and "watchrun" in words
        after = words[words.index("--") + 1:]
        _argv_ok(after[0], after[1:])
    mcp_json, gemini, opencode = (json.loads(b) for b in _blocks("json"))
    server = mcp_json["mcpServers"]["watchrun"]
    assert server["type"] == "stdio"
    _argv_ok(server["command"], server["args"])
    _argv_ok(gemini["mcpServers"]["watchrun"]["command"], gemini["mcpServers"]["watchrun"]["args"])
    local = opencode["mcp"]["watchrun"]
    assert (local["type"], local["enabled"]) == ("local", True)
    _argv_ok(local["command"][0], local["command"][1:])
    (codex_toml,) = _blocks("toml")
    codex = tomllib.loads(codex_toml)["mcp_servers"]["watchrun"]
    _argv_ok(codex["command"], codex["args"])
    for client in ("Claude Code", "Codex", "Gemini CLI", "opencode"):
        assert f"**{client}**" in section()

