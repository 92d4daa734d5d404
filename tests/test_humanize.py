"""The pure parts of the CLI's output for people and its envelope: relative times, values
without reprs, the colour decision, old `delivery_state` records, argv normalization."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchrun.cli.emit import Out, exit_status, wants_colour
from watchrun.cli.main import normalize, parse
from watchrun.views.agent_watch import build_watch
from watchrun.views.agent_window import delivery_state
from watchrun.views.humanize import ago, paint, value, when

NOW = datetime(2026, 5, 16, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(("seconds", "said"), [
    (0, "just now"), (0.4, "just now"), (1, "1s ago"), (59, "59s ago"), (60, "1m ago"),
    (3599, "59m ago"), (3600, "1h ago"), (3660, "1h 1m ago"), (86399, "23h 59m ago"),
    (86400, "1d ago"), (-5, "in 5s"),
])
def test_ago(seconds: float, said: str) -> None:
    assert ago(NOW - timedelta(seconds=seconds), NOW) == said


@pytest.mark.parametrize(("ts", "short", "said"), [
    ("2026-05-16T11:57:00.000Z", True, "3m ago"),
    ("2026-05-16T11:57:00.000Z", False, "2026-05-16T11:57:00.000Z (3m ago)"),
    (None, True, "-"), ("", False, "-"), ("yesterday", False, "yesterday"), (12, True, "12"),
])
def test_when(ts: Any, short: bool, said: str) -> None:
    assert when(ts, NOW, short=short) == said


@pytest.mark.parametrize(("v", "said"), [
    (None, "-"), (True, "yes"), (False, "no"), ([], "-"), (["healthcheck"], "healthcheck"),
    (["a", "b"], "a, b"), ({}, "-"), ({"aws": 2}, "aws=2"), (0, "0"), ("x", "x"),
    ([None, True], "-, yes"),
])
def test_value(v: Any, said: str) -> None:
    assert value(v) == said


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False),
                       lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.sampled_from("abc"), inner, max_size=3),
                       max_leaves=12)


@given(JSONISH)
def test_value_never_prints_a_python_repr(v: Any) -> None:
    text = value(v)
    for repr_ in ("None", "True", "False", "[", "{", "'"):
        assert repr_ not in text


def test_paint_only_known_statuses() -> None:
    assert paint("running ", "running ") == "\x1b[32mrunning \x1b[0m"
    assert paint("error", "error") == "\x1b[31merror\x1b[0m"
    assert paint("weird", "weird") == "weird"


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("stream", "env", "colour"), [
    (Tty(), {}, True), (Tty(), {"TERM": "xterm-256color"}, True),
    (Tty(), {"NO_COLOR": "1"}, False), (Tty(), {"NO_COLOR": "0"}, False),
    (Tty(), {"NO_COLOR": ""}, True),  # no-color.org: present *and not empty*
    (Tty(), {"TERM": "dumb"}, False), (io.StringIO(), {}, False),
])
def test_colour_decision(stream: io.StringIO, env: dict[str, str], colour: bool) -> None:
    assert wants_colour(stream, env) is colour
    assert Out(False, stdout=stream, environ=env).colour is colour
    assert Out(True, stdout=stream, environ=env).colour is False  # never inside JSON


def test_out_documents_are_objects_and_errors_carry_their_exit_status() -> None:
    out, err = io.StringIO(), io.StringIO()
    o = Out(True, stdout=out, stderr=err)
    with pytest.raises(TypeError):
        o.doc([1, 2])  # type: ignore[arg-type]
    assert o.fail("not_found", "no watcher 'x'", id="x") == 2
    assert json.loads(out.getvalue()) == {"error": {"code": "not_found",
                                                    "message": "no watcher 'x'", "id": "x"}}
    assert err.getvalue() == ""
    t = Out(False, stdout=out, stderr=err)
    assert t.fail("no_runner", "no live runner\x1b[31m on\u2028x") == 3
    assert err.getvalue() == "watchrun: error: no live runner on\\u2028x\n"  # sanitized
    assert [exit_status(c) for c in ("usage", "watch_timeout", "read_failed")] == [2, 1, 3]


def test_delivery_state_reads_the_old_name_too(tmp_path: Path) -> None:
    assert delivery_state({"deliveryState": "queued"}) == "queued"
    assert delivery_state({"delivery_state": "delivered"}) == "delivered"
    assert delivery_state({"delivery_state": 3}) is None
    path = tmp_path / "agents" / "a.jsonl"
    path.parent.mkdir()
    recs = [{"schema": 1, "seq": 1, "cursor": "a:0000000000000001", "ts": "2026-05-16T12:00:00Z",
             "kind": "delivery", "deliveryId": "d-1", "delivery_state": "queued",
             "watcher": "w", "count": 1}]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))

    class Agent:
        name, provider = "a", "mock"

    view = build_watch(path, Agent())
    assert [d["state"] for d in view["delivery"]["delivery"]] == ["queued"]


@pytest.mark.parametrize(("argv", "words"), [
    (["-c", "w.yaml"], ["run", "-c", "w.yaml"]),
    (["--once", "-c", "w.yaml"], ["run", "--once", "-c", "w.yaml"]),
    (["-c", "w.yaml", "status", "x"], ["-c", "w.yaml", "status", "x"]),
    (["--json", "list"], ["--json", "list"]),
    (["--log-format", "json", "-c", "a"], ["run", "--log-format", "json", "-c", "a"]),
    (["--version"], ["--version"]),
])
def test_normalize(argv: list[str], words: list[str]) -> None:
    assert normalize(argv) == words


def test_parse_merges_options_given_before_the_command() -> None:
    args = parse(["-c", "a.yaml", "--json", "agent", "send", "triage", "hi", "-c", "b.yaml"])
    assert (args.command, args.agent_command, args.name, args.text) == (
        "agent", "send", "triage", "hi")
    assert args.config == [Path("a.yaml"), Path("b.yaml")] and args.format == "json"
    args = parse(["--output-dir", "/o", "list"])
    assert args.output_dir == Path("/o") and args.config == []
