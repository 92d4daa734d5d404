"""The CLI against a live runner and a real terminal: file watcher states in `list`/`status`,
idempotent `stop` and `agent stop`, `agent send` with `-c` after the name, the demo's first
lines, the watcher count of `run --once`, colour only on a TTY, shell completion.

The polled `list` and the commands that only ask the live runner or read its files run in
this test process (tests/inproc.py: the same `main()` as the console script, its stdout, stderr
and status); `stop`, `agent stop` and `agent send` against the live runner, every start, the
colour tests (a real terminal and a real pipe) and `completion bash` run as processes."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from inproc import inproc
from liverunner import LiveRunner, cli, wait_for, watchrun_bin, write_config
from test_metrics import free_port, scrape

ROOT = Path(__file__).resolve().parents[1]


def wr(cwd: Path, *args: str, env: dict[str, str] | None = None,
       ) -> subprocess.CompletedProcess[str]:
    return cli(*args, cwd=cwd, env=env, timeout=120)


def listed(cwd: Path) -> dict[str, dict[str, Any]]:
    p = inproc(cwd, "list", "-c", "live.yaml", "--json")
    assert p.returncode == 0, p.stderr
    return {w["id"]: w for w in json.loads(p.stdout)["watchers"]}


def test_a_live_runner_through_the_cli(tmp_path: Path) -> None:
    (tmp_path / "adir").mkdir()  # a folder where a log file should be: cannot be read
    config = write_config(tmp_path, {
        "watchers": [
            {"id": "loop", "command": "while true; do echo tick; sleep 0.2; done",
             "pattern": "ERROR"},
            {"id": "missing", "path": "logs/later.log", "pattern": "ERROR"},
            {"id": "unreadable", "path": "adir", "pattern": "ERROR"},
        ],
        "agents": [{"name": "triage", "provider": "mock", "prompt": "{matches}"}],
    }, "live.yaml")
    port = free_port()
    r = LiveRunner(config, "--metrics", f"127.0.0.1:{port}")
    try:
        r.wait_log("running")
        states = wait_for(lambda: (s := listed(tmp_path)) and {k: v["status"] for k, v in
                                                                s.items()} == {
            "loop": "running", "missing": "waiting", "unreadable": "error"} and s,
            "list shows running, waiting and error")
        assert states["missing"]["errors"] == 0  # waiting for a file is not an error
        up = {w: scrape(port)[f'watchrun_watcher_up{{watcher="{w}"}}'] for w in states}
        assert up == {"loop": 1, "missing": 0, "unreadable": 0}  # cannot look: down
        p = inproc(tmp_path, "status", "-c", "live.yaml", "unreadable")
        assert re.search(r"^status +error$", p.stdout, re.M) and "live  " in p.stdout
        p = inproc(tmp_path, "status", "-c", "live.yaml")  # the runner's: said, not `none`
        assert p.returncode == 0 and p.stdout.splitlines()[1] == \
            "not reading: unreadable (error) (`watchrun list` says why)", p.stdout
        p = inproc(tmp_path, "status", "-c", "live.yaml", "--json")
        assert json.loads(p.stdout)["notReading"] == [{"id": "unreadable", "status": "error"}]
        (tmp_path / "logs").mkdir()
        (tmp_path / "logs" / "later.log").write_text("ERROR now\n")
        wait_for(lambda: listed(tmp_path)["missing"]["status"] == "running", "it appeared")
        assert scrape(port)['watchrun_watcher_up{watcher="missing"}'] == 1

        p = wr(tmp_path, "stop", "loop", "-c", "live.yaml")
        assert (p.returncode, p.stdout) == (0, "stopped loop\n"), p.stderr
        p = inproc(tmp_path, "stop", "-c", "live.yaml", "loop", "--json")  # again: idempotent
        assert p.returncode == 0
        assert json.loads(p.stdout) == {"id": "loop", "stopped": True, "wasRunning": False,
                                        "message": "loop is already stopped (it was not "
                                        "running)"}
        p = inproc(tmp_path, "stop", "nope", "-c", "live.yaml")
        assert p.returncode == 2 and "no watcher 'nope'" in p.stderr

        p = wr(tmp_path, "agent", "send", "-c", "live.yaml", "triage", "hi", "--json")
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert doc["queued"] is True and doc["deliveryId"].startswith("d-")
        p = inproc(tmp_path, "agent", "stop", "nobody", "-c", "live.yaml")
        assert p.returncode == 2
        assert "no agent named 'nobody' (known agents: triage)" in p.stderr
        assert "running turn" not in p.stderr
        wait_for(lambda: any(x["kind"] == "dispatch-finished" for x in
                             r.records("triage", "agents")), "the sent turn finished")
        p = wr(tmp_path, "agent", "stop", "triage", "-c", "live.yaml")
        assert (p.returncode, p.stdout) == (0, "triage has no running turn (nothing to stop)\n")

        p = inproc(tmp_path, "-c", "live.yaml", "clear", "--json")
        assert p.returncode == 0 and json.loads(p.stdout)["cleared"] == 1
        assert "loop" not in listed(tmp_path)
        p = inproc(tmp_path, "matches", "loop", "-c", "live.yaml", "--json")  # its JSONL stays
        assert (p.returncode, json.loads(p.stdout)) == (0, {"id": "loop", "matches": []})
        p = inproc(tmp_path, "status", "loop", "-c", "live.yaml")
        assert p.returncode == 2 and "(or `clear` forgot it)" in p.stderr
    finally:
        assert r.stop() == 0


def test_stop_of_a_watcher_whose_command_had_exited_says_it_was_not_running(
        tmp_path: Path) -> None:
    """A command that exited (restart `never`) is `exited` in `list`: `stop` said "stopped
    once" and `wasRunning: true`, as if it had ended something. It says it was not running."""
    config = write_config(tmp_path, {"watchers": [
        {"id": "once", "command": "echo done", "pattern": "ERROR"}]}, "live.yaml")
    r = LiveRunner(config)
    try:
        r.wait_running()
        wait_for(lambda: listed(tmp_path)["once"]["status"] == "exited", "the command exited")
        p = inproc(tmp_path, "stop", "once", "-c", "live.yaml", "--json")
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout) == {"id": "once", "stopped": True, "wasRunning": False,
                                        "message": "once is already stopped (it had exited)"}
        assert listed(tmp_path)["once"]["status"] == "stopped"
    finally:
        assert r.stop() == 0, r.stderr()


def test_the_demo_starts_without_a_warning(tmp_path: Path) -> None:
    """The first lines of `watchrun -c watch.yaml.example`: its log file is usually not there
    yet (the demo's writer starts at the same time), which the demo expects; that is said at
    info level ("following … (not opened yet)") and not counted as an error."""
    shutil.copy(ROOT / "watch.yaml.example", tmp_path / "watch.yaml")
    r = LiveRunner(tmp_path / "watch.yaml")
    try:
        r.wait_log("[demo-writer] started run 1")
        r.wait_log("[app-log] following")  # (not opened yet) or not, as the writer goes
        r.wait_log("running")
        head = r.stderr()
        assert "warning" not in head and "error" not in head, head
        wait_for(lambda: r.matches("app-log"), "a match in the demo log")
        status = json.loads(inproc(tmp_path, "status", "app-log", "--json").stdout)
        assert status["errors"] == 0 and status["status"] == "running"
    finally:
        assert r.stop() == 0
    assert not any(x["kind"] == "error" for x in r.records("app-log"))


def test_run_once_counts_every_watcher(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text("fine\n")
    write_config(tmp_path, {"watchers": [
        {"id": "cmd", "command": "echo fine", "pattern": "ERROR"},
        {"id": "file", "path": "a.log", "pattern": "ERROR"},
    ]})
    p = wr(tmp_path, "run", "--once")
    assert p.returncode == 0, p.stderr
    # (the file is read once the command is done; the command may be done already)
    assert re.search(r"2 watchers \(1 (running|exited), 1 to read after the commands\), "
                     "0 agents running", p.stderr), p.stderr


# -- colour ---------------------------------------------------------------------------------
def on_a_terminal(cwd: Path, argv: list[str], env: dict[str, str]) -> str:
    """What `watchrun ARGV` prints when its stdout is a terminal (a real pty)."""
    master, slave = pty.openpty()
    try:
        p = subprocess.run([watchrun_bin(), *argv], stdout=slave, stderr=subprocess.DEVNULL,
                           cwd=cwd, env=env, timeout=60, check=False)
        os.close(slave)
        slave = -1
        assert p.returncode == 0
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the other side is closed and everything was read
                break
            if not data:
                break
            chunks.append(data)
        return b"".join(chunks).decode()
    finally:
        os.close(master)
        if slave != -1:
            os.close(slave)


def norm(text: str) -> str:
    """`text` with its relative times (the clock moved between two runs) made equal."""
    return re.sub(r"just now|\d+s ago", "<ago>", re.sub(r" +", " ", text))


@pytest.fixture(scope="module")
def ran_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A config that has run once and whose agent has had a turn (the colour tests only read
    it)."""
    cwd = tmp_path_factory.mktemp("ran_once")
    (cwd / "app.log").write_text("ERROR x\n")
    write_config(cwd, {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR"}],
                       "agents": [{"name": "triage", "provider": "mock",
                                   "prompt": "{matches}"}]})
    assert wr(cwd, "run", "--once").returncode == 0
    assert wr(cwd, "agent", "run", "triage").returncode == 0
    return cwd


@pytest.mark.parametrize("argv", [["list"], ["status", "app"], ["agent", "list"]])
def test_colour_only_on_a_terminal_and_never_with_no_color(ran_once: Path,
                                                           argv: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    coloured = on_a_terminal(ran_once, argv, {**env, "TERM": "xterm"})
    assert "\x1b[2mstopped" in coloured or "\x1b[2midle" in coloured, coloured
    piped = wr(ran_once, *argv).stdout
    for off in ({"NO_COLOR": "1", "TERM": "xterm"}, {"TERM": "dumb"}):
        plain = on_a_terminal(ran_once, argv, {**env, **off})
        assert "\x1b" not in plain
        assert norm(plain.replace("\r\n", "\n")) == norm(piped)
    assert "\x1b" not in wr(ran_once, *argv, env={**env, "TERM": "xterm"}).stdout  # a pipe


# -- completion -----------------------------------------------------------------------------
@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(tmp_path: Path, shell: str) -> None:
    p = (wr if shell == "bash" else inproc)(tmp_path, "completion", shell)
    assert p.returncode == 0 and "watchrun" in p.stdout
    for name in ("validate", "matches", "completion", "transcript"):
        assert name in p.stdout
    if shutil.which(shell):
        script = tmp_path / f"watchrun.{shell}"
        script.write_text(p.stdout)
        check = subprocess.run([shell, "-n", str(script)], capture_output=True, text=True,
                               timeout=30, check=False)
        assert check.returncode == 0, check.stderr


def bash_complete(script: Path, words: list[str]) -> list[str]:
    """What bash offers for the last word of `words` with the script sourced."""
    cmd = (f"source {script}; complete -p watchrun; COMP_WORDS=({' '.join(words)}); "
           f"COMP_CWORD={len(words) - 1}; COMP_LINE='{' '.join(words)}'; "
           "COMP_POINT=${#COMP_LINE}; _shtab_watchrun; printf '%s\\n' \"${COMPREPLY[@]}\"")
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=30,
                       check=True, cwd=script.parent)
    first, *offered = p.stdout.splitlines()
    assert first.startswith("complete ") and first.endswith(" watchrun")
    return offered


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_commands_actions_and_options(tmp_path: Path) -> None:
    script = tmp_path / "watchrun.bash"
    script.write_text(inproc(tmp_path, "completion", "bash").stdout)
    assert bash_complete(script, ["watchrun", "va"]) == ["validate"]
    assert bash_complete(script, ["watchrun", "agent", "s"]) == ["send", "stop"]
    assert "--lines" in bash_complete(script, ["watchrun", "matches", "--l"])
    (tmp_path / "watch.yaml").write_text("")
    assert bash_complete(script, ["watchrun", "list", "-c", "watch."]) == ["watch.yaml"]
    # -c, --output-dir and --json may come before the command (its help hides them): a file,
    # a folder, then the commands
    assert bash_complete(script, ["watchrun", "-c", "watch."]) == ["watch.yaml"]
    (tmp_path / "out").mkdir()
    assert bash_complete(script, ["watchrun", "--output-dir", "o"]) == ["out"]
    assert bash_complete(script, ["watchrun", "-c", "watch.yaml", "va"]) == ["validate"]
    assert "--config" in bash_complete(script, ["watchrun", "--"])


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_files_and_folders_between_agent_and_its_action(tmp_path: Path) -> None:
    """docs/cli.md: -c and --output-dir may stand between `agent` and its action, and the
    completion gives file names after -c, folders after --output-dir; there it offered the
    actions."""
    script = tmp_path / "watchrun.bash"
    script.write_text(inproc(tmp_path, "completion", "bash").stdout)
    (tmp_path / "watch.yaml").write_text("")
    (tmp_path / "out").mkdir()
    assert bash_complete(script, ["watchrun", "agent", "-c", "watch."]) == ["watch.yaml"]
    assert bash_complete(script, ["watchrun", "agent", "--config", "watch."]) == ["watch.yaml"]
    assert bash_complete(script, ["watchrun", "agent", "--output-dir", "o"]) == ["out"]
    assert bash_complete(script, ["watchrun", "agent", "-c", "watch.yaml", "s"]) == [
        "send", "stop"]


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completes_files_and_folders_between_agent_and_its_action(tmp_path: Path) -> None:
    script = tmp_path / "watchrun.fish"
    script.write_text(inproc(tmp_path, "completion", "fish").stdout)
    (tmp_path / "watch.yaml").write_text("")
    (tmp_path / "out").mkdir()

    def offered(line: str) -> list[str]:
        p = subprocess.run(["fish", "--no-config", "-c", f"source {script}; complete -C '{line}'"],
                           capture_output=True, text=True, timeout=30, check=True, cwd=tmp_path)
        return [ln.split("\t")[0] for ln in p.stdout.splitlines()]

    assert offered("watchrun agent -c watch.") == ["watch.yaml"]
    assert offered("watchrun agent --output-dir o") == ["out/"]
    # (shtab 1.9.2's fish script offered nothing after -c: pyproject's bound is 1.9.3)
    assert offered("watchrun list -c watch.") == offered("watchrun -c watch.") == ["watch.yaml"]
    assert offered("watchrun --output-dir o") == ["out/"]


def test_normal_commands_do_not_import_shtab(tmp_path: Path) -> None:
    code = ("import sys; from watchrun.cli.main import main; "
            f"main(['list', '--output-dir', {str(tmp_path)!r}]); "
            "main(['schema']); print('shtab' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, check=True)
    assert p.stdout.splitlines()[-1] == "False"




def test_status_of_a_killed_runners_command_shows_no_pid(tmp_path: Path) -> None:
    """After the runner was SIGKILLed, `status ID` read its last snapshot, which still named
    the command's pid (dead, and free to be reused: an operator might kill what has it now).
    docs/control.md: `pid` is the command's process while it runs, else null."""
    config = write_config(tmp_path, {"watchers": [
        {"id": "c", "command": "echo up; exec sleep 1000", "pattern": "up"}]})
    r = LiveRunner(config)
    try:
        wait_for(lambda: r.matches("c"), "the command")
        snapshot = r.out / "state" / "c.status.json"
        wait_for(lambda: snapshot.exists() and json.loads(snapshot.read_text()).get("pid"),
                 "its pid in its status snapshot")
        r.send(9)
        r.proc.wait(timeout=30)
    finally:
        r.close()
    p = inproc(tmp_path, "status", "c", "--json", "-c", str(config))
    doc = json.loads(p.stdout)
    assert (doc.get("live"), doc.get("status"), doc.get("pid")) == (False, "stopped", None), doc
