"""README "React to matches": exactly its config, run end to end offline (`run --once`) against
a real HTTP server on loopback standing in for Slack: the webhook throttled with the suppressed
count, the exec's incidents file, and a review→fix plan whose transcript is in parent mode."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from liverunner import cli
from recordcheck import validate_records
from test_plan_transcript import plan_turns, validated
from webhook_server import receiver

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def react_config() -> str:
    section = README.split("## React to matches", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```yaml\n(.*?)```", section, flags=re.S)[0]


def test_the_readme_reaction_config_runs_end_to_end(tmp_path: Path) -> None:
    config = tmp_path / "react.yaml"
    config.write_text(react_config())
    with receiver(200) as slack:
        env = {**os.environ, "SLACK_WEBHOOK_URL": slack.url}
        p = cli("run", "--once", "-c", config, env=env, cwd=tmp_path, timeout=120)
        assert p.returncode == 0, p.stderr
        texts = [b["text"] for b in slack.bodies()]
    out = tmp_path / ".watchrun"
    recs = validate_records(out / "watchers" / "payments.jsonl")
    fired = [r for r in recs if r["kind"] == "action-fired"]
    results = [r for r in recs if r["kind"] == "action-result"]
    assert {r["status"] for r in results} == {"ok"} and len(results) == len(fired)
    page = [r for r in fired if r["action"] == "slack"]
    assert sum(r["count"] for r in page) == 2 and len(page) == len(texts) <= 2
    if len(page) == 2:  # the lines came in two batches: the second was held by the throttle
        assert (page[1]["reason"], page[1]["suppressed"]) == ("throttle-end", 1)
        assert [r["kind"] for r in recs].count("action-suppressed") == 1
        assert "1 earlier firing(s) throttled (1 matches)" in texts[1]
    assert all(t.startswith("*watchrun*: `payments`") for t in texts)
    (incident,) = [r for r in fired if r["action"] == "incident"]
    assert (incident["reason"], incident["count"]) == ("threshold", 2)
    lines = [json.loads(x)["line"] for x in (tmp_path / "incidents.jsonl").read_text().splitlines()]
    assert lines == ["ERROR payment failed: card declined", "ERROR payment failed again"]
    secret = slack.url.split("/hooks")[1]
    for path in [*out.rglob("*.jsonl")]:
        assert secret not in path.read_text()
    assert secret not in p.stderr

    t = cli("transcript", "-c", config, env=env, timeout=60)
    assert t.returncode == 0, t.stderr
    doc = validated(json.loads(t.stdout))
    plans = plan_turns(doc)
    assert plans and all(p["outcome"] == "ok" for p in plans)
    first = plans[0]
    assert first["parent"]["kind"] == "agents"
    assert first["parent"]["reason"].startswith("watcher payments matched")
    assert [s["id"] for s in first["parent"]["plan"]] == ["review", "fix"]
    assert [a["id"] for a in first["agents"]] == ["review", "fix"]
    assert first["reply"]["source"] == "synth"
    assert first["reply"]["text"] == first["agents"][1]["answer"]
    fix_prompt = next(r for r in validate_records(out / "agents" / "fix.jsonl")
                      if r["kind"] == "prompt")["text"]
    assert first["agents"][0]["answer"] in fix_prompt  # {deps.review.answer}
