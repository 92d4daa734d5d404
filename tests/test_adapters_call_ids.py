"""Every adapter: a call id used again by another call, or answered again with another result,
keeps its line `raw`; the same call or result again (a started event and its completed one, a
snapshot repeating it) is silent (explorer streams2 F3)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from watchrun.agents.providers import make_adapter


def _claude_call(cid: str, command: str) -> dict[str, Any]:
    return {"type": "assistant", "message": {"id": f"m-{command}", "content": [
        {"type": "tool_use", "id": cid, "name": "Bash", "input": {"command": command}}]}}


def _claude_result(cid: str, text: str) -> dict[str, Any]:
    return {"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": cid, "content": text}]}}


def _gemini(cid: str, name: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "tool_id": cid, "tool_name": name, "parameters": params}


def _opencode(cid: str, tool: str, inp: dict[str, Any], output: str) -> dict[str, Any]:
    return {"type": "tool_use", "part": {"type": "tool", "callID": cid, "tool": tool, "state": {
        "status": "completed", "input": inp, "output": output}}}


def _pi(kind: str, cid: str, name: str, args: dict[str, Any], text: str = "") -> dict[str, Any]:
    return {"type": f"tool_execution_{kind}", "toolCallId": cid, "toolName": name, "args": args,
            "isError": False, "result": {"content": [{"type": "text", "text": text}]}}


def _cursor(sub: str, cid: str, command: str, stdout: str = "") -> dict[str, Any]:
    body: dict[str, Any] = {"args": {"command": command}}
    if sub == "completed":
        body["result"] = {"success": {"exitCode": 0, "stdout": stdout}}
    return {"type": "tool_call", "subtype": sub, "call_id": cid,
            "tool_call": {"shellToolCall": body}}


def _copilot_start(cid: str, command: str) -> dict[str, Any]:
    return {"type": "tool.execution_start", "data": {
        "toolCallId": cid, "toolName": "bash", "arguments": {"command": command}}}


def _copilot_done(cid: str, text: str) -> dict[str, Any]:
    return {"type": "tool.execution_complete", "data": {
        "toolCallId": cid, "success": True, "result": {"content": text}}}


def _codex(phase: str, cid: str, command: str, output: str = "", code: int = 0,
           ) -> dict[str, Any]:
    item: dict[str, Any] = {"id": cid, "type": "command_execution", "command": command}
    if phase == "completed":
        item |= {"aggregated_output": output, "exit_code": code,
                 "status": "completed" if code == 0 else "failed"}
    return {"type": f"item.{phase}", "item": item}


def _legacy(kind: str, cid: str, command: str, output: str = "") -> dict[str, Any]:
    return {"id": "0", "msg": {"type": f"exec_command_{kind}", "call_id": cid,
                               "command": ["bash", "-lc", command], "exit_code": 0,
                               "aggregated_output": output}}


def _reused(cid: str, name: str) -> str:
    return f"call id {cid!r}: already used by another call ({name})"


def _answered(cid: str) -> str:
    return f"call id {cid!r}: already answered with another result"


REUSED: list[tuple[str, list[tuple[dict[str, Any], list[str] | str]]]] = [
    ("claude", [(_claude_call("t1", "ls"), ["tool"]), (_claude_result("t1", "a b"), [
        "tool-result", "file-change"]), (_claude_call("t1", "rm -rf /srv/data"), _reused(
            "t1", "Bash")),
        (_claude_result("t1", "deleted"), _answered("t1"))]),
    ("gemini", [(_gemini("x", "run_shell_command", {"command": "ls"}), ["tool"]),
                (_gemini("x", "write_file", {"file_path": "/etc/passwd"}),
                 _reused("x", "run_shell_command"))]),
    ("opencode", [(_opencode("c1", "bash", {"command": "ls"}, "a"), ["tool", "tool-result",
                                                                      "file-change"]),
                  (_opencode("c1", "edit", {"filePath": "/x/y.py"}, "edited"),
                   f"{_reused('c1', 'bash')}; {_answered('c1')}")]),
    ("pi", [(_pi("start", "p1", "bash", {"command": "ls"}), ["tool"]),
            (_pi("end", "p1", "bash", {}, "a"), ["tool-result", "file-change"]),
            (_pi("start", "p1", "write", {"path": "/etc/x"}), _reused("p1", "bash")),
            (_pi("end", "p1", "write", {}, "wrote"), _answered("p1"))]),
    ("cursor", [(_cursor("started", "k", "ls"), ["tool"]),
                (_cursor("completed", "k", "ls", "a"), ["tool-result", "file-change"]),
                (_cursor("started", "k", "rm -rf /"), _reused("k", "shell")),
                (_cursor("completed", "k", "rm -rf /", "bye"),
                 f"{_reused('k', 'shell')}; {_answered('k')}")]),
    ("copilot", [(_copilot_start("q", "ls"), ["tool"]), (_copilot_done("q", "a"), [
        "tool-result", "file-change"]), (_copilot_start("q", "rm -rf build"), _reused(
            "q", "bash")), (_copilot_done("q", "gone"), _answered("q"))]),
    ("codex", [(_codex("completed", "item_1", "ls", "a"), ["tool", "tool-result",
                                                           "file-change"]),
               (_codex("completed", "item_1", "rm -rf /tmp/x", "SECOND OUTPUT", 1),
                f"{_reused('item_1', 'command_execution')}; {_answered('item_1')}")]),
    ("codex", [(_legacy("begin", "c", "ls"), ["tool"]),
               (_legacy("end", "c", "ls", "a"), ["tool-result", "file-change"]),
               (_legacy("begin", "c", "rm -rf build"), _reused("c", "exec_command")),
               (_legacy("end", "c", "rm -rf build", "gone"), _answered("c"))]),
]  # fmt: skip

REPEATED: list[tuple[str, list[tuple[dict[str, Any], list[str]]]]] = [
    ("claude", [(_claude_call("t1", "ls"), ["tool"]), (_claude_call("t1", "ls"), []),
                (_claude_result("t1", "a"), ["tool-result", "file-change"]),
                (_claude_result("t1", "a"), [])]),
    ("pi", [({"type": "message_end", "message": {"role": "assistant", "content": [
        {"type": "toolCall", "id": "p1", "name": "bash", "arguments": {"command": "ls"}}]}},
        ["tool"]), (_pi("start", "p1", "bash", {"command": "ls"}), []),
        (_pi("end", "p1", "bash", {}, "a"), ["tool-result", "file-change"]),
        ({"type": "message_end", "message": {"role": "toolResult", "toolCallId": "p1",
                                             "content": [{"type": "text", "text": "a"}]}}, []),
        ({"type": "turn_end", "toolResults": [{"toolCallId": "p1", "content": "a"}]}, [])]),
    ("cursor", [(_cursor("started", "k", "ls"), ["tool"]),
                (_cursor("completed", "k", "ls", "a"), ["tool-result", "file-change"])]),
    ("copilot", [(_copilot_start("q", "ls"), ["tool"]),
                 (_copilot_done("q", "a"), ["tool-result", "file-change"]),
                 (_copilot_done("q", "a"), [])]),
    ("codex", [(_codex("started", "item_1", "ls"), ["tool"]),
               (_codex("completed", "item_1", "ls", "a"), ["tool-result", "file-change"]),
               (_codex("completed", "item_1", "ls", "a"), [])]),
    ("codex", [({"type": "item.started", "item": {"id": "w", "type": "web_search",
                                                   "query": ""}}, ["tool"]),
               ({"type": "item.completed", "item": {"id": "w", "type": "web_search",
                                                     "query": "codex jsonl"}}, ["tool-result"])]),
    ("codex", [(_legacy("begin", "c", "ls"), ["tool"]),
               (_legacy("end", "c", "ls", "a"), ["tool-result", "file-change"]),
               (_legacy("end", "c", "ls", "a"), [])]),
]  # fmt: skip


def _kinds(provider: str, steps: list[tuple[dict[str, Any], Any]]) -> list[Any]:
    """Per line: the kinds it gave, or the error of the one `raw` it gave."""
    adapter, found = make_adapter(provider), []
    for obj, _ in steps:
        out = adapter.parse(json.dumps(obj))
        raws = [o for o in out if o.kind == "raw"]
        found.append(raws[0].fields["error"] if [o.kind for o in out] == ["raw"]
                     else [o.kind for o in out])
    return found


@pytest.mark.parametrize(("provider", "steps"), REUSED)
def test_a_call_id_reused_by_another_call_or_result_keeps_its_line_raw(
        provider: str, steps: list[tuple[dict[str, Any], list[str] | str]]) -> None:
    """Explorer streams2 F3: the second call (`rm -rf /srv/data`, `write_file /etc/passwd`)
    under an id already seen, and its result, gave no record at all."""
    assert _kinds(provider, steps) == [want for _, want in steps]


@pytest.mark.parametrize(("provider", "steps"), REPEATED)
def test_the_same_call_or_result_again_is_silent(
        provider: str, steps: list[tuple[dict[str, Any], list[str]]]) -> None:
    """A started event then its completed one, snapshots repeating a call or result, and a
    completed event that fills in what the started one left empty are one call."""
    assert _kinds(provider, steps) == [want for _, want in steps]
