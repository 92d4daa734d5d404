"""Real-runner SIGHUPs whose shared settings reach what runs: the redact rules alone restart no
agent."""

from __future__ import annotations

from pathlib import Path

from liverunner import LiveRunner, wait_for
from test_reload_shared import SECRET, _append, _reload

HOLD = "cat > /dev/null; while [ ! -e go ]; do sleep 0.05; done; echo finished"
"""An agent whose turn runs until the test creates `go` in its folder."""


def _finished(r: LiveRunner, name: str) -> list[dict[str, object]]:
    return [x for x in r.records(name, "agents") if x["kind"] == "dispatch-finished"]


def test_a_reload_of_the_redact_rules_alone_keeps_a_running_agent_turn(tmp_path: Path) -> None:
    """explore-fresh5 F1: the config copies its redact rules into every agent's spec, so a
    reload that only added a rule saw every agent changed: its running turn was cancelled
    ("the agent's config changed") and the agent restarted. Now the turn runs to its end and
    the agent's next prompt is redacted with the new rule."""
    base = tmp_path / "base.yaml"
    base.write_text("watchers:\n  - {id: a, path: a.log, pattern: ERROR, wake: t}\n"
                    "agents:\n  - {name: t, provider: generic, command: [sh, -c, "
                    f"'{HOLD}']}}\n", encoding="utf-8")
    over = tmp_path / "over.json"
    over.write_text("{}", encoding="utf-8")
    log, go = tmp_path / "a.log", tmp_path / "go"
    log.write_text("")
    r = LiveRunner(base, "-c", str(over))
    try:
        r.wait_running()
        _append(log, "ERROR first")
        r.wait_log("[t] turn-")  # (its turn runs, held until `go`)
        _reload(r, over, {"redact": ["corp-[0-9]{6}"]})
        go.touch()
        wait_for(lambda: _finished(r, "t"), "the first turn's end")
        assert [x["status"] for x in _finished(r, "t")] == ["done"]
        go.unlink()
        _append(log, f"ERROR second {SECRET}")
        wait_for(lambda: [x for x in r.records("t", "agents") if x["kind"] == "prompt"][1:],
                 "the second prompt")
        prompts = [x["text"] for x in r.records("t", "agents") if x["kind"] == "prompt"]
        assert "ERROR second [REDACTED:custom]" in str(prompts[1]) and SECRET not in prompts[1]
        go.touch()
        wait_for(lambda: len(_finished(r, "t")) == 2, "the second turn's end")
    finally:
        assert r.stop() == 0
    err = r.stderr()
    assert "config changed" not in err and "cancelled" not in err, err
