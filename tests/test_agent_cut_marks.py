"""What reaches a woken agent's prompt cut short says so where it was cut: a matched line cut at
`limits.maxLineBytes`, and a plan's `{deps.NAME.answer}` of which only the first 64 KiB are
kept (a real runner, real agent scripts). Both read as the whole text before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from liverunner import LiveRunner, read_records, wait_for, write_config

SAVES = """\
#!/usr/bin/env python3
import json, os, sys
open(sys.argv[1] + ".part", "w").write(sys.argv[2])
os.replace(sys.argv[1] + ".part", sys.argv[1])  # (whole once it exists: the test waits for it)
print(json.dumps({"type": "system", "subtype": "init", "session_id": "s"}))
print(json.dumps({"type": "result", "subtype": "success", "is_error": False,
                  "result": %s, "session_id": "s"}))
"""


def agent(tmp_path: Path, name: str, answer: str) -> list[str]:
    path = tmp_path / f"{name}.py"
    path.write_text(SAVES % answer)
    path.chmod(0o755)
    return [f"./{name}.py", f"{name}.prompt", "{prompt}"]


def deliveries(tmp_path: Path, name: str) -> list[dict[str, Any]]:
    return [r for r in read_records(tmp_path / ".watchrun" / "agents" / f"{name}.jsonl")
            if r["kind"] == "delivery"]


def run_until(tmp_path: Path, config: dict[str, Any], line: str, prompt: Path) -> None:
    (tmp_path / "app.log").write_text("")
    r = LiveRunner(write_config(tmp_path, config))
    try:
        r.wait_running()
        with (tmp_path / "app.log").open("a") as fh:
            fh.write(line + "\n")
        wait_for(prompt.exists, f"{prompt.name} written")
    finally:
        assert r.stop() == 0


def test_a_line_cut_at_max_line_bytes_is_marked_in_the_prompt(tmp_path: Path) -> None:
    line = "ERROR " + "a" * 500 + " THE IMPORTANT TAIL"
    run_until(tmp_path, {
        "limits": {"maxLineBytes": "256B"},
        "watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR", "wake": "a"}],
        "agents": [{"name": "a", "provider": "claude", "command": agent(tmp_path, "a", '"ok"'),
                    "prompt": "{matches}"}]}, line, tmp_path / "a.prompt")
    mark = " [… 332 bytes of this line cut: over limits.maxLineBytes …]"
    shown = line[:256 - len(mark.encode())] + mark  # (the mark takes some of the line's room)
    assert len(shown.encode()) == 256
    assert (tmp_path / "a.prompt").read_text() == shown
    assert {d["lines"][0] for d in deliveries(tmp_path, "a")} == {shown}


def test_a_dependency_s_answer_cut_at_64_kib_is_marked_in_the_prompt(tmp_path: Path) -> None:
    long = json.dumps("R" * 100_000 + " FINAL VERDICT: restart db")
    run_until(tmp_path, {
        "watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR", "wake": "fix"}],
        "agents": [
            {"name": "review", "provider": "claude",
             "command": agent(tmp_path, "review", long)},
            {"name": "fix", "provider": "claude", "command": agent(tmp_path, "fix", '"ok"'),
             "dependsOn": ["review"], "prompt": "Review said: {deps.review.answer}\nNow fix it."}]},
        "ERROR one", tmp_path / "fix.prompt")
    prompt = (tmp_path / "fix.prompt").read_text()
    assert prompt.startswith("Review said: RRR")
    assert prompt.endswith("R\n[… the rest of review's answer was cut here: only its first "
                           "64 KiB are kept …]\nNow fix it.")
