"""The transcript's parent mode (seed 004) rebuilt from the agents' JSONL of real plan runs:
`watchrun agent transcript NAME` and the run-level `watchrun transcript` (the CLI's `main`, in
this process: tests/inproc.py), validated against the transcript schema; failed and
skipped steps, a plan still running, and a plan a crashed runner left open."""

from __future__ import annotations

import asyncio
import json
from importlib import resources
from pathlib import Path
from typing import Any

from inproc import inproc
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from test_agent_hub import Harness, config, hub_test, spec, watcher
from test_agent_plans import hits, review_fix

from watchrun.agents.hub import AgentHub
from watchrun.clock import SystemClock
from watchrun.output.runlog import RunLog
from watchrun.process.spawn import Spawner


def validated(doc: dict[str, Any]) -> dict[str, Any]:
    text = resources.files("watchrun.schemas").joinpath("transcript.schema.json").read_text()
    errors = [f"{e.json_path}: {e.message}"
              for e in Draft202012Validator(json.loads(text)).iter_errors(doc)]
    assert errors == []
    return doc


def cli(out: Path, *args: str) -> dict[str, Any]:
    p = inproc(Path.cwd(), *args, "--output-dir", str(out))  # (a read, in this process)
    assert p.returncode == 0, p.stderr
    return validated(json.loads(p.stdout))


def _diff(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two documents differ (for the assertion message)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b))
                for d in _diff(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True))
                for d in _diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def plan_turns(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in doc["turns"] if t["parent"] is not None and t.get("skipped") is not None]


def test_a_review_then_fix_plan_in_parent_mode(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        h.hub.deliver(watcher(("review", "fix")), hits("ERROR disk full"))
        await h.hub.idle()
        h.hub.send("review", "and now on your own")
        await h.hub.idle()

    hub_test(tmp_path, review_fix(tmp_path), body, once=True)
    out = tmp_path / "out"
    run = cli(out, "transcript")
    assert (run["mode"], run["session_id"], run["bundle"], run["provider"]) == (
        "parent", "run", None, None)
    (turn,) = plan_turns(run)
    assert turn["run_id"] == "server:0000000000000001"
    assert turn["parent"] == {
        "kind": "agents", "reason": "watcher server matched 1 line", "reply": "",
        "plan": [{"id": "review", "role": "agent", "intent": "Review:", "depends_on": []},
                 {"id": "fix", "role": "agent", "intent": "Fix what the review found:",
                  "depends_on": ["review"]}]}
    assert turn["user"]["text"] == "ERROR disk full"
    assert [(a["id"], a["status"], a["depends_on"]) for a in turn["agents"]] == [
        ("review", "done", []), ("fix", "done", ["review"])]
    fix_answer = turn["agents"][1]["answer"]
    assert fix_answer.startswith("Mock triage: read 4 prompt line(s); first: Fix what")
    assert turn["reply"] == {"text": fix_answer, "source": "synth"}
    assert (turn["outcome"], turn["skipped"], turn["trigger"]) == ("ok", [], "wake")
    assert turn["tokens"] == sum(a["tokens"] for a in turn["agents"]) > 0
    assert turn["wall_seconds"] >= max(a["wall_seconds"] for a in turn["agents"])
    (sent,) = [t for t in run["turns"] if t["trigger"] == "send"]
    assert sent["parent"]["reason"] == "a prompt sent with `agent send`"
    assert sent["reply"]["source"] == "agent"
    # each agent's own transcript shows the same plan turn, the other agent included
    for name in ("review", "fix"):
        own = cli(out, "agent", "transcript", name)
        assert own["mode"] == "parent" and own["session_id"] == name
        assert plan_turns(own) == [turn], _diff(plan_turns(own)[0], turn)
    text = inproc(Path.cwd(), "transcript", "--output-dir", str(out), "--format", "text").stdout
    assert "parent: watcher server matched 1 line" in text
    assert "plan: review, fix (after review)" in text
    assert "reply (synth):" in text and "outcome: ok" in text


def test_a_failed_dependency_shows_the_skipped_step(tmp_path: Path) -> None:
    cfg = config(tmp_path, spec(tmp_path, "review", prompt="[mock:fail] {matches}"),
                 spec(tmp_path, "fix", prompt="{deps.review.answer}", depends_on=("review",)))

    async def body(h: Harness) -> None:
        h.hub.deliver(watcher(("review", "fix")), hits("ERROR x"))
        await h.hub.idle()

    hub_test(tmp_path, cfg, body, once=True)
    (turn,) = plan_turns(cli(tmp_path / "out", "agent", "transcript", "fix"))
    assert [a["id"] for a in turn["agents"]] == ["review"]
    assert turn["agents"][0]["status"] == "failed"
    (skipped,) = turn["skipped"]
    assert (skipped["id"], skipped["reason"]) == ("fix", "dependency-failed")
    assert turn["outcome"] == "failed" and turn["reply"] is None
    assert turn["error"]["error"]  # the review's failure, said


def test_a_failed_final_step_says_why_when_another_final_step_answered(tmp_path: Path) -> None:
    """Two final agents after one review: one fails after saying something, the other answers.
    The plan's reply is the answer, its outcome `failed`, and its `error` says why."""
    cfg = config(tmp_path, spec(tmp_path, "review"),
                 spec(tmp_path, "fixa", prompt="[mock:fail] {deps.review.answer}",
                      depends_on=("review",)),
                 spec(tmp_path, "fixb", prompt="{deps.review.answer}", depends_on=("review",)))

    async def body(h: Harness) -> None:
        h.hub.deliver(watcher(("fixa", "fixb")), hits("ERROR x"))
        await h.hub.idle()

    hub_test(tmp_path, cfg, body, once=True)
    (turn,) = plan_turns(cli(tmp_path / "out", "transcript"))
    statuses = {a["id"]: a["status"] for a in turn["agents"]}
    assert statuses == {"review": "done", "fixa": "failed", "fixb": "done"}
    assert (turn["outcome"], turn["reply"]["source"]) == ("failed", "synth")
    why = "mock: simulated failure ([mock:fail])"
    assert turn["error"]["error"] == why
    text = inproc(Path.cwd(), "transcript", "--output-dir", str(tmp_path / "out"),
                  "--format", "text").stdout
    assert f"  error: {why}\n  outcome: failed" in text


def test_an_agent_that_never_took_part_in_a_plan_stays_in_agent_mode(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        h.hub.deliver(watcher(("triage",)), hits("ERROR x"))
        await h.hub.idle()

    hub_test(tmp_path, config(tmp_path, spec(tmp_path)), body, once=True)
    doc = cli(tmp_path / "out", "agent", "transcript", "triage")
    assert doc["mode"] == "agent" and doc["turns"][0]["parent"] is None


def test_a_running_plan_has_no_outcome_yet(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        h.hub.deliver(watcher(("review", "fix")), hits("ERROR 1"))
        await h.wait_for("dispatch-start", name="review")
        doc = cli(tmp_path / "out", "transcript")
        (turn,) = plan_turns(doc)
        assert turn["outcome"] is None and turn["reply"] is None
        assert [a["status"] for a in turn["agents"]] == ["running"]

    hub_test(tmp_path, review_fix(tmp_path, "[mock:hang] {matches}"), body)


def test_a_plan_a_crashed_runner_left_open_is_closed_on_the_next_start(tmp_path: Path) -> None:
    cfg = review_fix(tmp_path, "[mock:hang] {matches}")

    async def body(h: Harness) -> None:
        h.hub.deliver(watcher(("review", "fix")), hits("ERROR 1"))
        await h.wait_for("dispatch-start", name="review")
        for a in ("review", "fix"):  # what a SIGKILL leaves: the records so far, no ending
            await h.hub.agent(a).rec.flush()  # type: ignore[union-attr]
        for a in ("review", "fix"):
            path = h.path(a)
            data = path.read_bytes()
            (tmp_path / f"{a}.crash").write_bytes(data)

    h = hub_test(tmp_path, cfg, body)
    for a in ("review", "fix"):
        h.path(a).write_bytes((tmp_path / f"{a}.crash").read_bytes())

    async def restart() -> None:  # the next start reads the history and closes what was open
        hub = await AgentHub.open(cfg, h.layout, RunLog(stream=h.stream), SystemClock(),
                                  Spawner())
        await hub.shutdown()

    asyncio.run(restart())
    doc = cli(tmp_path / "out", "transcript")
    (turn,) = plan_turns(doc)
    assert turn["agents"][0]["status"] == "killed"
    assert [(s["id"], s["reason"]) for s in turn["skipped"]] == [("fix", "runner-restarted")]
    assert turn["outcome"] == "cancelled"  # the first step's: its turn never ended
    assert turn["error"]["error"] == "the runner stopped before this turn ended"
