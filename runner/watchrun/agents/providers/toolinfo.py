"""Tool calls for a transcript (files touched, summaries, result text) and problem classes."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from watchrun.agents.clean import clean_value

__all__ = [
    "FILE_OPS", "classify_problem", "clip", "file_ops", "parse_retry", "result_text",
    "retry_class", "same_call", "summary",
]

FILE_OPS = ("read", "write", "edit", "delete", "search", "list", "run")
"""The `op` values of a `file-change` observation (seed 004 plus edit and delete)."""

_OPS: dict[str, str] = {}
for _op, _names in {
    "read": "read read_file readfile view cat notebookread read_many_files open_file",
    "write": "write write_file writefile create create_file",
    "edit": "edit multiedit multi_edit edit_file replace str_replace str_replace_editor patch "
    "apply_patch notebookedit",
    "delete": "delete delete_file remove remove_file rm",
    "search": "grep glob search search_file_content find rg codebase_search grep_search find_files",
    "list": "ls list list_directory listdir list_dir list_files",
    "run": "bash shell run_shell_command exec exec_command command_execution terminal "
    "run_terminal_cmd execute sh local_shell",
}.items():
    for _name in _names.split():
        _OPS[_name] = _op

_PATH_KEYS = (
    "file_path", "filePath", "path", "absolute_path", "notebook_path", "target_file", "file",
    "filename", "dir_path", "directory", "targetDirectory",
)
_PATTERN_KEYS = ("pattern", "query", "regex", "glob", "globPattern")
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)
_SUMMARY_KEYS = ("command", "cmd", *_PATH_KEYS, *_PATTERN_KEYS, "url", "description", "prompt")
SUMMARY_CHARS = 120
RUN_PATH_CHARS = 500
"""A `run` file-change has the command as its path, clipped to this many characters."""


def _norm(name: str) -> str:
    """`mcp__server__Read` / `server.read` / `Read` -> `read`."""
    return name.rsplit("__", 1)[-1].rsplit(".", 1)[-1].lower()


def _first_str(data: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = data.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return " ".join(value)
    return None


def file_ops(name: str, args: Mapping[str, Any]) -> list[tuple[str, str, str | None]]:
    """The (path, op, detail) a tool call touches: a shell command is `run` with the command
    as path, a search has the pattern as detail. Unknown tools touch nothing we can name."""
    op = _OPS.get(_norm(name))
    if op is None:
        return []
    if op == "run":
        command = _first_str(args, ("command", "cmd", "commands"))
        if command and len(command) > RUN_PATH_CHARS:
            command = command[: RUN_PATH_CHARS - 1] + "…"
        return [(command, "run", None)] if command else []
    if op == "search":
        pattern = _first_str(args, _PATTERN_KEYS)
        return [(_first_str(args, _PATH_KEYS) or ".", "search", pattern)]
    if op == "list":
        return [(_first_str(args, _PATH_KEYS) or ".", "list", None)]
    path = _first_str(args, _PATH_KEYS)
    if path:
        return [(path, op, None)]
    patch = _first_str(args, ("patch", "input", "diff"))
    if patch:
        return [(p.strip(), op, None) for p in _PATCH_FILE.findall(patch)]
    return []


def same_call(first: tuple[str, Mapping[str, Any]], later: tuple[str, Mapping[str, Any]]
              ) -> bool:
    """Whether `later` (name, input) under a call id already seen is that call again (a
    started event, then its completed one, or a snapshot repeating it): the same name (or
    one of them unknown, "?"), and either no input or every field the first gave a value
    with the same value (a later event may fill in what an earlier one left empty)."""
    (name, data), (again, more) = first, later
    if name != again and "?" not in (name, again):
        return False
    return not more or all(more.get(k) == v for k, v in data.items()
                           if v not in (None, "", [], {}))


def summary(name: str, args: Any) -> str:
    """A one-line description of a tool call for a human: its command, path or pattern."""
    text: str | None = None
    if isinstance(args, Mapping):
        text = _first_str(args, _SUMMARY_KEYS)
        if text is None and args:  # (cleaned first: JSON would write ESC as `\u001b` text)
            text = json.dumps(clean_value(args), ensure_ascii=False, sort_keys=True)
    elif isinstance(args, str):
        text = args
    if not text:
        return name
    line = text.strip().splitlines()[0] if text.strip() else ""
    if len(line) > SUMMARY_CHARS or line != text.strip():
        line = line[: SUMMARY_CHARS - 1] + "…"
    return line


def result_text(content: Any) -> str:
    """Tool output as text: strings as they are, content blocks joined, other JSON dumped."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if isinstance(block, Mapping):
                if isinstance(block.get("text"), str):
                    parts.append(block["text"])
                elif block.get("type") == "image":
                    parts.append("[image]")
                else:
                    parts.append(json.dumps(block, ensure_ascii=False))
            else:
                parts.append(result_text(block))
        return "\n".join(parts)
    if isinstance(content, Mapping) and isinstance(content.get("content"), str | list):
        return result_text(content["content"])
    return json.dumps(content, ensure_ascii=False)


def clip(text: str, limit: int) -> tuple[str, bool]:
    """`text` cut to `limit` characters, and whether it was cut."""
    if len(text) <= limit:
        return text, False
    return text[:limit], True


_QUOTA = re.compile(
    r"rate.?limit|\b429\b|quota|usage limit|resource.?exhausted|too many requests|"
    r"credit balance",
    re.IGNORECASE,
)
_AUTH = re.compile(
    r"\b401\b|\b403\b|unauthori[sz]ed|authenticat|forbidden|invalid.{0,12}api.?key|"
    r"oauth|not logged in|login required|permission to access|\bno api.?key\b|"
    r"missing.{0,12}api.?key|api.?key.{0,20}(?:not (?:found|set)|missing)",
    re.IGNORECASE,
)


_RETRY_CLASSES = (
    ("rate-limit", re.compile(r"rate.?limit|\b429\b|too many requests|quota", re.IGNORECASE)),
    ("overloaded", re.compile(r"overload|\b529\b|capacity", re.IGNORECASE)),
    ("auth", re.compile(r"\b40[13]\b|unauthori[sz]ed|forbidden|authenticat", re.IGNORECASE)),
    ("server", re.compile(r"\b5\d\d\b|server.?error|internal error|bad gateway|unavailable",
                          re.IGNORECASE)),
    ("request", re.compile(r"\b4\d\d\b|bad request|unsupported model|not supported|"
                           r"does not exist|invalid", re.IGNORECASE)),
    ("network", re.compile(r"disconnect|transport|timed? ?out|timeout|connection|network|"
                           r"reset by peer|decoding response|stream", re.IGNORECASE)),
)


def retry_class(message: str, status: object = None) -> str:
    """The class of error a provider is retrying: rate-limit, overloaded, auth, server, request,
    network or unknown (an HTTP status decides first, then the message)."""
    text = f"{status if isinstance(status, int) else ''} {message}"
    for name, pattern in _RETRY_CLASSES:
        if pattern.search(text):
            return name
    return "unknown"


_RECONNECT = re.compile(r"^\s*Reconnecting\b\W*(?:(\d+)\s*/\s*(\d+))?(.*)$",
                        re.IGNORECASE | re.DOTALL)
_RETRYING = re.compile(r"^(?:(.*?)[;,]\s*)?retrying\b\s*(?:(\d+)\s*/\s*(\d+))?"
                       r"(?:\s*in\s*([\d.]+)\s*(ms|s)\b)?", re.IGNORECASE | re.DOTALL)


def parse_retry(message: str) -> tuple[str, int | None, int | None, int | None] | None:
    """A retry notice as (reason, attempt, max attempts, delay ms), else None:
    `Reconnecting... 2/5 (reason)`, `Reconnecting... waiting for network (reason)` (codex
    0.171, offline, once its attempts are spent: it waits on, never a failure) and
    `stream error: reason; retrying 1/5 in 206ms…`."""
    m = _RECONNECT.match(message)
    if m:
        n, most = (int(m[1]), int(m[2])) if m[1] else (None, None)
        said = m[3].strip()
        if said.startswith("(") and said.endswith(")") and "(" not in said[1:]:
            said = said[1:-1].strip()  # the reason alone, in its parentheses
        return said or "reconnecting", n, most, None
    m = _RETRYING.match(message)
    if m is None:
        return None
    reason = re.sub(r"^\s*stream error:\s*", "", m[1] or "").strip() or "retrying"
    delay = None
    if m[4]:
        delay = round(float(m[4]) * (1 if m[5].lower() == "ms" else 1000))
    return (reason, int(m[2]) if m[2] else None, int(m[3]) if m[3] else None, delay)


def classify_problem(*texts: object) -> str | None:
    """"quota" for rate and usage limits, "auth" for credential failures, else None."""
    joined = " ".join(str(t) for t in texts if t is not None)
    if _QUOTA.search(joined):
        return "quota"
    if _AUTH.search(joined):
        return "auth"
    return None
