"""The generic adapter, the provider registry, and that no adapter ever raises on a line."""

from __future__ import annotations

import json
from typing import Any

import pytest
from adapter_replay import FIXTURES, replay_lines
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from watchrun.agents.providers import KINDS, PROVIDERS, Observation, UsageTracker, make_adapter
from watchrun.agents.providers.base import JsonAdapter
from watchrun.agents.providers.generic import GenericAdapter
from watchrun.agents.providers.stderr_tail import StderrTail
from watchrun.agents.providers.toolinfo import (
    classify_problem,
    file_ops,
    parse_retry,
    retry_class,
    summary,
)


def test_generic_turns_every_line_into_text() -> None:
    lines = ["Checking the logs…", "", "\x1b[31mERROR\x1b[0m found {json-ish}\r", '{"type":"x"}']
    r = replay_lines(GenericAdapter(), lines)
    assert r.texts == ["Checking the logs…", "", "ERROR found {json-ish}", '{"type":"x"}']
    # as written: the terminal line keeps its raw form only where cleaning changed it
    assert [t.get("raw") for t in r.of("text")] == [
        None, None, "\x1b[31mERROR\x1b[0m found {json-ish}\r", None]
    assert {t["source"] for t in r.of("text")} == {"stdout"}
    assert r.of("usage") == [] and r.completed == []


def test_registry_names_match_the_spec() -> None:
    assert set(PROVIDERS) == {"claude", "codex", "gemini", "opencode", "pi", "cursor", "copilot",
                              "mock", "generic"}
    for name, cls in PROVIDERS.items():
        adapter = make_adapter(name, UsageTracker())
        assert isinstance(adapter, cls) and adapter.provider == name


def test_unknown_provider_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"unknown agent provider 'aider'; expected one of: "
                                         r"claude, codex, copilot, cursor, gemini, generic, "
                                         r"mock, opencode, pi"):
        make_adapter("aider")


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=20,
)
_LINES = [(path.parent.name, line) for path in sorted(FIXTURES.glob("*/*.jsonl"))
          for line in path.read_text(encoding="utf-8").splitlines()]


def _mutate(value: Any, data: st.DataObject) -> Any:
    """A fixture value with one subtree (maybe the whole value) replaced by random JSON."""
    if isinstance(value, dict) and value and data.draw(st.integers(0, 3)) > 0:
        key = data.draw(st.sampled_from(sorted(value)))
        return {**value, key: _mutate(value[key], data)}
    if isinstance(value, list) and value and data.draw(st.integers(0, 3)) > 0:
        index = data.draw(st.integers(0, len(value) - 1))
        return [*value[:index], _mutate(value[index], data), *value[index + 1:]]
    return data.draw(_json)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_drifted_protocol_line_never_raises(data: st.DataObject) -> None:
    """Real lines with a field of the wrong shape give observations (or raw), never an
    exception, and the handlers need no catch-all: a malformed-event says which field had the
    wrong type (the adapter's shape check), which token count was out of range or which call id
    a line used again for another call or result, never which exception a handler raised."""
    provider, line = data.draw(st.sampled_from(_LINES))
    adapter = make_adapter(provider)
    exit_code = data.draw(st.sampled_from([0, 1, 41, None]))
    out = adapter.parse(json.dumps(_mutate(json.loads(line), data))) + adapter.finish(exit_code)
    for obs in out:
        assert obs.kind in KINDS
        json.dumps(dict(obs.fields))
        if obs.fields.get("reason") == "malformed-event":
            assert all(": expected " in p or " is not a token count " in p
                       or ": already used by another call (" in p
                       or ": already answered with another result" in p
                       for p in obs.fields["error"].split("; ")), obs


@pytest.mark.parametrize("kind", [[], {}, ["text"]])
def test_a_content_block_whose_type_is_an_array_or_object_is_noted_not_raised(
        kind: Any) -> None:
    """Found by the property above in a CI run: `Shape.known` looked such a type up in a set,
    and the TypeError (unhashable) was what the malformed-event said."""
    line = {"type": "assistant", "message": {"id": "m1", "role": "assistant",
                                             "content": [{"type": kind, "thinking": ""}]}}
    out = make_adapter("claude").parse(json.dumps(line))
    [raw] = [o for o in out if o.fields.get("reason") == "malformed-event"]
    assert raw.fields["error"] == \
        f"content block.type: expected a known one, got {kind!r}", raw


class _Broken(JsonAdapter):
    provider = "broken"

    def handle(self, obj: dict[str, Any], line: str) -> list[Observation]:
        raise KeyError("part")


def test_a_handler_bug_becomes_a_raw_record_not_an_exception() -> None:
    (obs,) = _Broken().parse('{"type":"x"}')
    assert (obs.kind, dict(obs.fields)) == ("raw", {
        "value": '{"type":"x"}', "reason": "malformed-event", "bytes": 12,
        "error": "KeyError: 'part'"})


@pytest.mark.parametrize(("name", "args", "touched"), [
    ("Read", {"file_path": "/a/b.py"}, [("/a/b.py", "read", None)]),
    ("write_file", {"file_path": "x.md", "content": "hi"}, [("x.md", "write", None)]),
    ("MultiEdit", {"file_path": "m.py", "edits": []}, [("m.py", "edit", None)]),
    ("edit", {"filePath": "o.ts"}, [("o.ts", "edit", None)]),
    ("Grep", {"pattern": "TODO", "path": "src"}, [("src", "search", "TODO")]),
    ("Glob", {"pattern": "**/*.py"}, [(".", "search", "**/*.py")]),
    ("list_directory", {"dir_path": "docs"}, [("docs", "list", None)]),
    ("Bash", {"command": "pytest -q"}, [("pytest -q", "run", None)]),
    ("apply_patch", {"input": "*** Begin Patch\n*** Update File: a.py\n*** Add File: b.py\n"},
     [("a.py", "edit", None), ("b.py", "edit", None)]),
    ("mcp__fs__read_file", {"path": "n.txt"}, [("n.txt", "read", None)]),
    ("WebFetch", {"url": "https://example.com"}, []),
    ("Write", {}, []),
])
def test_files_touched_by_a_tool_call(
    name: str, args: dict[str, Any], touched: list[tuple[str, str, str | None]]
) -> None:
    assert file_ops(name, args) == touched


def test_a_long_command_is_clipped_as_a_run_path() -> None:
    ((path, op, _),) = file_ops("Bash", {"command": "x" * 2000})
    assert op == "run" and len(path) == 500 and path.endswith("…")


@pytest.mark.parametrize(("texts", "kind"), [
    (("Rate limit exceeded",), "quota"),
    (("APIError", 429), "quota"),
    (("You've hit your usage limit. Upgrade to Pro",), "quota"),
    (("exceeded retry limit, last status: 401 Unauthorized",), "auth"),
    (("FatalAuthenticationError",), "auth"),
    (("Upstream timeout while calling provider", 504), None),
    (("Reached maximum number of turns (1)",), None),
    (("No API key found for the selected model.",), "auth"),  # pi 0.73, no key set
    (("Error: missing API key",), "auth"),
    (("Used 3 API keys",), None),
])
def test_problem_classification(texts: tuple[object, ...], kind: str | None) -> None:
    assert classify_problem(*texts) == kind


@pytest.mark.parametrize(("name", "args", "text"), [
    ("Bash", {"command": "git commit -m 'x'\n\nbody"}, "git commit -m 'x'…"),
    ("Read", {"file_path": "/a/b.py"}, "/a/b.py"),
    ("custom", {"z": 1}, '{"z": 1}'),
    ("custom", {}, "custom"),
    # a key or value with an escape sequence: cleaned as `input` is, not kept as `\u001b` text
    ("custom", {"comm\x1b[31mand": "a\x1b]0;title\x07b", "n": [1, "\x1b[0m"]},
     '{"command": "ab", "n": [1, ""]}'),
])
def test_tool_summary(name: str, args: dict[str, Any], text: str) -> None:
    assert summary(name, args) == text


@pytest.mark.parametrize(("message", "status", "kind"), [
    ("rate_limit", 429, "rate-limit"),
    ("overloaded", 529, "overloaded"),
    ("authentication_failed", 401, "auth"),
    ("server_error", 500, "server"),
    ('unexpected status 400 Bad Request: {"detail":"Unsupported model"}', None, "request"),
    ("stream disconnected before completion: idle timeout waiting for SSE", None, "network"),
    ("reconnecting", None, "unknown"),
])
def test_retry_class(message: str, status: int | None, kind: str) -> None:
    assert retry_class(message, status) == kind


@pytest.mark.parametrize(("message", "parsed"), [
    ("Reconnecting... 1/5", ("reconnecting", 1, 5, None)),
    ("Reconnecting... 3/5 (stream disconnected)", ("stream disconnected", 3, 5, None)),
    # codex 0.171, offline, once its 5 attempts are spent (explore-clis F5)
    ("Reconnecting... waiting for network (Connection failed: error sending request)",
     ("waiting for network (Connection failed: error sending request)", None, None, None)),
    ("stream error: boom; retrying 2/5 in 421ms…", ("boom", 2, 5, 421)),
    ("stream error: slow; retrying 1/5 in 2.1s…", ("slow", 1, 5, 2100)),
    ("Retrying", ("retrying", None, None, None)),
    ("exceeded retry limit, last status: 401 Unauthorized", None),
    ("gave up retrying", None),
])
def test_parse_retry(message: str, parsed: tuple[object, ...] | None) -> None:
    assert parse_retry(message) == parsed


def test_an_infinite_count_is_no_count() -> None:
    """Found by the property above: `"attempt": Infinity` (json.loads reads it) made the Claude
    adapter's retry raise OverflowError."""
    line = ('{"type":"system","subtype":"api_retry","attempt":Infinity,"max_retries":10,'
            '"retry_delay_ms":600,"error_status":529,"error":"overloaded"}')
    (obs,) = make_adapter("claude").parse(line)
    assert (obs.kind, obs.fields.get("attempt"), obs.fields.get("maxAttempts")) == (
        "model-retry", None, 10)


@pytest.mark.parametrize(("lines", "reason"), [
    # a Python traceback: its last line, not a frame nor the caret under it
    (["Traceback (most recent call last):", '  File "x.py", line 1, in <module>', "    1/0",
      "    ^^^", "ZeroDivisionError: division by zero"], "ZeroDivisionError: division by zero"),
    # Node's uncaught error: the message, not its stack nor the version line after it
    (["/app/cli.js:10", "    throw new Error('boom');", "    ^", "", "Error: boom",
      "    at Object.<anonymous> (/app/cli.js:10:11)", "", "Node.js v22.3.0"], "Error: boom"),
    # gemini 0.61's trust refusal comes in red: read without its escape sequences
    (["\x1b[31mGemini CLI is not running in a trusted directory.\x1b[0m"],
     "Gemini CLI is not running in a trusted directory."),
    (["Reading additional input from stdin...", "done, exiting"], "done, exiting"),
    (["  only", "  indented"], "indented"),
    (["", "}", "   "], None),
    ([], None),
])
def test_the_stderr_line_that_says_why(lines: list[str], reason: str | None) -> None:
    tail = StderrTail()
    for line in lines:
        tail.feed(line)
    assert tail.reason == reason
