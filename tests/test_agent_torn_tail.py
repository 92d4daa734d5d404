"""A torn last record in an agent's stream (the runner or `agent run` killed mid-write) is cut
off at the next open, and said: an `error{code: sink-repaired}` record and a warning, as a
watcher's stream says it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from liverunner import cli, write_config
from recordcheck import validate_records


def agent_run(folder: Path, prompt: str) -> subprocess.CompletedProcess[str]:
    return cli("agent", "run", "a1", "--prompt", prompt, cwd=folder, timeout=60)


def test_a_torn_agent_record_is_cut_and_said(tmp_path: Path) -> None:
    write_config(tmp_path, {"agents": [{"name": "a1", "provider": "mock"}]})
    assert agent_run(tmp_path, "one").returncode == 0
    stream = tmp_path / ".watchrun" / "agents" / "a1.jsonl"
    torn = b'{"schema":1,"seq":99,"cursor":"a1:0000000000000063","kind":"text","text":"half'
    with stream.open("ab") as fh:
        fh.write(torn)
    second = agent_run(tmp_path, "two")
    assert second.returncode == 0, second.stderr
    assert f"repaired a torn last record ({len(torn)} bytes)" in second.stderr
    recs = validate_records(stream)  # every seq once, in order, nothing torn
    (repaired,) = [r for r in recs if r["kind"] == "error"]
    assert (repaired["code"], repaired["bytes"]) == ("sink-repaired", len(torn))
    assert b"half" not in stream.read_bytes()
