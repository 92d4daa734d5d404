"""Real-runner SIGHUPs whose shared settings reach what runs: the redact rules alone restart no
agent, the new stopTimeout is that of the reload's own stop of a command it restarts, a keep
lowered to 0 removes the rotated files at the next rotation."""

from __future__ import annotations

import json
from pathlib import Path

from liverunner import LiveRunner, cli, wait_for
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


def _errors(log: Path, tag: str, n: int) -> None:
    """Append `n` ERROR lines of ~200 bytes (a record of ~400: 64 KiB holds ~160)."""
    _append(log, "\n".join(f"ERROR {tag} {k:04d} " + "x" * 180 for k in range(n)))


def _shown(root: Path) -> list[dict[str, object]]:
    """The match records `watchrun matches app` shows (all of them)."""
    done = cli("--output-dir", root / ".watchrun", "matches", "app", "--lines", "2000", "--json",
               cwd=root)
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout)["matches"])


def _last_shown(root: Path, line: str) -> list[int]:
    """Once `line` is the last match shown: the seqs of those shown."""
    shown = wait_for(lambda: (m := _shown(root)) and str(m[-1]["line"]).startswith(line) and m,
                     f"{line} shown last")
    return [int(str(m["seq"])) for m in shown]


def test_output_keep_lowered_to_0_removes_the_rotated_files_at_the_next_rotation(
        tmp_path: Path) -> None:
    """explore-fresh5 F4: a reload (or a restart) that lowered output.keep to 0 left the rotated
    files (`app.jsonl.1`, `.2`) forever: a keep-0 rotation removed only the live file, and
    `watchrun matches` joined the old files to the live one, its seqs jumping over the
    records removed in between, saying nothing. Now the next rotation removes them too, as
    lowering 3 to 1 removes `.2` and `.3`. A restart with keep 0 over them reads them on until
    then (they end where the live file begins)."""
    base = tmp_path / "base.yaml"
    base.write_text("watchers:\n  - {id: app, path: app.log, pattern: ERROR}\n",
                    encoding="utf-8")
    over = tmp_path / "over.json"
    over.write_text('{"output": {"maxBytes": "64KiB", "keep": 2}}', encoding="utf-8")
    log, out = tmp_path / "app.log", tmp_path / ".watchrun" / "watchers"
    log.write_text("")
    r = LiveRunner(base, "-c", str(over))
    try:
        r.wait_running()
        _errors(log, "a", 600)
        wait_for(lambda: (out / "app.jsonl.2").exists(), "two rotations")
        _reload(r, over, {"output": {"maxBytes": "64KiB", "keep": 0}})
        _errors(log, "b", 300)
        wait_for(lambda: not (out / "app.jsonl.1").exists(), "the next rotation")
        assert not (out / "app.jsonl.2").exists()
        seqs = _last_shown(tmp_path, "ERROR b 0299")
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # (no jump)
    finally:
        assert r.stop() == 0
    over.write_text('{"output": {"maxBytes": "64KiB", "keep": 2}}', encoding="utf-8")
    r = LiveRunner(base, "-c", str(over))
    try:  # made again, then a restart with keep 0 over them
        r.wait_running()
        _errors(log, "c", 600)
        wait_for(lambda: (out / "app.jsonl.2").exists(), "two rotations")
        _last_shown(tmp_path, "ERROR c 0599")
    finally:
        assert r.stop() == 0
    over.write_text('{"output": {"maxBytes": "64KiB", "keep": 0}}', encoding="utf-8")
    r = LiveRunner(base, "-c", str(over))
    try:
        r.wait_running()
        seqs = _last_shown(tmp_path, "ERROR c 0599")  # (they end where the live one begins)
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))) and len(seqs) > 300
        _errors(log, "d", 300)
        wait_for(lambda: not (out / "app.jsonl.1").exists(), "the next rotation")
        assert not (out / "app.jsonl.2").exists()
        seqs = _last_shown(tmp_path, "ERROR d 0299")
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    finally:
        assert r.stop() == 0
