"""A failed turn says why in `agent transcript` and `watchrun transcript` (JSON and text), also
when the agent printed some text before it failed: real agent processes run by `agent run`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from inproc import inproc
from liverunner import cli

SAID = {"type": "assistant", "session_id": "s1", "message": {
    "id": "m1", "role": "assistant", "content": [{"type": "text", "text": "partial work"}]}}
CRASH = f"""\
#!/bin/sh
echo '{{"type":"system","subtype":"init","session_id":"s1","model":"m"}}'
echo '{json.dumps(SAID)}'
kill -9 $$
"""


def watchrun(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`watchrun ARGS` as a process of its own (`agent run`: a turn; liverunner.cli)."""
    return cli(*args, cwd=cwd)


def view(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A view (`transcript`, `agent transcript`): read in this process (tests/inproc.py)."""
    return inproc(cwd, *args)


def turn_of(cwd: Path, *args: str) -> dict[str, Any]:
    p = view(cwd, *args, "-c", "watch.yaml")
    assert (p.returncode, p.stderr) == (0, "")
    (turn,) = json.loads(p.stdout)["turns"]
    return dict(turn)


@pytest.mark.parametrize(("agent", "prompt", "said", "why"), [
    ("crash", "hi", "partial work", "the process was killed by SIGKILL"),
    ("mock", "[mock:fail] look", "Mock failure: simulated error during execution.",
     "mock: simulated failure ([mock:fail])"),
])
def test_a_turn_that_failed_after_saying_something_says_why(
        tmp_path: Path, agent: str, prompt: str, said: str, why: str) -> None:
    (tmp_path / "crash.sh").write_text(CRASH)
    (tmp_path / "crash.sh").chmod(0o755)
    (tmp_path / "watch.yaml").write_text(
        "agents:\n  - {name: crash, provider: claude, command: [./crash.sh, '{prompt}']}\n"
        "  - {name: mock, provider: mock}\n")
    p = watchrun(tmp_path, "agent", "run", agent, "-c", "watch.yaml", "--prompt", prompt)
    assert p.returncode != 0 and why in p.stderr
    for args in (("agent", "transcript", agent), ("transcript",)):
        turn = turn_of(tmp_path, *args)
        assert (turn["outcome"], turn["reply"]["text"]) == ("failed", said)
        assert turn["error"]["error"] == why == turn["agents"][0]["error"]
        text = view(tmp_path, *args, "-c", "watch.yaml", "--format", "text").stdout
        lines = text.splitlines()
        assert lines[lines.index("  reply:") + 1:][:3] == [
            f"    {said}", f"  error: {why}", "  outcome: failed"]


FORGED = "2026-12-05T00:00:00.000Z watchrun: [app] forged line"
FAILED = {"type": "result", "subtype": "error_during_execution", "is_error": True,
          "result": "boom" + chr(10) + FORGED, "session_id": "s1"}
LIAR = f"""\
#!/bin/sh
echo '{{"type":"system","subtype":"init","session_id":"s1"}}'
printf '%s\\n' '{json.dumps(FAILED)}'
"""


def test_an_error_text_with_a_newline_cannot_print_a_line_of_its_own(tmp_path: Path) -> None:
    """The `error:` value kept its newline: the agent's text after it was printed at column 0,
    outside the turn, as a line of watchrun's own log would be."""
    (tmp_path / "liar.sh").write_text(LIAR)
    (tmp_path / "liar.sh").chmod(0o755)
    (tmp_path / "watch.yaml").write_text(
        "agents:\n  - {name: liar, provider: claude, command: [./liar.sh, '{prompt}']}\n")
    p = watchrun(tmp_path, "agent", "run", "liar", "-c", "watch.yaml", "--prompt", "hi")
    assert p.returncode != 0
    for args in (("agent", "transcript", "liar"), ("transcript",)):
        run = watchrun if args == ("transcript",) else view  # (one as a process of its own)
        text = run(tmp_path, *args, "-c", "watch.yaml", "--format", "text").stdout
        assert f"  error: boom\\n{FORGED}" in text.splitlines(), text
        assert not [x for x in text.splitlines() if FORGED in x and not x.startswith("  ")]
