"""Agent faults: one writer per agent stream, cut stderr lines marked, wrong-shaped and too
deeply nested lines kept, a pipe reader that dies ending its turn."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from inproc import inproc
from liverunner import alive, cli
from test_agent_turn import check_records, of

from watchrun.agents.clean import clean_record
from watchrun.agents.providers import make_adapter
from watchrun.agents.providers.jsonline import MAX_DEPTH
from watchrun.output.jsonl import dumps

WATCHRUN = Path(sys.executable).parent / "watchrun"
DEADLINE_S = 20.0

HELD_AGENT = """\
import json, pathlib, sys, time
print(json.dumps({"type": "system", "subtype": "init", "session_id": "s"}), flush=True)
go, end = pathlib.Path(sys.argv[1]), time.monotonic() + 20
while not go.exists() and time.monotonic() < end:  # held until the test lets it finish
    time.sleep(0.01)
print(json.dumps({"type": "result", "subtype": "success", "is_error": False,
                  "result": "ok " + sys.argv[2], "session_id": "s"}), flush=True)
"""


def wait_for(what: str, check: Callable[[], bool]) -> None:
    end = time.monotonic() + DEADLINE_S
    while not check():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.01)


def write_config(tmp_path: Path, agent: dict[str, Any], **extra: Any) -> Path:
    cfg = tmp_path / "watch.yaml"
    cfg.write_text(json.dumps({"agents": [{"name": "a", "provider": "claude",
                                           "deadline": "30s", **agent}], **extra}))
    return cfg


def watchrun(cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli(*args, "-c", cfg, cwd=cfg.parent, timeout=DEADLINE_S)


def records(tmp_path: Path) -> list[dict[str, Any]]:
    return check_records(tmp_path / ".watchrun" / "agents" / "a.jsonl")


# -- one writer per agent stream -------------------------------------------------------------

def test_an_agent_being_run_cannot_be_written_by_a_second_process(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(HELD_AGENT)
    go = tmp_path / "go"
    cfg = write_config(tmp_path, {"command": [sys.executable, "agent.py", str(go), "{prompt}"]},
                       watchers=[{"id": "app", "path": "app.log", "pattern": "E", "wake": "a"}])
    (tmp_path / "app.log").write_text("")
    first = subprocess.Popen([str(WATCHRUN), "agent", "run", "a", "-c", str(cfg), "--prompt",
                              "one"], cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_for("the first turn to start", lambda: (tmp_path / ".watchrun/agents/a.jsonl")
                 .exists() and bool(of(records(tmp_path), "session")))
        second = watchrun(cfg, "agent", "run", "a", "--prompt", "two")
        runner = watchrun(cfg, "run")
        go.touch()
        out, err = first.communicate(timeout=DEADLINE_S)
    finally:
        go.touch()
        if first.poll() is None:
            first.kill()
            first.wait()
    busy = (f"agent a's records ({tmp_path}/.watchrun/agents/a.jsonl) are being written by "
            f"another process (pid {first.pid})")
    assert second.returncode == 3
    assert second.stderr.startswith(f"watchrun: error: {busy}"), second.stderr
    assert runner.returncode == 3
    assert f"could not start: agents: {busy}" in runner.stderr, runner.stderr
    assert "Traceback" not in runner.stderr
    assert (first.returncode, out) == (0, "ok one\n"), err
    assert watchrun(cfg, "agent", "run", "a", "--prompt", "three").stdout == "ok three\n"
    recs = records(tmp_path)
    assert [r["seq"] for r in recs] == list(range(1, len(recs) + 1))
    assert [r["turnId"] for r in of(recs, "dispatch-start")] == ["turn-1", "turn-9"]
    assert [(r["turnId"], r["status"]) for r in of(recs, "dispatch-finished")] == [
        ("turn-1", "done"), ("turn-9", "done")]
    assert [r["text"] for r in of(recs, "prompt")] == ["one", "three"]



# -- what an agent leaves behind --------------------------------------------------------------

ESCAPING_AGENT = """\
import json, pathlib, subprocess, sys, time
subprocess.Popen(["env", "-i", "sh", "-c", "echo $$ > pid.tmp; mv pid.tmp pid; exec sleep 1000"],
                 start_new_session=True, stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
end = time.monotonic() + 20
while not pathlib.Path("pid").exists() and time.monotonic() < end:  # it runs, then we go
    time.sleep(0.01)
print(json.dumps({"type": "result", "subtype": "success", "is_error": False,
                  "result": "ok", "session_id": "s"}), flush=True)
"""


def test_agent_run_stops_a_daemon_that_left_the_session_and_environment(tmp_path: Path) -> None:
    """A child the agent put in a session of its own, with an empty environment, and then
    orphaned: `agent run` was no subreaper, so the orphan went to init, out of the turn's
    reach, and outlived `agent run` unsaid. It is adopted now, stopped with the turn and
    recorded (`left-running`)."""
    (tmp_path / "agent.py").write_text(ESCAPING_AGENT)
    cfg = write_config(tmp_path, {"command": [sys.executable, "agent.py", "{prompt}"]})
    pid_file = tmp_path / "pid"
    try:
        run = watchrun(cfg, "agent", "run", "a", "--prompt", "hi")
        assert (run.returncode, run.stdout) == (0, "ok\n"), run.stderr
        assert not alive(int(pid_file.read_text()))
        (err,) = of(records(tmp_path), "error")
        assert (err["code"], err["count"]) == ("left-running", 1)
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid_file.read_text()), 9)



# -- an agent that cannot start ---------------------------------------------------------------

@pytest.mark.parametrize(("first_line", "interpreter"), [
    (b"#!/bin/sh\r\n", "'/bin/sh\\r'"),  # a script saved with CRLF line ends
    (b"#!/nonexistent/node --flag\n", "'/nonexistent/node'"),
])
@pytest.mark.parametrize("by_path", [True, False])
def test_a_script_whose_interpreter_is_missing_says_so(tmp_path: Path, first_line: bytes,
                                                       interpreter: str, by_path: bool) -> None:
    """exec(2) says ENOENT for a script whose #! interpreter does not exist: `agent run` said
    the script itself was "not found", which is right there. It names the interpreter now, and
    exits 3 (a command that cannot start, docs/cli.md), not 1 (a turn that ran and failed)."""
    script = tmp_path / "bin" / "agent-cli"
    script.parent.mkdir()
    script.write_bytes(first_line + b"echo hi\n")
    script.chmod(0o755)
    command = {"command": [str(script), "{prompt}"]} if by_path else {
        "command": ["agent-cli", "{prompt}"], "env": {"PATH": str(script.parent)}}
    cfg = write_config(tmp_path, command)
    run = watchrun(cfg, "agent", "run", "a", "--prompt", "hi")
    shown = str(script) if by_path else "agent-cli"
    message = (f"cannot start {shown!r}: executable {script}: its #! interpreter "
               f"{interpreter} was not found (ENOENT)")
    assert (run.returncode, run.stderr) == (3, f"watchrun: error: agent a: turn-1 failed: "
                                               f"{message}\n")
    (err,) = of(records(tmp_path), "error")
    assert (err["code"], err["message"]) == ("ENOENT", message)


# -- a cut stderr line is marked ---------------------------------------------------------------

def test_a_stderr_line_cut_at_max_line_bytes_says_so(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(
        "import json, sys\n"
        "sys.stderr.write('S' * 5000 + '\\nshort\\n'); sys.stderr.flush()\n"
        "print('O' * 5000)\n"
        "print(json.dumps({'type': 'result', 'subtype': 'success', 'is_error': False,"
        " 'result': 'ok', 'session_id': 's'}))\n")
    cfg = write_config(tmp_path, {"command": [sys.executable, "agent.py", "{prompt}"]},
                       limits={"maxLineBytes": 1024})
    assert watchrun(cfg, "agent", "run", "a", "--prompt", "hi").returncode == 0
    recs = records(tmp_path)
    assert [(r["text"], r.get("truncated")) for r in of(recs, "stderr")] == [
        ("S" * 1024, True), ("short", None)]
    assert [(r["text"], r.get("truncated")) for r in of(recs, "output")] == [("O" * 1024, True)]


# -- a protocol line of the wrong shape is never lost ------------------------------------------

MALFORMED = [
    ("claude", '{"type":"assistant","message":"a string, not an object"}',
     "message: expected an object, got string"),
    ("claude", '{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":1}]}}',
     "text block.text: expected a string, got number"),
    ("claude", '{"type":"assistant","message":{"content":{"type":"text","text":"x"}}}',
     "message.content: expected an array, got object"),
    ("claude", '{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":7}]}}',
     "tool_result block.tool_use_id: expected a string, got number"),
    ("claude", '{"type":"stream_event","event":{"type":"content_block_delta",'
     '"delta":{"type":"text_delta","text":["x"]}}}',
     "text_delta.text: expected a string, got array"),
    ("claude", '{"type":"result","subtype":"success","is_error":false,"result":{"text":"x"}}',
     "result: expected a string, got object"),
    ("codex", '{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":42}}',
     "agent_message.text: expected a string, got number"),
    ("gemini", '{"type":"message","role":"assistant","content":["x"]}',
     "message.content: expected a string, got array"),
    ("opencode", '{"type":"text","part":{"text":{"t":"x"}}}',
     "part.text: expected a string, got object"),
    ("pi", '{"type":"message_end","message":{"role":"assistant","content":"x"}}',
     "message.content: expected an array, got string"),
    ("cursor", '{"type":"assistant","message":"x"}', "message: expected an object, got string"),
    ("copilot", '{"type":"assistant.message","data":{"content":7}}',
     "data.content: expected a string, got number"),
]


@pytest.mark.parametrize(("provider", "line", "error"), MALFORMED)
def test_a_field_of_the_wrong_type_keeps_the_line_as_raw(provider: str, line: str,
                                                         error: str) -> None:
    found = make_adapter(provider).parse(line)
    assert [(o.kind, dict(o.fields)) for o in found if o.kind == "raw"] == [("raw", {
        "value": line, "reason": "malformed-event", "bytes": len(line), "error": error})]


def test_claude_content_as_a_plain_string_is_the_text() -> None:
    adapter = make_adapter("claude")
    said = adapter.parse('{"type":"assistant","message":{"id":"m1","content":"plain text"}}')
    echo = adapter.parse('{"type":"user","message":{"role":"user","content":"the prompt"}}')
    assert [(o.kind, dict(o.fields)) for o in said] == [
        ("text", {"text": "plain text", "messageId": "m1"})]
    assert echo == []


def test_an_agent_run_records_every_wrong_shaped_line(tmp_path: Path) -> None:
    lines = [*[line for provider, line, _ in MALFORMED if provider == "claude"][:4],
             '{"type":"assistant","message":{"id":"m1","content":"IMPORTANT as a plain string"}}',
             '{"type":"result","subtype":"success","is_error":false,"result":"ok"}']
    (tmp_path / "agent.py").write_text(f"print({chr(10).join(lines)!r})\n")
    cfg = write_config(tmp_path, {"command": [sys.executable, "agent.py", "{prompt}"]})
    assert watchrun(cfg, "agent", "run", "a", "--prompt", "hi").stdout == "ok\n"
    recs = records(tmp_path)
    assert [r["value"] for r in of(recs, "raw")] == lines[:4]
    assert {r["reason"] for r in of(recs, "raw")} == {"malformed-event"}
    assert [r["text"] for r in of(recs, "text")] == ["IMPORTANT as a plain string", "ok"]


# -- JSON nested deeper than a record can hold -------------------------------------------------

DEEP = "[" * 600 + "]" * 600  # json.loads reads it; a record cannot hold it (orjson: 255 levels)
DEEPER = "[" * 5000 + "]" * 5000  # json.loads raises RecursionError
FILLER = 2000  # lines of 200 bytes after it: more than the pipe and asyncio's buffer hold
NESTED = [  # (provider, where the deep line goes, the line, the last lines)
    ("claude", "stdout", '{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use",'
     f'"id":"t","name":"Bash","input":{{"x":{DEEP}}}}}]}}}}',
     ['{"type":"result","subtype":"success","is_error":false,"result":"ok"}']),
    ("gemini", "stdout", '{\n"type": "message",\n"x": ' + DEEPER + "\n}",
     ['{"type":"message","role":"assistant","content":"ok"}',
      '{"type":"result","status":"success","stats":{}}']),
    ("gemini", "stderr", '{"x": ' + DEEPER + "}",
     ['{"type":"message","role":"assistant","content":"ok"}',
      '{"type":"result","status":"success","stats":{}}']),
]


@pytest.mark.parametrize(("provider", "where", "line", "last"), NESTED)
def test_json_nested_too_deep_is_raw_and_the_turn_reads_on(
        tmp_path: Path, provider: str, where: str, line: str, last: list[str]) -> None:
    """A line nested 600 levels deep killed the reader of that pipe (a RecursionError while
    its record was written; 5000 levels in Gemini's multi-line and stderr JSON, where
    json.loads' own RecursionError was not caught): the agent then blocked
    on the full pipe and `agent run` hung until the turn's deadline. It is a `raw` record now
    (stderr: a `stderr` record), and every line after it is read."""
    (tmp_path / "agent.py").write_text(
        "import sys\n"
        f"out = sys.{where}\n"
        f"out.write({line!r} + '\\n')\n"
        f"out.write(('x' * 199 + '\\n') * {FILLER}); out.flush()\n"
        f"print({chr(10).join(last)!r})\n")
    cfg = write_config(tmp_path, {"provider": provider,
                                  "command": [sys.executable, "agent.py", "{prompt}"]})
    run = watchrun(cfg, "agent", "run", "a", "--prompt", "hi")
    assert (run.returncode, run.stdout) == (0, "ok\n"), run.stderr
    recs = records(tmp_path)
    assert of(recs, "error") == []
    filler = of(recs, "output" if where == "stdout" else "stderr")
    assert [r["text"] for r in filler].count("x" * 199) == FILLER
    if where == "stdout":
        (raw,) = of(recs, "raw")
        assert (raw["reason"], raw["bytes"]) == ("unparseable", len(line))
        assert raw["value"] == line[:2000] and "nested deeper than" in raw["error"]
    else:
        assert of(recs, "stderr")[0]["text"] == line



def nested(depth: int) -> str:
    """A JSON object nested `depth` levels deep (itself the first)."""
    return '{"a":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


@pytest.mark.parametrize("provider", ["claude", "codex", "gemini", "opencode", "pi", "cursor",
                                      "copilot"])
def test_a_line_is_refused_one_level_past_max_depth(provider: str) -> None:
    assert [o.fields.get("error") for o in make_adapter(provider).parse(nested(MAX_DEPTH))
            if o.fields.get("reason") == "unparseable"] == []
    (deep,) = make_adapter(provider).parse(nested(MAX_DEPTH + 1))
    assert (deep.kind, deep.fields["reason"]) == ("raw", "unparseable")
    assert deep.fields["error"] == f"nested deeper than {MAX_DEPTH} levels"


def test_a_tool_input_at_max_depth_is_written() -> None:
    """A Claude tool call's input sits under 4 levels of its line, and under 1 of its record."""
    line = ('{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t",'
            f'"name":"Bash","input":{nested(MAX_DEPTH - 4)}}}]}}}}')
    (tool,) = make_adapter("claude").parse(line)
    assert tool.kind == "tool"
    assert dumps({"kind": "tool", **clean_record("tool", tool.fields, None)}).endswith(b"\n")


# -- an agent that lingers after its final result ---------------------------------------------

def seamed_agent_run(tmp_path: Path, cfg: Path,
                     seam: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """`watchrun agent run a --prompt hi -c cfg` in an interpreter that runs `seam` first;
    the run and how long it took."""
    code = f"import sys\n{seam}from watchrun.cli import entry\n" \
        "sys.argv[0] = 'watchrun'; sys.exit(entry())"
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-c", code, "agent", "run", "a", "--prompt", "hi",
                          "-c", str(cfg)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=DEADLINE_S)
    return run, time.monotonic() - started


LINGERING = """\
import json, sys, time
print(json.dumps({"type": "system", "subtype": "init", "session_id": "s"}), flush=True)
print(json.dumps({"type": "result", "subtype": %r, "is_error": %s, "result": "answer",
                  "session_id": "s"}), flush=True)
time.sleep(600)  # a background shell or an MCP server it started keeps it from exiting
"""


def test_an_agent_silent_after_its_final_result_is_stopped_and_judged_by_it(
        tmp_path: Path) -> None:
    """Claude Code can print its final `result` and not exit (a background shell, an MCP server
    it started). The turn waited for its deadline and then ended `failed` (deadline) although
    the result was recorded; with no deadline it never ended, and a woken agent's next turns
    waited behind it. Now a process silent for FINAL_SETTLE_S after its final result is
    stopped (`stopped{reason: completion}`) and the turn is what the result said (a failed
    result's turn fails: test_agent_tally's tables)."""
    (tmp_path / "agent.py").write_text(LINGERING % ("success", "False"))
    cfg = write_config(tmp_path, {"command": [sys.executable, "agent.py", "{prompt}"],
                                  "deadline": "60s"})
    run, took = seamed_agent_run(tmp_path, cfg, "import watchrun.agents.turn as turn\n"
                                 "turn.FINAL_SETTLE_S = 0.5  # (5 s in the runner)\n")
    assert (run.returncode, run.stdout) == (0, "answer\n"), run.stderr
    assert took < 10  # not the 60 s deadline
    recs = records(tmp_path)
    (stopped,) = of(recs, "stopped")
    assert stopped == {**stopped, "reason": "completion", "message": (
        "the provider gave its final result and then no event of its protocol for 0.5 s, "
        "without exiting")}
    (fin,) = of(recs, "dispatch-finished")
    assert (fin["status"], fin["completed"], fin["stopReason"]) == ("done", True, "completion")
    assert "error" not in fin


# -- a pipe reader that dies -------------------------------------------------------------------

CHATTY = """\
import json, sys, time
print(json.dumps({"type": "system", "subtype": "init", "session_id": "s"}), flush=True)
end, n = time.monotonic() + 30, 0
while time.monotonic() < end:  # writes until stopped (a pipe nobody reads holds it here)
    n += 1
    print(json.dumps({"type": "assistant", "message": {"id": f"m{n}", "content": [
        {"type": "text", "text": f"line {n} " + "x" * 200}]}}), flush=True)
"""


def test_a_reader_that_dies_stops_the_turn_and_fails_it(tmp_path: Path) -> None:
    """A turn's stdout reader that raised (an unexpected exception parsing or recording a
    line) left nobody reading the pipe: the agent blocked on it, full, and the turn waited for
    its deadline (forever without one). Now the dead reader stops the agent's process tree at
    once (`stopped{reason: reader-failed}`, an `error` naming the exception, sanitized) and the
    turn fails; `agent run` says why, without a traceback."""
    (tmp_path / "agent.py").write_text(CHATTY)
    cfg = write_config(tmp_path, {"command": [sys.executable, "agent.py", "{prompt}"],
                                  "deadline": "10s"})
    run, took = seamed_agent_run(tmp_path, cfg, (
        "from watchrun.agents.providers.claude import ClaudeAdapter\n"
        "parse, seen = ClaudeAdapter.parse, []\n"
        "def failing(self, line):  # the 5th line breaks the reader\n"
        "    seen.append(line)\n"
        "    if len(seen) == 5:\n"
        "        raise RuntimeError('boom \\x1b[31mred')\n"
        "    return parse(self, line)\n"
        "ClaudeAdapter.parse = failing\n"))
    message = ("reading the agent's stdout failed (RuntimeError: boom red); "
               "stopped the agent")
    assert (run.returncode, run.stderr) == (1, f"watchrun: error: agent a: turn-1 failed: "
                                               f"{message}\n")
    assert took < 5, f"the turn took {took:.1f} s (its deadline is 10 s)"
    recs = records(tmp_path)
    (err,) = of(recs, "error")
    assert (err["code"], err["message"]) == (
        "internal", "reading the agent's stdout failed: RuntimeError: boom red")
    (stopped,) = of(recs, "stopped")
    assert (stopped["reason"], stopped["message"]) == ("reader-failed", message)
    (fin,) = of(recs, "dispatch-finished")
    assert (fin["status"], fin["stopReason"], fin["error"]) == (
        "failed", "reader-failed", {"code": "reader-failed", "message": message})
    assert [r["text"] for r in of(recs, "text")] == [  # (the init line is the first)
        f"line {n} " + "x" * 200 for n in range(1, 4)]
    assert not alive(recs[0]["pid"])
    shown = inproc(cfg.parent, "agent", "transcript", "a", "--json", "-c", str(cfg))  # a read
    (turn,) = json.loads(shown.stdout)["turns"]
    assert (turn["outcome"], turn["agents"][0]["status"]) == ("reader-failed", "killed")
    assert turn["agents"][0]["error"] == message
