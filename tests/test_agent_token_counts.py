"""Token counts an agent reports are untrusted input: a count that is no whole number from 0 to
`MAX_TOKENS` reads as not reported, and the line is kept as `malformed-event` saying which
(real `agent run` processes; `1e300` was summed into the turn, the log, `agent list` and the
metrics as a 301-digit number)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from inproc import inproc
from liverunner import cli, read_records


def agent(usage: dict[str, Any]) -> str:
    result = {"type": "result", "subtype": "success", "is_error": False, "result": "ok",
              "session_id": "s", "usage": usage}
    return ("#!/bin/sh\necho '{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"s\"}'\n"
            f"printf '%s\\n' '{json.dumps(result)}'\n")


@pytest.mark.parametrize(("bad", "shown"), [
    (1e300, "1e+300"), (-5, "-5"), (2.5, "2.5"), (10**13, str(10**13)),
    ("5", "'5'"), (True, "True"),  # (explorer streams F4: read as 0, with no record)
])
def test_an_implausible_token_count_is_refused_and_recorded(
        tmp_path: Path, bad: object, shown: str) -> None:
    (tmp_path / "ag.sh").write_text(agent({"input_tokens": 7, "output_tokens": bad}))
    (tmp_path / "ag.sh").chmod(0o755)
    (tmp_path / "watch.yaml").write_text(
        "agents:\n  - {name: a, provider: claude, command: [./ag.sh, '{prompt}']}\n")
    p = cli("agent", "run", "a", "--prompt", "hi", cwd=tmp_path, timeout=30)
    assert p.returncode == 0, p.stderr
    listed = inproc(tmp_path, "agent", "list", "--json")  # (a read: in this process)
    assert json.loads(listed.stdout)["agents"][0]["tokens"] == 7
    records = read_records(tmp_path / ".watchrun" / "agents" / "a.jsonl")
    (fin,) = [r for r in records if r["kind"] == "dispatch-finished"]
    assert (fin["tokens"], fin["usage"]["output"], fin["usage"]["complete"]) == (7, 0, False)
    (raw,) = [r for r in records if r["kind"] == "raw"]
    assert raw["reason"] == "malformed-event"
    assert f"output_tokens: {shown} is not a token count" in raw["error"]
