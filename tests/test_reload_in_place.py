"""Real-runner SIGHUPs whose shared settings reach what runs: the redact rules alone restart no
agent, the new stopTimeout is that of the reload's own stop of a command it restarts."""

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


def test_a_restarting_command_is_stopped_with_the_stop_timeout_of_the_same_reload(
        tmp_path: Path) -> None:
    """explore-fresh5 F2: a reload that changed stopTimeout and maxLineBytes (a restart) set
    the new stopTimeout only in the watchers it did not restart: the restarting command was
    stopped with the old one (SIGKILLed after the old 1 s, though it had been given 20 s to
    end cleanly; and the other way, waited out the old, longer grace). Now the reload's own
    stop of it is the "next stop of a command" the new stopTimeout applies to."""
    base = tmp_path / "base.yaml"
    base.write_text("watchers:\n  - id: slow\n    command: [sh, -c, \"trap 'echo got TERM; "
                    "sleep 2; echo clean exit; exit 0' TERM; echo up; while true; do sleep "
                    "0.05; done\"]\n    pattern: up\n", encoding="utf-8")
    over = tmp_path / "over.json"
    over.write_text('{"limits": {"stopTimeout": "1s"}}', encoding="utf-8")
    r = LiveRunner(base, "-c", str(over))
    try:
        r.wait_running()
        r.wait_log("[slow] match run 1:1: up")
        _reload(r, over, {"limits": {"stopTimeout": "20s", "maxLineBytes": "32KiB"}})
        r.wait_log("[slow] run 1 ended: exit code 0")  # (the 2 s it needs, within 20 s)
        wait_for(lambda: r.stderr().count("[slow] match run 1:1: up") == 2, "its restart")
        _reload(r, over, {"limits": {"stopTimeout": "1s", "maxLineBytes": "64KiB"}})
        r.wait_log("[slow] run 1 ended: signal SIGKILL")  # (killed 1 s after SIGTERM)
        wait_for(lambda: r.stderr().count("[slow] match run 1:1: up") == 3, "its restart")
    finally:
        assert r.stop() == 0
    err = r.stderr()
    assert err.count("[slow] restarting: limits.maxLineBytes changed") == 2, err
    ends = [line.split("ended: ")[1] for line in err.splitlines() if "[slow] run 1 ended" in line]
    assert ends == ["exit code 0", "signal SIGKILL", "signal SIGKILL"], err  # (the last: the stop)
