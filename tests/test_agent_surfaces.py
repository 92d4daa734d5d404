"""Every provider, one hostile turn through the real CLI (`agent run`, a real process), then
every surface: no control character anywhere, and the same clean answer on each one.

The surfaces: the JSONL records, `agent run`'s stdout, `agent watch` (JSON and text, with and
without `--raw`), `agent transcript` (JSON and text) and `agent list` (JSON and table).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hostile_streams import BROKEN, PROVIDERS, STDERR, stream
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from recordcheck import validate_records

from watchrun.cli.main import main

PROG = Path(__file__).parent / "progs" / "replay_stream.py"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Any C0 control but tab and newline, DEL, any C1 control."""


def strings(value: Any, skip_raw: bool = False) -> Iterator[str]:
    """Every string of a JSON value, keys too (a record's `raw` and raw `value` skipped)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if skip_raw and (key == "raw" or (key == "value" and value.get("kind") == "raw")):
                continue
            yield key
            yield from strings(item, skip_raw)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item, skip_raw)


def controls(value: Any, skip_raw: bool = False) -> list[str]:
    return [s for s in strings(value, skip_raw) if CONTROL.search(s)]


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    out = capsys.readouterr().out
    return code, out


def schema_errors(name: str, doc: Any) -> list[str]:
    text = resources.files("watchrun.schemas").joinpath(f"{name}.schema.json").read_text()
    return [e.message for e in Draft202012Validator(json.loads(text)).iter_errors(doc)]


def one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 60 else line[:59] + "…"


@pytest.fixture(params=PROVIDERS)
def turn(request: pytest.FixtureRequest, tmp_path: Path,
         capsys: pytest.CaptureFixture[str]) -> tuple[str, Path, str, str]:
    """(provider, config, answer, `agent run` stdout) after one hostile turn."""
    provider: str = request.param
    out, answer = stream(provider)
    (tmp_path / "stdout.bin").write_bytes(out)
    (tmp_path / "stderr.bin").write_bytes(STDERR.encode())
    command = [sys.executable, str(PROG), str(tmp_path / "stdout.bin"),
               str(tmp_path / "stderr.bin"), "0", "{prompt}"]
    cfg = tmp_path / "watch.yaml"
    cfg.write_text(json.dumps({"output": {"dir": "out"}, "agents": [
        {"name": "a", "provider": provider, "command": command,
         "prompt": "look at \x1b[31mthis\x1b[0m"}]}))
    code, printed = cli(capsys, "agent", "run", "a", "-c", str(cfg))
    assert code == 0, capsys.readouterr().err
    return provider, cfg, answer, printed


def test_records_carry_no_control_character(turn: tuple[str, Path, str, str]) -> None:
    provider, cfg, answer, _ = turn
    recs = validate_records(cfg.parent / "out" / "agents" / "a.jsonl")
    assert controls(recs, skip_raw=True) == []
    (fin,) = [r for r in recs if r["kind"] == "dispatch-finished"]
    assert fin["status"] == "done" and fin["reply"] == answer
    assert [r["text"] for r in recs if r["kind"] == "stderr"] == ["warning: slow tail"]
    # U+009D did not eat the rest of a line: every tool result arrived, text continued after it
    results = [r for r in recs if r["kind"] == "tool-result"]
    if provider != "generic":
        assert [r["preview"] for r in results] == ["ok\nfile body  tail"]
        assert [r["path"] for r in recs if r["kind"] == "file-change"] == [
            "cat hidden notes.txt"]


def test_every_surface_shows_the_same_clean_answer(
    turn: tuple[str, Path, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    provider, cfg, answer, printed = turn
    c = str(cfg)
    assert printed == answer + "\n"  # agent run's stdout

    code, out = cli(capsys, "agent", "watch", "a", "-c", c)
    watch = json.loads(out)
    assert code == 0 and controls(watch) == [] and not CONTROL.search(out)
    assert schema_errors("agent-watch", watch) == []
    assert watch["transcript"]["latest_text"] == answer
    output = watch["output"]["text"]
    if provider == "generic":  # its stdout lines as they came (stderr interleaves), no reply
        assert [ln for ln in output.splitlines() if ln != "warning: slow tail"] == \
            answer.splitlines()
    else:  # the banner and stderr lines, then the turn's reply
        assert output.endswith(answer + "\n")

    code, out = cli(capsys, "agent", "watch", "a", "-c", c, "--include", "events,transcript")
    view = json.loads(out)
    assert schema_errors("agent-watch", view) == []
    events = view["events"]
    assert code == 0 and len(events) > 5 and controls(events) == []  # raw records sanitized
    if provider != "generic":
        (broken,) = [e for e in events if e["kind"] == "raw"]
        assert broken["reason"] == "unparseable"
        assert broken["value"] == '{"type": "assistant", "text": " cut'

    code, out = cli(capsys, "agent", "transcript", "a", "-c", c)
    doc = json.loads(out)
    assert code == 0 and controls(doc) == [] and not CONTROL.search(out)
    assert schema_errors("transcript", doc) == []
    (t,) = doc["turns"]
    assert t["agents"][0]["answer"] == answer and t["reply"]["text"] == answer
    assert t["user"]["text"] == "look at this"

    code, out = cli(capsys, "agent", "list", "-c", c, "--json")
    (row,) = json.loads(out)["agents"]
    assert code == 0 and row["lastReply"] == answer and not CONTROL.search(out)  # whole
    code, out = cli(capsys, "agent", "list", "-c", c)
    assert code == 0 and out.splitlines()[1].rstrip().endswith(one_line(answer)), out

    for args in (["agent", "watch", "a", "--format", "text"],
                 ["agent", "watch", "a", "--raw", "--format", "text"],
                 ["agent", "transcript", "a", "--format", "text"], ["agent", "list"]):
        code, out = cli(capsys, *args, "-c", c)
        assert code == 0 and not CONTROL.search(out), (args, out)


def test_raw_output_is_opt_in_and_keeps_what_the_terminal_printed(
    turn: tuple[str, Path, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    provider, cfg, _, _ = turn
    _, out = cli(capsys, "agent", "watch", "a", "-c", str(cfg))
    assert "raw_output" not in json.loads(out)
    _, out = cli(capsys, "agent", "watch", "a", "-c", str(cfg), "--raw")
    raw = json.loads(out)["raw_output"]["text"]
    assert "\x1b[1;32m●\x1b[0m starting\x07 \x9d banner\n" in raw  # the banner, as printed
    assert "\x1b]0;title\x07warning" in raw  # the stderr line, as printed
    if provider != "generic":
        assert BROKEN + "\n" in raw  # the broken protocol line, as printed
    if provider == "generic":  # a generic agent's raw tap is its whole stdout
        assert "\x1b[31mAll\x1b[0m clear\x07" in raw and "line two\x7f \x9b31mend" in raw


def test_a_pty_agents_raw_tap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A generic agent under a pseudo-terminal: the default surfaces are clean, and
    `--raw` gives back the terminal's bytes (colours, CRLF line ends, a progress rewrite)."""
    script = ("import sys; sys.stdout.write('\\x1b[31mred\\x1b[0m\\n10%\\r100%\\n'"
              "'\\x1b]0;title\\x07done\\n')")
    cfg = tmp_path / "watch.yaml"
    cfg.write_text(json.dumps({"output": {"dir": "out"}, "agents": [
        {"name": "p", "provider": "generic", "pty": True,
         "command": [sys.executable, "-c", script, "{prompt}"]}]}))
    code, printed = cli(capsys, "agent", "run", "p", "-c", str(cfg), "--prompt", "go")
    assert code == 0 and printed == "red\n100%\ndone\n"
    _, out = cli(capsys, "agent", "watch", "p", "-c", str(cfg))
    view = json.loads(out)
    assert view["output"]["text"] == "red\n100%\ndone\n" and controls(view) == []
    assert view["transcript"]["latest_text"] == "red\n100%\ndone"
    _, out = cli(capsys, "agent", "watch", "p", "-c", str(cfg), "--raw")
    assert json.loads(out)["raw_output"]["text"] == (
        "\x1b[31mred\x1b[0m\r\n10%\r100%\r\n\x1b]0;title\x07done\r\n")


FIXTURES = Path(__file__).parent / "fixtures" / "providers"


def replayed(tmp_path: Path, capsys: pytest.CaptureFixture[str], provider: str, stdout: bytes,
             stderr: bytes, exit_code: int) -> tuple[int, str, dict[str, Any], list[Any]]:
    """One `agent run` of a process printing `stdout`/`stderr` and exiting `exit_code`:
    (run's exit status, its stdout, the transcript's turn, the records)."""
    (tmp_path / "out.bin").write_bytes(stdout)
    (tmp_path / "err.bin").write_bytes(stderr)
    cfg = tmp_path / "watch.yaml"
    cfg.write_text(json.dumps({"output": {"dir": "out"}, "agents": [
        {"name": "a", "provider": provider, "command": [
            sys.executable, str(PROG), str(tmp_path / "out.bin"), str(tmp_path / "err.bin"),
            str(exit_code), "{prompt}"]}]}))
    code, printed = cli(capsys, "agent", "run", "a", "-c", str(cfg))
    _, out = cli(capsys, "agent", "transcript", "a", "-c", str(cfg))
    recs = validate_records(tmp_path / "out" / "agents" / "a.jsonl")
    doc = json.loads(out)
    assert schema_errors("transcript", doc) == []
    return code, printed, doc["turns"][-1], recs


def test_gemini_fatal_auth_error_on_stderr(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    stderr = (FIXTURES / "gemini" / "documented_auth_failure_exit41.stderr.txt").read_bytes()
    code, printed, turn, recs = replayed(tmp_path, capsys, "gemini", b"", stderr, 41)
    assert (code, printed) == (1, "")
    (fin,) = [r for r in recs if r["kind"] == "dispatch-finished"]
    assert fin["error"]["code"] == "auth" and fin["exitCode"] == 41
    assert turn["error"]["error"].startswith("Please set an Auth method")
    assert "GEMINI_API_KEY" in turn["error"]["hint"]


@pytest.mark.parametrize(("exit_code", "status"), [(0, "done"), (1, "failed")])
def test_legacy_codex_without_task_complete(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            exit_code: int, status: str) -> None:
    stdout = (FIXTURES / "codex" / "legacy_v0.39_msg_envelope.jsonl").read_bytes()
    code, printed, turn, _ = replayed(tmp_path, capsys, "codex", stdout,
                                      b"Reading prompt from stdin...\n", exit_code)
    assert turn["agents"][0]["status"] == status and code == (0 if status == "done" else 1)
    assert printed == "PONG\n" and turn["agents"][0]["answer"] == "PONG"


def test_cursor_failure_without_a_result_line(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    init = b'{"type":"system","subtype":"init","session_id":"s","model":"Auto"}\n'
    stderr = b"\x1b[31mError: Authentication required.\x1b[0m Please run 'cursor-agent login'\n"
    code, _, turn, recs = replayed(tmp_path, capsys, "cursor", init, stderr, 1)
    assert code == 1 and turn["agents"][0]["status"] == "failed"
    assert turn["error"]["error"] == ("Error: Authentication required. Please run "
                                      "'cursor-agent login'")
    assert "CURSOR_API_KEY" in turn["error"]["hint"] and controls(recs, skip_raw=True) == []


def test_a_tool_denial_is_a_guardrail_step(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    stdout = (FIXTURES / "copilot" / "documented_tools_usage_denied.documented.jsonl").read_bytes()
    code, printed, turn, recs = replayed(tmp_path, capsys, "copilot", stdout, b"", 0)
    agent = turn["agents"][0]
    assert code == 0 and agent["status"] == "done"
    assert [(s["kind"], s.get("tool"), s.get("ok")) for s in agent["steps"]] == [
        ("tool_call", "bash", True), ("tool_call", "edit", False),
        ("guardrail", "edit", None)]
    assert agent["steps"][2]["rule"] == "tool-denied"
    assert agent["files"] == [{"path": "pytest -q", "op": "run"}]
    assert printed.startswith("test_ttl fails because")
    assert [r["kind"] for r in recs].count("compaction") == 1


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("*/*.jsonl")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_replays_to_one_answer(fixture: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Each captured stream through a real turn: valid records, and whatever the outcome, the
    reply `agent run` prints is the transcript's answer and watch's latest text."""
    code, printed, turn, recs = replayed(tmp_path, capsys, fixture.parent.name,
                                         fixture.read_bytes(), b"", 0)
    (fin,) = [r for r in recs if r["kind"] == "dispatch-finished"]
    assert code == (0 if fin["status"] == "done" else 1)
    assert printed == (fin["reply"] + "\n" if fin["reply"] else "")
    assert turn["agents"][0]["answer"] == fin["reply"]
    assert (turn["reply"] or {}).get("text", "") == fin["reply"]
    _, out = cli(capsys, "agent", "watch", "a", "-c", str(tmp_path / "watch.yaml"))
    if fin["reply"]:
        assert json.loads(out)["transcript"]["latest_text"] == fin["reply"]
    assert controls(recs, skip_raw=True) == []
