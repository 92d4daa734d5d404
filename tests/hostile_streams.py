"""Test helper: one stream per provider whose every JSON text field carries terminal controls.

Each stream is what that CLI prints (its protocol, as in tests/fixtures/providers/) for a turn
with text before a tool call, a tool call whose input and output are hostile, a non-protocol
banner line, and a hostile final answer. Controls come both JSON-escaped (`\\u001b[31m`, OSC 52,
BEL, CR, `\\u009d`) and raw (U+009D, U+009B, U+0085 and DEL unescaped, as Node and Rust JSON
encoders print them). `CLEAN_ANSWER` is what every surface must show as the answer.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["ANSWER", "BROKEN", "CLEAN_ANSWER", "PROVIDERS", "STDERR", "stream"]

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # a clipboard write
LINK = "\x1b]8;;http://evil.example/\x1b\\here\x1b]8;;\x1b\\"
ANSWER = (f"\x1b[31mAll\x1b[0m clear\x07: â€\x9d quoted\x9d, {OSC52}copied {LINK}\r\n"
          "line two\x7f \x9b31mend\x85")
"""The raw answer: CSI, BEL, mojibake U+009D, OSC 52, an OSC-8 link, CRLF, DEL, 8-bit CSI, NEL."""
CLEAN_ANSWER = "All clear: â€ quoted, copied here\nline two 31mend"
PRE = "\x1b[2JLet me \x1b]0;pwned\x07look\x9d first"
TOOL_IN = "cat \x1b[8mhidden\x1b[28m notes.txt"
TOOL_OUT = "\x1b[32mok\x1b[0m\r\nfile body\x07 \x9d tail"
REASONING = "thinking \x1b[5mblink\x1b[25m\x9b2J"
BANNER = "\x1b[1;32m●\x1b[0m starting\x07 \x9d banner"
STDERR = "\x1b]0;title\x07warning: \x1b[33mslow\x1b[0m\x9d tail\n"
BROKEN = '{"type": "assistant", "text": "\x1b]0;evil\x07 cut'
"""A protocol line cut short, with a raw OSC in it: a `raw` record (`unparseable`)."""
PROVIDERS = ("claude", "mock", "codex", "gemini", "opencode", "pi", "cursor", "copilot",
             "generic")


def _lines(objs: list[dict[str, Any]]) -> str:
    """Even lines with C1/DEL raw (Node-style), odd lines with every non-ASCII escaped."""
    return "".join(json.dumps(o, ensure_ascii=bool(i % 2)) + "\n" for i, o in enumerate(objs))


def _claude() -> list[dict[str, Any]]:
    s = "9861b989-5c57-4065-9c6d-79f7a054aafc"

    def msg(mid: str, content: list[dict[str, Any]]) -> dict[str, Any]:
        return {"type": "assistant", "session_id": s, "parent_tool_use_id": None,
                "message": {"id": mid, "role": "assistant", "model": "m", "content": content,
                            "usage": {"input_tokens": 10, "output_tokens": 2}}}

    return [
        {"type": "system", "subtype": "init", "session_id": s, "model": "m", "cwd": "/srv",
         "claude_code_version": "2.1.63"},
        msg("m1", [{"type": "thinking", "thinking": REASONING},
                   {"type": "text", "text": PRE},
                   {"type": "tool_use", "id": "t1", "name": "Bash",
                    "input": {"command": TOOL_IN}}]),
        {"type": "user", "session_id": s, "parent_tool_use_id": None, "message": {
            "role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                         "content": TOOL_OUT}]}},
        msg("m2", [{"type": "text", "text": ANSWER}]),
        {"type": "result", "subtype": "success", "is_error": False, "session_id": s,
         "result": ANSWER, "usage": {"input_tokens": 30, "output_tokens": 8}},
    ]


def _codex() -> list[dict[str, Any]]:
    cmd = {"id": "item_1", "type": "command_execution", "command": TOOL_IN}
    return [
        {"type": "thread.started", "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53"},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "item_0", "type": "reasoning",
                                            "text": REASONING}},
        {"type": "item.completed", "item": {"id": "item_2", "type": "agent_message",
                                            "text": PRE}},
        {"type": "item.started", "item": {**cmd, "aggregated_output": "",
                                          "status": "in_progress"}},
        {"type": "item.completed", "item": {**cmd, "aggregated_output": TOOL_OUT,
                                            "exit_code": 0, "status": "completed"}},
        {"type": "item.completed", "item": {"id": "item_3", "type": "agent_message",
                                            "text": ANSWER}},
        {"type": "turn.completed", "usage": {"input_tokens": 30, "cached_input_tokens": 0,
                                             "output_tokens": 8}},
    ]


def _gemini() -> list[dict[str, Any]]:
    half = ANSWER.index("line two")
    return [
        {"type": "init", "timestamp": "2026-05-16T12:00:00.000Z", "session_id": "g",
         "model": "gemini-2.5-pro"},
        {"type": "message", "role": "assistant", "content": PRE, "delta": True},
        {"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "t1",
         "parameters": {"command": TOOL_IN}},
        {"type": "tool_result", "tool_id": "t1", "status": "success", "output": TOOL_OUT},
        {"type": "message", "role": "assistant", "content": ANSWER[:half], "delta": True},
        {"type": "message", "role": "assistant", "content": ANSWER[half:], "delta": True},
        {"type": "result", "status": "success", "stats": {
            "total_tokens": 38, "input_tokens": 30, "output_tokens": 8, "cached": 0}},
    ]


def _opencode() -> list[dict[str, Any]]:
    s = "ses_494719016ffe85dkDMj0FPRbHK"
    tokens = {"input": 15, "output": 4, "reasoning": 0, "cache": {"read": 0, "write": 0}}
    return [
        {"type": "step_start", "sessionID": s, "part": {"type": "step-start"}},
        {"type": "text", "sessionID": s, "part": {"type": "text", "text": PRE}},
        {"type": "tool_use", "sessionID": s, "part": {
            "type": "tool", "callID": "c1", "tool": "bash", "state": {
                "status": "completed", "input": {"command": TOOL_IN}, "output": TOOL_OUT,
                "metadata": {"exit": 0}}}},
        {"type": "step_finish", "sessionID": s, "part": {"reason": "tool-calls",
                                                         "tokens": tokens}},
        {"type": "step_start", "sessionID": s, "part": {"type": "step-start"}},
        {"type": "text", "sessionID": s, "part": {"type": "text", "text": ANSWER}},
        {"type": "step_finish", "sessionID": s, "part": {"reason": "stop", "tokens": tokens}},
    ]


def _pi() -> list[dict[str, Any]]:
    usage = {"input": 15, "output": 4, "cacheRead": 0, "cacheWrite": 0}
    first = {"role": "assistant", "content": [
        {"type": "thinking", "thinking": REASONING}, {"type": "text", "text": PRE},
        {"type": "toolCall", "id": "t1", "name": "bash", "arguments": {"command": TOOL_IN}}],
        "usage": usage, "stopReason": "toolUse"}
    last = {"role": "assistant", "content": [{"type": "text", "text": ANSWER}], "usage": usage,
            "stopReason": "stop"}
    return [
        {"type": "session", "version": 3, "id": "pi-1", "cwd": "/srv"},
        {"type": "agent_start"}, {"type": "turn_start"},
        {"type": "message_end", "message": first},
        {"type": "tool_execution_start", "toolCallId": "t1", "toolName": "bash",
         "args": {"command": TOOL_IN}},
        {"type": "tool_execution_end", "toolCallId": "t1", "toolName": "bash",
         "result": {"content": [{"type": "text", "text": TOOL_OUT}]}, "isError": False},
        {"type": "turn_end", "message": first}, {"type": "turn_start"},
        {"type": "message_end", "message": last},
        {"type": "turn_end", "message": last}, {"type": "agent_end", "messages": []},
    ]


def _cursor() -> list[dict[str, Any]]:
    s = "a1b2c3d4-e5f6-7890-abcd-ef1234567890"
    shell = {"args": {"command": TOOL_IN}}

    def said(text: str) -> dict[str, Any]:
        return {"type": "assistant", "session_id": s,
                "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}}

    return [
        {"type": "system", "subtype": "init", "session_id": s, "model": "Auto", "cwd": "/srv"},
        {"type": "thinking", "subtype": "delta", "text": REASONING, "session_id": s},
        {"type": "thinking", "subtype": "completed", "session_id": s},
        said(PRE),
        {"type": "tool_call", "subtype": "started", "call_id": "c1", "session_id": s,
         "tool_call": {"shellToolCall": shell}},
        {"type": "tool_call", "subtype": "completed", "call_id": "c1", "session_id": s,
         "tool_call": {"shellToolCall": {**shell, "result": {"success": {
             "command": TOOL_IN, "exitCode": 0, "stdout": TOOL_OUT, "stderr": ""}}}}},
        said(ANSWER),
        {"type": "result", "subtype": "success", "is_error": False, "session_id": s,
         "result": PRE + ANSWER, "duration_ms": 100},
    ]


def _copilot() -> list[dict[str, Any]]:
    def ev(kind: str, data: dict[str, Any]) -> dict[str, Any]:
        return {"type": kind, "data": data, "id": "e", "timestamp": "2026-09-05T10:00:00.000Z",
                "parentId": None}

    return [
        ev("session.start", {"sessionId": "cp-1", "copilotVersion": "1.0.83"}),
        ev("assistant.message", {"messageId": "a1", "content": PRE, "reasoningText": REASONING,
                                 "toolRequests": [{"toolCallId": "c1", "name": "bash"}]}),
        ev("tool.execution_start", {"toolCallId": "c1", "toolName": "bash",
                                    "arguments": {"command": TOOL_IN}}),
        ev("tool.execution_complete", {"toolCallId": "c1", "success": True,
                                       "result": {"content": TOOL_OUT}}),
        ev("assistant.message", {"messageId": "a2", "content": ANSWER, "phase": "final_answer"}),
        {"type": "result", "sessionId": "cp-1", "exitCode": 0, "usage": {"premiumRequests": 1}},
    ]


_STREAMS = {"claude": _claude, "mock": _claude, "codex": _codex, "gemini": _gemini,
            "opencode": _opencode, "pi": _pi, "cursor": _cursor, "copilot": _copilot}


def stream(provider: str) -> tuple[bytes, str]:
    """(stdout bytes, clean answer) of `provider`'s hostile turn. A JSON provider's stream
    starts with a non-protocol banner line and a broken protocol line; the generic one is
    terminal lines whose answer is all of them."""
    if provider == "generic":
        lines = [BANNER, PRE, ANSWER]
        answer = "● starting  banner\nLet me look first\n" + CLEAN_ANSWER
        return ("\n".join(lines) + "\n").encode(), answer
    return (BANNER + "\n" + BROKEN + "\n" + _lines(_STREAMS[provider]())).encode(), CLEAN_ANSWER
