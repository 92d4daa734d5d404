"""An agent's `idleTimeout` after the runner was frozen (SIGSTOP, a frozen container or VM):
what the agent printed meanwhile waits in its pipe, and the turn is not silent."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from liverunner import LiveRunner, cli, wait_for, write_config


def test_a_turn_that_printed_while_the_runner_was_frozen_is_not_idle(tmp_path: Path) -> None:
    """An agent printing a line every 0.2 s, `idleTimeout: 1s`, the runner SIGSTOPped 2.5 s: on
    SIGCONT the turn's timer was judged before its reader had taken what waited in the pipe,
    and the turn was stopped `idle-timeout` (failed, "no output for 1000 ms"), the lines it
    printed meanwhile recorded after its `stopped`. It runs to its end."""
    script = "for i in $(seq 1 15); do echo working $i; sleep 0.2; done; echo done"
    cfg = write_config(tmp_path, {"agents": [{
        "name": "bot", "provider": "generic", "command": ["sh", "-c", script],
        "idleTimeout": "1s"}]})
    stream = tmp_path / ".watchrun" / "agents" / "bot.jsonl"
    runner = LiveRunner(cfg)
    try:
        runner.wait_running()
        assert cli("agent", "send", "-c", cfg, "bot", "go", cwd=tmp_path).returncode == 0
        wait_for(lambda: stream.exists() and '"working 2"' in stream.read_text(),
                 "the agent's second line")
        runner.send(signal.SIGSTOP)
        stopped = time.monotonic()
        wait_for(lambda: time.monotonic() - stopped > 2.5, "2.5 s of the freeze")  # (its length)
        runner.send(signal.SIGCONT)
        wait_for(lambda: '"dispatch-finished"' in stream.read_text(), "the turn's end")
    finally:
        runner.stop()
    records = [r for r in runner.records("bot", "agents") if r.get("turnId")]
    (fin,) = [r for r in records if r["kind"] == "dispatch-finished"]
    assert (fin["status"], fin.get("stopReason")) == ("done", None), fin
    assert not [r for r in records if r["kind"] == "stopped"]
    texts = [r["text"] for r in records if r["kind"] == "text"]
    assert texts == [f"working {i}" for i in range(1, 16)] + ["done"]
