"""What the MCP client sends, checked before the SDK sees it: a message the SDK would drop
without an answer (its client would wait for the reply forever) gets an error instead, with
its request's id when it has one."""

from __future__ import annotations

import json
import re
from typing import Any

import mcp_types as types

from watchrun.output.jsonl import valid_value

__all__ = ["HEAD", "Error", "Vetted", "head_id", "vet"]

HEAD = 64 << 10
"""The bytes of a message too long to read in which its `id` is looked for."""
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"?|[{}\[\]]', re.S)
"""A string (one cut off by the end of a head runs to its end), or a bracket."""
_COLON = re.compile(r"\s*:\s*")
Error = tuple[int | str | None, int, str]
"""An answer to send instead of handing a line on: (the request's id, code, message)."""
Vetted = tuple[str, Error | None, dict[str, Any] | None]
"""`vet`'s: the line to hand on, the answer to send instead, the message (a JSON object)."""


def vet(line: str) -> Vetted:
    """`line` as the SDK should get it, or the error to answer instead, and the message (None
    when it is no JSON object): the SDK drops, without an answer, a line that is not JSON and
    a request it cannot parse (a `params` that is not an object, an `id` that is neither a
    string nor an integer) or takes for a response (one that also has `result` or `error`),
    and its client would wait for the reply forever. Each lone surrogate in the JSON
    (`"\\udcff"`, legal JSON but not Unicode) is made U+FFFD, which the SDK's parser would
    refuse too."""
    if not line.strip():
        return line, None, None
    try:
        value = json.loads(line)
    except RecursionError:
        return line, (head_id(line[:HEAD]), types.INVALID_REQUEST, "the message is nested too "
                      "deeply"), None
    except ValueError as exc:
        return line, (None, types.PARSE_ERROR, f"the message is not JSON: {exc}"), None
    if not isinstance(value, dict):
        return line, (None, types.INVALID_REQUEST, "a message is one JSON object (a batch is "
                      "not supported)"), None
    if "id" in value and "method" in value and {"result", "error"} & value.keys():
        rid = value["id"]  # (the SDK takes it for a response, and answers nothing)
        return line, (rid if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(
            rid, bool)) else None, types.INVALID_REQUEST, "a message is a request (`method`) "
            "or a response (`result` or `error`), not both"), value
    if "id" in value and ("method" in value or not {"result", "error"} & value.keys()):
        error = _request_error(value)
        if error is not None:
            return line, error, value
    elif "id" not in value and not isinstance(value.get("method"), str):
        return line, (None, types.INVALID_REQUEST, "a message is a request (`method`, `id`), "
                      "a notification (`method`) or a response (`id`, `result` or `error`)"), value
    if _SURROGATE_ESCAPE.search(line) is None:
        return line, None, value
    valid = valid_value(value)
    return (line if valid == value else json.dumps(valid, ensure_ascii=False) + "\n"), None, valid


def _request_error(request: dict[str, Any]) -> Error | None:
    rid = request["id"]
    if not isinstance(rid, str) and (not isinstance(rid, int) or isinstance(rid, bool)):
        return None, types.INVALID_REQUEST, "`id` must be a string or an integer"
    if request.get("jsonrpc") != "2.0":
        return rid, types.INVALID_REQUEST, '`jsonrpc` must be "2.0"'
    if not isinstance(request.get("method"), str):
        return rid, types.INVALID_REQUEST, "`method` must be a string"
    params = request.get("params")
    if params is not None and not isinstance(params, dict):
        return rid, types.INVALID_PARAMS, "`params` must be an object"
    for key, kind, what in _PARAMS.get(request["method"], ()):  # (the SDK's own refusal of
        value = (params or {}).get(key)  # these names no field: "Invalid request parameters")
        if (value is None and kind is not dict) or (value is not None and
                                                     not isinstance(value, kind)):
            got = "missing" if value is None else f"{type(value).__name__} {value!r:.40}"
            return rid, types.INVALID_PARAMS, f"`params.{key}` must be {what}, not {got}"
    return None


_PARAMS: dict[str, tuple[tuple[str, type, str], ...]] = {
    "tools/call": (("name", str, "a string (the tool's name)"),
                   ("arguments", dict, "an object (the tool's arguments)")),
    "resources/read": (("uri", str, "a string (the resource's URI)"),),
    "resources/subscribe": (("uri", str, "a string (the resource's URI)"),),
    "resources/unsubscribe": (("uri", str, "a string (the resource's URI)"),),
}
"""What the requests the tool answers take in `params` (an optional object: dict), checked
here so that a wrong one is named."""


def head_id(head: str) -> int | str | None:
    """The top-level `id` of the JSON object that `head` begins, if it is there whole (a
    string or an integer), else None: the beginning of a message too long to parse."""
    depth = 0
    for token in _TOKEN.finditer(head):
        text = token.group()
        if text in "{[":
            depth += 1
        elif text in "}]":
            depth -= 1
        elif depth == 1 and text == '"id"' and (colon := _COLON.match(head, token.end())):
            try:
                value, end = json.JSONDecoder().raw_decode(head, colon.end())
            except ValueError:
                return None
            whole = end < len(head)
            if whole and (isinstance(value, str) or
                          (isinstance(value, int) and not isinstance(value, bool))):
                return value
            return None
    return None
