"""Commands say which runner answered: `status` names its pid (as this process sees it), its
config files and whether it is a `watchrun mcp` session's own; a `not_found` from a runner
whose config is not the command's says so (two configs on one output dir)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from liverunner import LiveRunner, cli, write_config
from mcpclient import mcp_inproc
from pidns import NsRunner, needs_pid_namespaces, run

OLD = "while true; do echo ERROR old; sleep 0.5; done"


def _configs(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "app.log").write_text("")
    app = {"id": "app", "path": "app.log", "pattern": "ERROR"}
    return (write_config(tmp_path, {"watchers": [app, {"id": "old", "command": OLD,
                                                       "pattern": "ERROR"}]}),
            write_config(tmp_path, {"watchers": [app]}, name="watch2.yaml"))


def test_a_command_of_another_config_says_whose_runner_answered(tmp_path: Path) -> None:
    """explore-multirun F5: with watch2.yaml's runner live, `start old -c watch.yaml` said
    "no watcher 'old' (known: app)", `stop old` "already stopped (it was not running)", and
    `status` named neither the runner's pid nor its config."""
    mine, theirs = _configs(tmp_path)
    runner = LiveRunner(theirs)
    try:
        runner.wait_running()
        said = f"the runner live on {runner.out} (pid {runner.pid}, config {theirs}) is not " \
            f"your config's: {mine} names old and uses the same output dir"
        start = cli("start", "old", "-c", mine, cwd=tmp_path)
        assert start.returncode == 2, start.stderr
        assert start.stderr.startswith("watchrun: error: no watcher 'old' (known: app); ")
        assert said in start.stderr, start.stderr
        stop = cli("stop", "old", "-c", mine, cwd=tmp_path)
        assert stop.returncode == 0, stop.stderr
        assert stop.stdout.startswith(f"old is not running there: {said}"), stop.stdout
        status = cli("status", "-c", mine, cwd=tmp_path)
        assert status.returncode == 0, status.stderr
        lines = status.stdout.splitlines()
        assert lines[1] == f"runner: pid {runner.pid}, config {theirs}", lines
        assert lines[2] == f"your config ({mine}) is not this runner's: both use this output dir"
        doc = json.loads(cli("status", "--json", "-c", theirs, cwd=tmp_path).stdout)
        assert (doc["pid"], doc["pidHere"], doc["configs"], doc["session"]) == (
            runner.pid, runner.pid, [str(theirs)], False), doc
        own = cli("status", "-c", theirs, cwd=tmp_path).stdout.splitlines()
        assert own[1:] == [f"runner: pid {runner.pid}, config {theirs}", "problems: none"], own
        assert cli("start", "app", "-c", mine, cwd=tmp_path).returncode == 0  # (one it has)
    finally:
        runner.close()


@needs_pid_namespaces
def test_status_gives_a_containers_runners_pid_as_the_host_sees_it(tmp_path: Path) -> None:
    """A runner in a pid namespace says pid 1; the host finds its own pid for it (the holder
    of `control.lock`), and a sibling namespace, which cannot see it, says so."""
    _, theirs = _configs(tmp_path)
    runner = NsRunner(theirs)
    try:
        runner.wait_running()
        doc = json.loads(cli("status", "--json", "-c", theirs, cwd=tmp_path).stdout)
        assert (doc["pid"], doc["pidHere"]) == (1, runner.pid), doc
        host = cli("status", "-c", theirs, cwd=tmp_path).stdout.splitlines()
        assert host[1] == f"runner: pid {runner.pid} here, 1 in its own pid namespace, " \
            f"config {theirs}", host
        sibling = run(tmp_path, "status", "-c", str(theirs))
        assert sibling.returncode == 0, sibling.stderr
        assert sibling.stdout.splitlines()[1] == "runner: pid 1 in its own pid namespace, " \
            f"not visible from here, config {theirs}", sibling.stdout
    finally:
        runner.close()


def test_an_mcp_sessions_runner_says_its_watchers_end_with_the_session(tmp_path: Path) -> None:
    """explore-multirun F5b: the runner a `watchrun mcp` session started for itself answered
    `status` and `add` like any runner; a watcher the CLI added there stopped when the session
    ended, and nothing had said it would."""
    mine, _ = _configs(tmp_path)

    async def body() -> None:
        async with mcp_inproc(tmp_path, "-c", str(mine)) as c:
            added = await c.ok(action="add", command=OLD, pattern="ERROR", id="m1")
            assert added["runner"] == "session"

            def commands() -> tuple[str, dict[str, object], str]:
                status = cli("status", "-c", mine, cwd=tmp_path)
                assert status.returncode == 0, status.stderr
                doc = json.loads(cli("status", "--json", "-c", mine, cwd=tmp_path).stdout)
                add = cli("add", "cli1", "--command", OLD, "--pattern", "ERROR", "-c", mine,
                          cwd=tmp_path)
                assert add.returncode == 0, add.stderr
                return status.stdout, doc, add.stdout
            text, doc, add = await anyio.to_thread.run_sync(commands)
            assert "it is a `watchrun mcp` session's own runner: every watcher it runs ends " \
                "with that session" in text.splitlines(), text
            assert doc["session"] is True and doc["configs"] == [str(mine)], doc
            assert add.strip() == f"started cli1; this runner is a `watchrun mcp` session's own" \
                f" (pid {doc['pid']}): cli1 ends with that session, as every watcher it runs"
    anyio.run(body)
