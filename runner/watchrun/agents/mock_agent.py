"""The built-in mock agent: answers a prompt in Claude Code stream-json, offline.

Deterministic apart from its session and message ids. Run as
`python -m watchrun.agents.mock_agent [--session-id ID] [PROMPT]` (stdin when PROMPT is absent).

It answers with the number of non-empty lines of its prompt and the first of them (it cannot
tell the matched lines from the template's, so it claims no match count). With
`WATCHRUN_MOCK_DIRECTIVES=1` in its environment (a test harness), directives embedded anywhere in
the prompt drive it; without it they are plain text, so a log line that mentions one cannot
make the agent hang, fork or fail: `[mock:tool]` a Bash tool call and its result before the
answer; `[mock:fail]` a `result` with subtype error_during_execution and exit code 1;
`[mock:hang]` the init line, then block forever; `[mock:ignore-term]` ignore SIGTERM;
`[mock:oversized=N]` one JSON line of exactly N bytes; `[mock:slow=MS]` sleep MS milliseconds
between lines; `[mock:color]` ANSI coloured non-JSON lines too; `[mock:stderr]` a line on
stderr; `[mock:fork]` leave a `sleep 1000` child in its own session (its pid is reported on
stderr).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
import uuid
from typing import Any

__all__ = ["DIRECTIVES", "DIRECTIVES_ENV", "main", "parse_prompt", "reply_text"]

DIRECTIVES = ("tool", "fail", "hang", "ignore-term", "oversized", "slow", "color", "stderr",
              "fork")
_DIRECTIVE = re.compile(r"\[mock:([A-Za-z-]+)(?:=([^\]]*))?\]")
_VALUED = ("oversized", "slow")
DIRECTIVES_ENV = "WATCHRUN_MOCK_DIRECTIVES"
"""`1` in the mock's environment: its prompt's directives are obeyed."""
MODEL = "mock-1"
VERSION = "0.0.0-mock"
"""Reported as claude_code_version: like Claude Code before 2.1.277, the `result` totals of a
mock process start from zero."""


class UsageError(ValueError):
    """A bad argument or directive; the message says which."""


def parse_prompt(prompt: str) -> tuple[dict[str, int | None], str]:
    """The directives in `prompt` (name -> value) and the prompt without them."""
    found: dict[str, int | None] = {}
    for match in _DIRECTIVE.finditer(prompt):
        name, value = match[1].lower(), match[2]
        if name not in DIRECTIVES:
            raise UsageError(f"unknown directive [mock:{name}]; known: {', '.join(DIRECTIVES)}")
        if name in _VALUED:
            if value is None or not value.strip().isdigit():
                raise UsageError(f"[mock:{name}=N] needs a non-negative integer, got {value!r}")
            found[name] = int(value)
        elif value is not None:
            raise UsageError(f"[mock:{name}] takes no value, got {value!r}")
        else:
            found[name] = None
    return found, _DIRECTIVE.sub("", prompt)


def reply_text(prompt: str) -> str:
    """The answer: the number of non-empty prompt lines and the first of them, then DONE."""
    lines = [line.strip() for line in prompt.splitlines() if line.strip()]
    first = lines[0] if lines else "(empty prompt)"
    if len(first) > 80:
        first = first[:79] + "…"
    return f"Mock triage: read {len(lines)} prompt line(s); first: {first}\nDONE"


def _tokens(text: str) -> int:
    return max(1, (len(text.encode()) + 3) // 4)


class _Out:
    """Writes one line at a time, flushed, with the `slow` delay between lines."""

    def __init__(self, session: str, delay_s: float) -> None:
        self.session = session
        self.delay_s = delay_s
        self.started = False

    def line(self, text: str) -> None:
        if self.started and self.delay_s:
            time.sleep(self.delay_s)
        self.started = True
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def json(self, obj: dict[str, Any]) -> None:
        obj.setdefault("session_id", self.session)
        obj.setdefault("uuid", str(uuid.uuid4()))
        self.line(json.dumps(obj, ensure_ascii=False))

    def assistant(self, mid: str, blocks: list[dict[str, Any]], usage: dict[str, int]) -> None:
        for block in blocks:  # Claude Code 2.x: one line per content block, usage repeated
            self.json({"type": "assistant", "parent_tool_use_id": None, "message": {
                "id": mid, "type": "message", "role": "assistant", "model": MODEL,
                "content": [block], "stop_reason": None, "usage": dict(usage)}})


def _usage(inp: int, write: int, read: int, out: int) -> dict[str, int]:
    return {"input_tokens": inp, "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read, "output_tokens": out}


def _run(prompt: str, session: str) -> int:
    found, clean = parse_prompt(prompt) if os.environ.get(DIRECTIVES_ENV) == "1" else ({}, prompt)
    if "ignore-term" in found:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    out = _Out(session, (found.get("slow") or 0) / 1000)
    if "stderr" in found:
        sys.stderr.write("mock: a diagnostic line on stderr\n")
        sys.stderr.flush()
    if "color" in found:
        out.line("\x1b[1;32m●\x1b[0m \x1b[36mmock agent\x1b[0m starting")
    out.json({"type": "system", "subtype": "init", "cwd": os.getcwd(), "model": MODEL,
              "tools": ["Bash"], "mcp_servers": [], "permissionMode": "default",
              "apiKeySource": "none", "claude_code_version": VERSION})
    if "fork" in found:
        import subprocess

        child = subprocess.Popen(["sleep", "1000"], start_new_session=True,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        sys.stderr.write(f"mock: forked pid {child.pid}\n")
        sys.stderr.flush()
    if "hang" in found:
        while True:
            time.sleep(3600)
    if found.get("oversized") is not None:
        _oversized(out, found["oversized"] or 0)
    total = [0, 0, 0, 0]  # input, cache write, cache read, final output
    context = _tokens(clean)
    if "tool" in found:
        mid, call = f"msg_mock_{uuid.uuid4().hex[:20]}", f"toolu_mock_{uuid.uuid4().hex[:16]}"
        out.assistant(mid, [{"type": "tool_use", "id": call, "name": "Bash",
                             "input": {"command": "echo mock-tool", "description": "mock"}}],
                      _usage(4, context, 0, 1))
        out.json({"type": "user", "parent_tool_use_id": None, "message": {"role": "user",
                  "content": [{"tool_use_id": call, "type": "tool_result",
                               "content": "mock-tool", "is_error": False}]},
                  "tool_use_result": {"stdout": "mock-tool", "stderr": "",
                                      "interrupted": False}})
        total = [4, context, 0, 9]
    failing = "fail" in found
    text = "Mock failure: simulated error during execution." if failing else reply_text(clean)
    write, read = (12, context) if "tool" in found else (context, 0)
    blocks: list[dict[str, Any]] = [{"type": "thinking", "thinking": "Reading the prompt.",
                                     "signature": "mock"}, {"type": "text", "text": text}]
    out.assistant(f"msg_mock_{uuid.uuid4().hex[:20]}", blocks, _usage(3, write, read, 1))
    total = [total[0] + 3, total[1] + write, total[2] + read, total[3] + _tokens(text) + 5]
    if "color" in found:
        out.line("\x1b[33mmock:\x1b[0m answer \x1b[1mready\x1b[0m")
    usage = _usage(*total)
    result: dict[str, Any] = {
        "type": "result", "subtype": "error_during_execution" if failing else "success",
        "is_error": failing, "duration_ms": 1, "duration_api_ms": 0,
        "num_turns": 2 if "tool" in found else 1, "total_cost_usd": 0, "usage": usage,
        "modelUsage": {MODEL: {"inputTokens": total[0], "outputTokens": total[3],
                               "cacheReadInputTokens": total[2],
                               "cacheCreationInputTokens": total[1], "costUSD": 0}},
        "permission_denials": [],
    }
    if failing:
        result["errors"] = ["mock: simulated failure ([mock:fail])"]
    else:
        result["result"] = text
    out.json(result)
    return 1 if failing else 0


def _oversized(out: _Out, size: int) -> None:
    """One valid assistant line of exactly `size` bytes (or the smallest one possible)."""

    def envelope(text: str) -> str:
        return json.dumps({"type": "assistant", "session_id": out.session,
                           "parent_tool_use_id": None, "message": {
                               "id": "msg_mock_oversized", "role": "assistant",
                               "content": [{"type": "text", "text": text}]}})

    base = len(envelope("").encode())
    out.line(envelope("x" * max(0, size - base)))


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    session = str(uuid.uuid4())
    if args[:1] == ["--session-id"]:
        if len(args) < 2 or not args[1]:
            sys.stderr.write("mock_agent: --session-id needs a value\n")
            return 2
        session, args = args[1], args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    if len(args) > 1:
        sys.stderr.write("mock_agent: expected one PROMPT argument (or the prompt on stdin)\n")
        return 2
    prompt = args[0] if args else sys.stdin.read()
    try:
        return _run(prompt, session)
    except UsageError as exc:
        sys.stderr.write(f"mock_agent: {exc}\n")
        return 2
    except BrokenPipeError:
        return 141


if __name__ == "__main__":
    sys.exit(main())
