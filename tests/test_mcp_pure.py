"""The pure parts of `watchrun mcp`: a call's checks (tables and Hypothesis), the seed's
`WatchRecord` from any snapshot (always valid against the output schema), the text rendering,
resource URIs, and reading matches by cursor from a real JSONL file."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from watchrun.mcp.calls import Call, CallError, normalize
from watchrun.mcp.reads import ReadError, read_matches
from watchrun.mcp.records import watch_record
from watchrun.mcp.resources import parse_uri, uri_of
from watchrun.mcp.schema import INPUT_SCHEMA, OUTPUT_SCHEMA, RECORD_SCHEMA
from watchrun.mcp.text import LIST_ROWS, render

CWD = "/srv/app"
NOW = datetime(2026, 5, 16, 12, 0, 0, tzinfo=UTC)


def test_the_schemas_are_valid_json_schema() -> None:
    for schema in (INPUT_SCHEMA, OUTPUT_SCHEMA, RECORD_SCHEMA):
        Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize(("args", "call"), [
    ({"action": "list"}, Call("list")),
    ({"action": "list", "id": None, "lines": None}, Call("list")),  # null is absent
    ({"action": "status", "id": "w1"}, Call("status", id="w1")),
    ({"action": "matches", "id": "w1", "lines": 20.0}, Call("matches", id="w1", lines=20)),
    ({"action": "matches", "id": "w1", "since": "w1:000000000000002a"},
     Call("matches", id="w1", since=42)),
    ({"action": "logs", "id": "api.v2", "lines": 2000}, Call("logs", id="api.v2", lines=2000)),
    ({"action": "clear", "all": True}, Call("clear", all=True)),
    ({"action": "add", "path": "logs/app.log", "pattern": "E"},
     Call("add", watcher={"path": "/srv/app/logs/app.log", "pattern": "E"})),
    ({"action": "add", "command": "make test", "pattern": "FAIL", "wake": True},
     Call("add", watcher={"command": "make test", "pattern": "FAIL", "wake": True,
                          "cwd": CWD})),
    ({"action": "add", "command": "make", "cwd": "../build", "pattern": "x", "id": "b"},
     Call("add", watcher={"command": "make", "cwd": "/srv/build", "pattern": "x", "id": "b"})),
    ({"action": "add", "pattern": "("},  # the config's checks judge the watcher itself
     Call("add", watcher={"pattern": "("})),
])
def test_calls_are_normalized(args: dict[str, Any], call: Call) -> None:
    assert normalize(args, CWD) == call


@pytest.mark.parametrize(("args", "message"), [
    ([], "the arguments must be an object with at least `action`"),
    ({}, "no action: `action` must be one of add, list, status, matches, logs, stop, clear"),
    ({"action": "tail"}, "action 'tail': `action` must be one of add, list, status, matches, "
     "logs, stop, clear"),
    ({"action": "add", "paht": "x"}, "unknown parameter `paht`; did you mean `path`?"),
    ({"action": "list", "bogus": 1, "linse": 2}, "unknown parameter `bogus`; unknown parameter "
     "`linse`; did you mean `lines`?"),
    ({"action": "list", "pattern": "x"}, "`pattern` does not apply to list (list takes no "
     "parameters)"),
    ({"action": "stop", "all": True, "lines": 3}, "`all`, `lines` do not apply to stop (stop "
     "takes `id`)"),
    ({"action": "status"}, "status needs `id`: the watcher's id, as `list` shows it (w1, …)"),
    ({"action": "status", "id": "../etc"}, "id: string '../etc' is not a watcher id (1 to 64 "
     "letters, digits, `_`, `.` or `-`, starting with a letter or digit)"),
    ({"action": "logs", "id": "w1", "lines": 0}, "lines: must be from 1 to 2000, not 0"),
    ({"action": "logs", "id": "w1", "lines": True}, "lines: expected a whole number from 1 to "
     "2000, got boolean True"),
    ({"action": "matches", "id": "w1", "lines": "5"}, "got string '5'"),
    ({"action": "matches", "id": "w1", "since": 3}, "since: expected a cursor string, got "
     "number 3"),
    ({"action": "matches", "id": "w1", "since": "w1:2a"}, "since: 'w1:2a' is not <id>:<16 "
     "lowercase hex digits>"),
    ({"action": "matches", "id": "w1", "since": "w2:000000000000002a"}, "since: cursor "
     "'w2:000000000000002a' is of watcher `w2`, not `w1`"),
    ({"action": "clear", "all": "yes"}, "all: expected true or false, got string 'yes'"),
])
def test_bad_calls_say_why(args: Any, message: str) -> None:
    with pytest.raises(CallError) as caught:
        normalize(args, CWD)
    assert message in str(caught.value)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                    lambda inner: st.lists(inner, max_size=3) |
                    st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
KEYS = st.sampled_from([*INPUT_SCHEMA["properties"], "bogus"])


@given(st.dictionaries(KEYS, JSON | st.sampled_from(
    ["add", "list", "status", "matches", "logs", "stop", "clear", "w1", "w1:0000000000000001"]),
    max_size=6))
def test_any_arguments_give_a_call_or_a_call_error(args: dict[str, Any]) -> None:
    try:
        call = normalize(args, CWD)
    except CallError as exc:
        assert str(exc)
        return
    assert call.action == args["action"]


SNAPSHOT_KEYS = st.sampled_from(["id", "label", "kind", "source", "pattern", "exclude",
                                 "caseSensitive", "fromStart", "wake", "cwd", "status", "origin",
                                 "startedAt", "updatedAt", "lastMatchAt", "linesRead",
                                 "matchCount", "restarts", "lastError", "pid", "exitCode",
                                 "signal", "live", "other"])


@given(st.dictionaries(SNAPSHOT_KEYS, JSON, max_size=12))
def test_any_snapshot_gives_a_record_the_schema_accepts(snap: dict[str, Any]) -> None:
    record = watch_record(snap)
    Draft202012Validator(RECORD_SCHEMA).validate(record)
    json.dumps(record, allow_nan=False)


def test_a_record_maps_watchruns_statuses_to_the_seeds() -> None:
    base = {"id": "w1", "kind": "command", "source": ["make", "test"], "wake": ["triage"],
            "pattern": "FAIL", "pid": 42, "signal": "SIGTERM", "exitCode": None, "live": True,
            "linesRead": -3, "cwd": "/srv"}
    for status, seed in [("starting", "running"), ("waiting", "running"), ("backoff", "running"),
                         ("stopping", "running"), ("exited", "exited"), ("fatal", "error"),
                         ("stopped", "stopped")]:
        rec = watch_record({**base, "status": status})
        assert (rec["status"], rec["state"]) == (seed, status)
    assert rec["source"] == {"kind": "command", "command": ["make", "test"], "cwd": "/srv"}
    assert (rec["wake"], rec["wakeAgents"], rec["linesRead"], rec["pid"]) == \
        (True, ["triage"], 0, 42)
    hostile = watch_record({"id": "w\x1b[2J1", "kind": "file", "source": "/x\u202e.log"})
    assert hostile["id"] == "w1" and hostile["source"]["path"] == "/x\\u202e.log"


def _w(i: int, **extra: Any) -> dict[str, Any]:
    return watch_record({"id": f"w{i}", "kind": "file", "source": f"/l/{i}.log", "label": f"l{i}",
                         "pattern": "E", "status": "running", "matchCount": i, "linesRead": 9,
                         "lastMatchAt": "2026-05-16T11:58:00.000Z", **extra})


def test_text_as_the_seeds_transcript() -> None:
    add = {"action": "add", "watch": _w(1, exclude=["ok"], wake=["triage"]),
           "warnings": ["wake: wake is true but the config has no agents"]}
    assert render(add, NOW) == ("w1 added: tailing /l/1.log for /E/ except /ok/; a match wakes "
                                "triage\nwarning: wake: wake is true but the config has no agents")
    assert render({"action": "stop", "watch": _w(1), "stopped": True}, NOW) == "stopped w1"
    assert render({"action": "stop", "watch": _w(1), "stopped": False}, NOW) == \
        "w1 was not running"
    many = render({"action": "list", "runner": "session", "watches": [_w(i) for i in
                                                                      range(1, 11)]}, NOW)
    lines = many.splitlines()
    assert lines[0] == "10 watchers (this session)"
    assert lines[1].split() == ["ID", "STATUS", "KIND", "MATCHES", "LINES", "LAST", "MATCH",
                                "LABEL"]
    assert lines[2].split() == ["w1", "running", "file", "1", "9", "2m", "ago", "l1"]
    assert len(lines) == 2 + LIST_ROWS + 1 and lines[-1] == "… 2 more in the structured result"
    capped = render({"action": "list", "runner": "none", "omitted": 2500,
                     "watches": [_w(i) for i in range(1, 11)]}, NOW).splitlines()
    assert capped[0] == "2510 watchers (no runner)"  # (an output dir of thousands: F5's cap)
    assert capped[-1] == ("… 2502 more (2500 of them past the structured result's 10: "
                          "`watchrun list` shows them)")
    assert render({"action": "clear", "runner": "none", "cleared": 0, "watches": []}, NOW) == \
        "cleared 0 watchers\nno watchers (no runner)"
    matches = {"action": "matches", "watch": _w(1), "matches": "E a\nE b", "count": 2,
               "cursor": "w1:0000000000000009", "truncated": True}
    assert render(matches, NOW) == ("w1: 2 matches (cursor w1:0000000000000009)\n(older ones not "
                                    "shown (raise lines))\nE a\nE b")
    cleared = {k: v for k, v in matches.items() if k != "watch"}  # no status, its JSONL only
    assert render(cleared, NOW).startswith("w1: 2 matches")
    assert render({"action": "logs", "logs": "", "count": 0, "truncated": False}, NOW) == \
        "the watcher: 0 lines"
    paged = {**matches, "since": "w1:0000000000000001"}
    assert "(more were recorded after these: call again with since=cursor)" in \
        render(paged, NOW)
    assert render({"action": "add", "error": "the watcher has 1 error"}, NOW) == \
        "watch add: the watcher has 1 error"


@pytest.mark.parametrize(("uri", "parsed"), [
    ("watchrun://watchers/w1/matches", ("w1", None)),
    ("watchrun://watchers/api.v2/matches?since=api.v2:0000000000000003",
     ("api.v2", "api.v2:0000000000000003")),
])
def test_resource_uris(uri: str, parsed: tuple[str, str | None]) -> None:
    assert parse_uri(uri) == parsed
    assert uri_of(parsed[0]) == uri.split("?")[0]


@pytest.mark.parametrize("uri", ["watchrun://watchers/w1", "file:///etc/passwd",
                                 "watchrun://watchers/../matches", "watchrun://agents/a/matches",
                                 "watchrun://watchers/w1/logs"])
def test_other_uris_are_refused(uri: str) -> None:
    with pytest.raises(ValueError, match="not a watchrun resource"):
        parse_uri(uri)


def _jsonl(root: Path, wid: str, kinds: str) -> None:
    """A watcher's JSONL: one record per letter, m a match (line `m<seq>`), s a start."""
    folder = root / "watchers"
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"{wid}.jsonl").open("a") as f:
        for seq, k in enumerate(kinds, start=1):
            rec = {"schema": 1, "seq": seq, "kind": "match" if k == "m" else "start",
                   "line": f"m{seq}"}
            f.write(json.dumps(rec) + "\n")


def test_matches_by_cursor_page_forward_without_loss(tmp_path: Path) -> None:
    _jsonl(tmp_path, "w1", "smmsmmm")  # matches at seqs 2, 3, 5, 6, 7
    last = read_matches(tmp_path, "w1", 2, None)
    assert (last.lines, last.truncated, last.cursor) == (["m6", "m7"], True,
                                                         "w1:0000000000000007")
    first = read_matches(tmp_path, "w1", 2, 0)
    assert (first.lines, first.truncated, first.cursor) == (["m2", "m3"], True,
                                                            "w1:0000000000000004")
    second = read_matches(tmp_path, "w1", 2, 4)  # the start record after m3 is passed over
    assert (second.lines, second.truncated, second.cursor) == (["m5", "m6"], True,
                                                               "w1:0000000000000006")
    third = read_matches(tmp_path, "w1", 2, 6)
    assert (third.lines, third.truncated, third.cursor) == (["m7"], False, "w1:0000000000000007")
    assert read_matches(tmp_path, "w1", 2, 7).lines == []
    with pytest.raises(ReadError, match="ahead of w1's newest record"):
        read_matches(tmp_path, "w1", 2, 8)
    nothing = read_matches(tmp_path, "w9", 5, None)
    assert (nothing.lines, nothing.cursor) == ([], "w9:0000000000000000")


def test_an_expired_cursor_is_said_not_skipped(tmp_path: Path) -> None:
    _jsonl(tmp_path, "w1", "mmmmmm")
    path = tmp_path / "watchers" / "w1.jsonl"
    kept = path.read_text().splitlines(keepends=True)[3:]  # seqs 1-3 rotated away
    path.write_text("".join(kept))
    with pytest.raises(ReadError, match="cursor_expired: the records after w1:0000000000000001"):
        read_matches(tmp_path, "w1", 5, 1)
    assert read_matches(tmp_path, "w1", 5, 3).lines == ["m4", "m5", "m6"]


def test_seqs_missing_after_the_cursor_are_said_not_skipped(tmp_path: Path) -> None:
    """Records 3 and 4 are gone from the middle of the stream (not rotated: the oldest is kept):
    a page from cursor 1 went on from 5 with m2, m5 as if nothing were missing."""
    _jsonl(tmp_path, "w1", "mmmmmm")
    path = tmp_path / "watchers" / "w1.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:2] + lines[4:]))
    with pytest.raises(ReadError, match="gap_detected: after w1:0000000000000002 the next "
                                        "record is seq 5, not 3"):
        read_matches(tmp_path, "w1", 5, 1)
    assert read_matches(tmp_path, "w1", 5, 5).lines == ["m6"]


def test_the_readme_action_table_is_the_tools() -> None:
    """README "Agents call it": one row per action with exactly the parameters that action
    takes (a parameter that does not apply is refused, so a wrong row is a refused call)."""
    import re
    from pathlib import Path

    from watchrun.mcp.calls import APPLIES
    from watchrun.mcp.schema import ACTIONS, INPUT_SCHEMA

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("## Agents call it: `watchrun mcp`", 1)[1].split("\n## ", 1)[0]
    rows = {m.group(1): set(re.findall(r"`(\w+)`", m.group(2)))
            for m in re.finditer(r"^\| `(\w+)` \|([^|]*)\|", section, flags=re.M)}
    assert list(rows) == list(ACTIONS)
    assert rows == {a: set(keys) for a, keys in APPLIES.items()}
    assert set().union(*rows.values()) | {"action"} == set(INPUT_SCHEMA["properties"])


def test_a_rotation_right_after_the_cursor_check_is_said_not_skipped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cursor is checked (its records are kept), then the runner rotates the file holding
    them past `output.keep` before they are read: the page must say `cursor_expired`, not
    start further on with a cursor that passes the lost matches off as read. The seam: the
    rotations happen right after the check."""
    from watchrun.clock import SystemClock
    from watchrun.mcp import reads
    from watchrun.output.records import iter_records
    from watchrun.output.sink import JsonlSink

    path = tmp_path / "watchers" / "w1.jsonl"
    path.parent.mkdir()
    sink = JsonlSink(path, "w1", max_bytes=600, keep=1, clock=SystemClock())

    def write(n: int) -> None:
        for _ in range(n):
            sink.write("match", {"line": f"m{sink.next_seq}", "pad": "x" * 100})

    write(8)
    since = next(iter(iter_records(path)))["seq"]  # the oldest retained: not expired
    real = reads.cursor_expired

    def then_rotated(where: Path, seq: int) -> bool:
        expired = real(where, seq)
        first = sink.rotations
        while sink.rotations < first + 2:  # what followed `since` is rotated away
            write(1)
        return expired

    monkeypatch.setattr(reads, "cursor_expired", then_rotated)
    with pytest.raises(ReadError, match="cursor_expired"):
        page = read_matches(tmp_path, "w1", 100, since)
        pytest.fail(f"{page.lines[:1]} first after seq {since}, cursor {page.cursor}")
    sink.close()
