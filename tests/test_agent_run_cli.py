"""`watchrun agent run NAME`: one foreground turn, its exit status, its printed reply."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from liverunner import alive
from test_agent_turn import check_records, of

from watchrun.cli.agent_run import cmd_agent_run

CONFIG = """\
agents:
  - name: triage
    provider: mock
    prompt: "Look at {label} ({count}): {matches}|{other}"
  - name: helper
    provider: mock
"""
WATCHRUN = Path(sys.executable).parent / "watchrun"
DEADLINE_S = 20.0


@pytest.fixture
def cfg(tmp_path: Path) -> Path:
    path = tmp_path / "watch.yaml"
    path.write_text(CONFIG)
    return path


def run(cfg: Path, name: str = "triage", prompt: str | None = None) -> int:
    args = argparse.Namespace(config=[cfg], output_dir=cfg.parent / "out", name=name,
                              prompt=prompt)
    return cmd_agent_run(args)


def agent_records(cfg: Path, name: str = "triage") -> list[dict[str, object]]:
    return check_records(cfg.parent / "out" / "agents" / f"{name}.jsonl")


def test_done_turn_prints_the_reply(cfg: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(cfg) == 0
    out = capsys.readouterr().out
    assert out == "Mock triage: read 1 prompt line(s); first: Look at manual (0): |{other}\nDONE\n"
    recs = agent_records(cfg)
    (start,) = of(recs, "dispatch-start")
    assert start["trigger"] == "manual"
    assert recs[0] is start  # records.md: a stream `agent run` begins starts with its turn
    assert of(recs, "prompt")[0]["text"] == "Look at manual (0): |{other}"
    assert of(recs, "dispatch-finished")[0]["status"] == "done"


def test_explicit_prompt_and_a_second_turn(cfg: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(cfg, prompt="first") == 0
    assert run(cfg, prompt="second") == 0
    assert capsys.readouterr().out.count("DONE\n") == 2
    recs = agent_records(cfg)
    assert [p["text"] for p in of(recs, "prompt")] == ["first", "second"]
    assert len({s["turnId"] for s in of(recs, "dispatch-start")}) == 2


def test_failed_turn_exits_1(cfg: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(cfg, prompt="x [mock:fail]") == 1
    err = capsys.readouterr().err
    assert "agent triage: turn-1 failed:" in err
    assert of(agent_records(cfg), "dispatch-finished")[0]["status"] == "failed"


def test_unknown_agent_lists_the_known_ones(cfg: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(cfg, name="nope") == 2
    err = capsys.readouterr().err
    assert "no agent named 'nope'; known agents: triage, helper" in err


def test_invalid_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("agents:\n  - name: triage\n    provider: nosuch\n")
    assert run(bad) == 2
    err = capsys.readouterr().err
    assert "error: agents[0].provider" in err


def test_refuses_while_a_runner_is_live(cfg: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (cfg.parent / "out").mkdir()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(cfg.parent / "out" / "control.sock"))
        server.listen()
        assert run(cfg) == 3
    assert "use `watchrun agent send triage TEXT`" in capsys.readouterr().err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_sigint_or_sigterm_cancels_the_turn(cfg: Path, capsys: pytest.CaptureFixture[str],
                                            sig: signal.Signals) -> None:
    """Ctrl-C, or a CI job's timeout (SIGTERM), cancels the turn: exit 130, nothing left."""
    path = cfg.parent / "out" / "agents" / "triage.jsonl"

    def interrupt() -> None:
        end = time.monotonic() + DEADLINE_S
        while time.monotonic() < end:
            if path.exists() and '"kind":"session"' in path.read_text():
                os.kill(os.getpid(), sig)
                return
            time.sleep(0.01)

    thread = threading.Thread(target=interrupt)
    thread.start()
    try:
        assert run(cfg, prompt="[mock:hang]") == 130
    finally:
        thread.join()
    recs = agent_records(cfg)
    assert (of(recs, "stopped")[0]["message"], of(recs, "stopped")[0]["by"]) == (
        f"interrupted ({sig.name})", "interrupted")
    assert of(recs, "dispatch-finished")[0]["status"] == "cancelled"
    assert not alive(int(str(of(recs, "dispatch-start")[0]["pid"])))
    assert "turn-1 cancelled" in capsys.readouterr().err


def console(cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(WATCHRUN), "agent", "run", *args, "-c", str(cfg),
                           "--output-dir", str(cfg.parent / "out")],
                          capture_output=True, text=True, timeout=DEADLINE_S, check=False)


def test_console_script(cfg: Path) -> None:
    probe = console(cfg, "triage", "--prompt", "probe")
    assert probe.returncode == 0, probe.stderr  # (a module missing from the build fails here)
    assert probe.stdout == "Mock triage: read 1 prompt line(s); first: probe\nDONE\n"
    failed = console(cfg, "triage", "--prompt", "[mock:fail]")
    assert failed.returncode == 1 and "failed" in failed.stderr


def test_a_second_signal_kills_an_agent_that_ignores_sigterm(tmp_path: Path) -> None:
    """Ctrl-C stops the turn with SIGTERM and waits `limits.stopTimeout` before SIGKILL; an
    agent that ignores SIGTERM held `agent run` for all of it (here 60 s) whatever the user
    pressed next. A second signal now kills what remains at once, as it does for `run`."""
    cfg = tmp_path / "watch.yaml"
    cfg.write_text(CONFIG + "limits:\n  stopTimeout: 60s\n")
    path = tmp_path / "out" / "agents" / "triage.jsonl"

    def seen(kind: str) -> None:
        end = time.monotonic() + DEADLINE_S
        while not (path.exists() and f'"kind":"{kind}"' in path.read_text()):
            assert time.monotonic() < end, f"timed out waiting for a {kind} record"
            time.sleep(0.01)

    proc = subprocess.Popen([str(WATCHRUN), "agent", "run", "triage", "-c", str(cfg),
                             "--output-dir", str(tmp_path / "out"), "--prompt",
                             "[mock:hang][mock:ignore-term]"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen("session")
        proc.send_signal(signal.SIGINT)
        seen("stopped")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, err
    recs = agent_records(cfg)
    fin = of(recs, "dispatch-finished")[0]
    assert (fin["status"], fin["signal"]) == ("cancelled", "SIGKILL")
    assert not alive(int(str(of(recs, "dispatch-start")[0]["pid"])))


def test_an_answer_cut_before_the_turn_saw_it_is_said_cut(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 5 MB `result` arrives clipped to limits.maxLineBytes (its records say `truncated`);
    the turn's own cap then cut nothing, so `dispatch-finished` had no `replyTruncated` and
    `agent run` printed 64 KiB as the whole answer (found by an agents explorer)."""
    fake = tmp_path / "fake.sh"
    fake.write_text("#!/bin/sh\n" + sys.executable + " -c 'import json, sys; sys.stdout.write("
                    "json.dumps({\"type\": \"result\", \"subtype\": \"success\", \"result\": "
                    "\"R\" * 5000000}) + \"\\n\")'\n")
    fake.chmod(0o755)
    cfg = tmp_path / "watch.yaml"
    cfg.write_text(f"agents:\n  - name: big\n    provider: claude\n    command: [{fake}, "
                   "'{prompt}']\n")
    assert run(cfg, name="big", prompt="hi") == 0
    out, err = capsys.readouterr()
    assert set(out.strip()) == {"R"} and len(out.strip()) < 5_000_000
    assert "watchrun: agent big: the answer was longer than is kept (64 KiB, or " \
        "limits.maxLineBytes): this is its start" in err
    (fin,) = of(agent_records(cfg, "big"), "dispatch-finished")
    assert fin["replyTruncated"] is True


def test_a_secret_in_the_agents_command_is_redacted_in_its_records(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Explorer streams F3: a `${VAR}` key and a token written in an agent's `command` were
    recorded whole in its `dispatch-start` record (agents/*.jsonl, which shippers send off the
    machine), `output.redact` or not. They are hidden as a prompt's secrets are; the agent
    itself still gets them."""
    key = "sk-ant-api03-" + "A" * 40
    token = "ghp_" + "abcdefghij" * 3 + "012345"
    monkeypatch.setenv("MY_API_KEY", key)
    cfg = tmp_path / "watch.yaml"
    seen = tmp_path / "argv.json"
    cfg.write_text(
        "agents:\n  - name: a\n    provider: mock\n    command: [" + json.dumps(sys.executable)
        + ", '-c', 'import json, sys; json.dump(sys.argv[1:], open(sys.argv[1], \"w\"))', "
        + json.dumps(str(seen)) + ", '--api-key', '${MY_API_KEY}', '--token=" + token
        + "', '{prompt}']\n    prompt: hi\n")
    run(cfg, "a")
    start = next(r for r in agent_records(cfg, "a") if r["kind"] == "dispatch-start")
    shown = json.dumps(start["command"])
    assert key not in shown and token not in shown, shown
    assert "[REDACTED:anthropic-api-key]" in shown and "--token=[REDACTED:token]" in shown
    assert json.loads(seen.read_text())[2:4] == [key, f"--token={token}"]
