"""`agent watch` views over real agent JSONL: include sets, cursors, --since, rotation (cursor
expired), gaps, --tail on UTF-8 boundaries, transcript messages, derived status."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from agentrecords import FINDINGS, AgentLog, History, claude_text, standard_history
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from watchrun.cli.agent_views import AgentRef
from watchrun.output.records import format_cursor, iter_records
from watchrun.views.agent_watch import DEFAULT_INCLUDE, build_watch, parse_include
from watchrun.views.agent_window import ViewError

TRIAGE = AgentRef("triage", "claude")


def validator() -> Draft202012Validator:
    text = resources.files("watchrun.schemas").joinpath("agent-watch.schema.json").read_text()
    schema = json.loads(text)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def view(path: Path, **kw: Any) -> dict[str, Any]:
    """build_watch, checked against the published schema."""
    v = build_watch(path, TRIAGE, **kw)
    errors = [f"{e.json_path}: {e.message}" for e in validator().iter_errors(v)]
    assert errors == []
    return v


@pytest.fixture
def hist(tmp_path: Path) -> History:
    return standard_history(tmp_path)


def records(path: Path) -> list[dict[str, Any]]:
    return list(iter_records(path))


def last_of(path: Path, kind: str, **match: Any) -> dict[str, Any]:
    found = [r for r in records(path) if r["kind"] == kind
             and all(r.get(k) == v for k, v in match.items())]
    return found[-1]


def test_default_view_has_the_seed_shape(hist: History) -> None:
    v = view(hist.path)
    assert list(v) == ["schema", "agent", "cursor", "events", "output", "transcript", "delivery"]
    idle = last_of(hist.path, "status", status="idle")
    assert v["agent"] == {"uuid": "triage", "name": "triage", "provider": "claude",
                          "status": "idle", "last_status_at": idle["ts"]}
    assert v["cursor"] == hist.log.cursor
    assert v["events"] == []
    assert v["output"] == {
        "cursor": hist.log.cursor, "truncated": False, "omitted_bytes": 0,
        "text": f"{FINDINGS}\nError: 1 test failed\n● starting é\ndone\nFinal answer\n"}
    t = v["transcript"]
    assert [(m["role"], m["turn_id"], m["source"], m["text"]) for m in t["messages"]] == [
        ("user", hist.done.turn_id, "prompt",
         "These lines appeared in API server:\nERROR db down\nFind the cause."),
        ("assistant", hist.done.turn_id, "text", FINDINGS),
        ("user", hist.failed.turn_id, "prompt", "run the tests"),
        ("user", hist.pty.turn_id, "prompt", "show me"),
        ("assistant", hist.pty.turn_id, "text", "Final answer"),
    ]
    assert {m["provider"] for m in t["messages"]} == {"claude"}
    assert (t["cursor"], t["latest_text"], t["truncated"], t["omitted_bytes"]) == (
        hist.log.cursor, "Final answer", False, 0)
    delivered = last_of(hist.path, "delivery", deliveryState="delivered")
    queued = last_of(hist.path, "delivery", deliveryId=hist.d2)
    assert v["delivery"]["delivery"] == [
        {"id": hist.d1, "state": "delivered", "label": "API server", "count": 2, "overflow": 0,
         "lines": ["ERROR db down", "ERROR café ☕"], "watcher": "server",
         "turn_id": hist.done.turn_id, "cursor": delivered["cursor"],
         "updated_at": delivered["ts"]},
        {"id": hist.d2, "state": "queued", "label": "worker", "count": 1, "overflow": 0,
         "lines": ["FATAL oom"], "watcher": "worker", "cursor": queued["cursor"],
         "updated_at": queued["ts"]},
    ]


def test_include_raw_output_replaces_the_default_set_like_the_seed(hist: History) -> None:
    v = view(hist.path, include=parse_include(["raw_output"]))
    assert list(v) == ["schema", "agent", "cursor", "events", "output", "raw_output", "delivery"]
    assert v["raw_output"] == {
        "cursor": hist.log.cursor, "truncated": False, "omitted_bytes": 0,
        "text": "Error: 1 test failed\n\x1b[1;32m●\x1b[0m starting é\n\x1b[33mdone\x1b[0m\r\n"}
    assert "\x1b" not in v["output"]["text"]


def test_raw_flag_adds_raw_output_to_the_default_set(hist: History) -> None:
    v = view(hist.path, include=parse_include([], raw=True))
    assert list(v) == ["schema", "agent", "cursor", "events", "output", "transcript",
                       "raw_output", "delivery"]


@pytest.mark.parametrize(("values", "raw", "expected"), [
    ([], False, set(DEFAULT_INCLUDE)),
    ([], True, {*DEFAULT_INCLUDE, "raw_output"}),
    (["raw_output"], False, {"raw_output"}),
    (["transcript,events", " raw_output "], False, {"transcript", "events", "raw_output"}),
    (["output"], True, {"output", "raw_output"}),
])
def test_parse_include(values: list[str], raw: bool, expected: set[str]) -> None:
    assert parse_include(values, raw) == expected


def test_unknown_include_is_not_supported() -> None:
    with pytest.raises(ViewError) as err:
        parse_include(["transcript,raws"])
    assert err.value.code == "not_supported" and "'raws'" in err.value.message
    assert err.value.exit_status == 2


def test_include_events_lists_every_record_without_raw_fields(hist: History) -> None:
    v = view(hist.path, include={"events"})
    assert "transcript" not in v
    assert [e["seq"] for e in v["events"]] == [r["seq"] for r in records(hist.path)]
    outputs = [e for e in v["events"] if e["kind"] == "output"]
    assert [e["text"] for e in outputs] == ["● starting é", "done"]
    assert all("raw" not in e for e in v["events"])
    with_raw = view(hist.path, include={"events", "raw_output"})
    assert [e["raw"] for e in with_raw["events"] if e["kind"] == "output"] == [
        "\x1b[1;32m●\x1b[0m starting é", "\x1b[33mdone\x1b[0m\r"]


def test_since_returns_only_what_is_strictly_after_it(hist: History) -> None:
    since = hist.failed.last
    v = view(hist.path, since=since, include=parse_include([], raw=True))
    after = [r for r in records(hist.path) if r["cursor"] > since]
    assert [e["cursor"] for e in v["events"]] == [r["cursor"] for r in after]
    assert v["events"][0]["kind"] == "dispatch-start"
    assert v["output"]["text"] == "● starting é\ndone\nFinal answer\n"
    assert [m["text"] for m in v["transcript"]["messages"]] == ["show me", "Final answer"]
    assert [d["id"] for d in v["delivery"]["delivery"]] == [hist.d2]
    assert v["agent"]["status"] == "idle"


def test_since_the_latest_cursor_is_an_empty_window(hist: History) -> None:
    v = view(hist.path, since=hist.log.cursor)
    assert (v["cursor"], v["events"], v["output"]["text"]) == (hist.log.cursor, [], "")
    assert v["transcript"]["messages"] == [] and v["delivery"]["delivery"] == []


def test_empty_stream_has_a_zero_cursor(tmp_path: Path) -> None:
    v = view(tmp_path / "agents" / "triage.jsonl")
    assert v["cursor"] == "triage:0000000000000000" == v["output"]["cursor"]
    assert v["agent"]["status"] == "idle" and v["agent"]["last_status_at"] is None
    assert v["transcript"]["latest_text"] == ""


@pytest.mark.parametrize(("cursor", "says"), [
    ("garbage", "not <id>:<16 lowercase hex digits>"),
    ("triage:12", "not <id>:<16 lowercase hex digits>"),
    ("triage:000000000000000A", "not <id>:<16 lowercase hex digits>"),
    ("coder:0000000000000001", "belongs to 'coder', not to agent 'triage'"),
    ("triage:00000000000000ff", "ahead of the latest record"),
])
def test_invalid_cursor(hist: History, cursor: str, says: str) -> None:
    with pytest.raises(ViewError) as err:
        build_watch(hist.path, TRIAGE, since=cursor)
    assert err.value.code == "invalid_cursor" and says in err.value.message
    assert err.value.to_dict()["error"]["cursor"] == cursor and err.value.exit_status == 2


def test_rotated_away_cursor_is_expired_never_a_silent_gap(tmp_path: Path) -> None:
    log = AgentLog(tmp_path, "triage", max_bytes=600, keep=1)
    for i in range(30):
        log.status("idle" if i % 2 else "running", message=f"step {i}")
    log.close()
    kept = records(log.path)
    oldest = kept[0]["seq"]
    assert oldest > 2  # rotation deleted the first records
    with pytest.raises(ViewError) as err:
        build_watch(log.path, TRIAGE, since=format_cursor("triage", 1))
    e = err.value.to_dict()["error"]
    assert (e["code"], e["cursor"], e["oldest_cursor"]) == (
        "cursor_expired", "triage:0000000000000001", kept[0]["cursor"])
    assert err.value.exit_status == 1
    ok = view(log.path, since=format_cursor("triage", oldest - 1))  # the oldest is still there
    assert [r["seq"] for r in ok["events"]] == [r["seq"] for r in kept]


def test_records_after_an_until_anchor_rotated_away_are_expired_never_a_silent_gap(
        tmp_path: Path) -> None:
    """`agent watch --until` reads the view after the record that met the condition (its
    anchor). When rotation past `output.keep` removed the records right after it before the
    view was read, `events` began further on as if none were missing."""
    log = AgentLog(tmp_path, "triage", max_bytes=600, keep=1)
    anchor = log.status("idle", message="the anchor")
    for i in range(30):
        log.status("running", message=f"step {i}")
    log.close()
    assert records(log.path)[0]["seq"] > anchor["seq"] + 1  # what followed it is gone
    with pytest.raises(ViewError) as err:
        build_watch(log.path, TRIAGE, anchor=anchor["cursor"])
    e = err.value.to_dict()["error"]
    assert (e["code"], e["cursor"]) == ("cursor_expired", anchor["cursor"])
    assert "raise it" in err.value.message
    kept = AgentLog(tmp_path / "kept", "triage")  # all retained: the events follow the anchor
    first = kept.status("idle")
    after = [kept.status("running", message=f"step {i}") for i in range(3)]
    kept.close()
    got = build_watch(kept.path, TRIAGE, anchor=first["cursor"])["events"]
    assert [r["cursor"] for r in got] == [r["cursor"] for r in after]


def test_a_missing_seq_after_the_cursor_is_gap_detected(tmp_path: Path) -> None:
    log = AgentLog(tmp_path, "triage")
    log.status("idle")
    first = log.status("running")
    log.sink.next_seq += 3  # three records that never reached the file
    log.status("idle")
    log.close()
    with pytest.raises(ViewError) as err:
        build_watch(log.path, TRIAGE, since=first["cursor"])
    e = err.value.to_dict()["error"]
    assert (e["code"], e["cursor"], e["found_cursor"]) == (
        "gap_detected", first["cursor"], "triage:0000000000000006")


def test_seqs_given_up_unwritten_are_explained_by_their_gap_record(tmp_path: Path) -> None:
    """Records given up at a shutdown on a full disk leave seqs out, and the `gap` record
    (reason unwritten) that takes the last of them says so: the window reads on, no error."""
    log = AgentLog(tmp_path, "triage")
    first = log.status("running")
    lost = [log.sink.record("status", {"state": "idle"}) for _ in range(3)]
    log.sink.give_up(lost)
    log.status("idle")
    log.close()
    v = view(log.path, since=first["cursor"], include=["events"])
    events = [(r["seq"], r["kind"], r.get("fromSeq")) for r in v["events"]]
    assert events == [(4, "gap", 2), (5, "status", None)]


def text_turn(log: AgentLog, prompt: str, lines: list[str]) -> None:
    log.turn(prompt, [claude_text(f"m{i}", text) for i, text in enumerate(lines)])


def test_tail_keeps_the_end_and_cuts_on_a_character_boundary(tmp_path: Path) -> None:
    log = AgentLog(tmp_path, "triage", provider="generic")
    log.turn("p", ["aé€😀"], duration_ms=1)  # reply "aé€😀": 1+2+3+4 bytes, then "\n"
    log.close()
    v = view(log.path, tail=6)  # the last 6 bytes start inside "€": keep "😀\n" (5 bytes)
    assert v["output"] == {"cursor": log.cursor, "text": "😀\n", "truncated": True,
                           "omitted_bytes": 6}


@pytest.mark.parametrize("tail", [0, 1, 2, 3, 4, 5, 7, 10, 11, 25, 64, 1000])
def test_tail_on_multibyte_output(tmp_path: Path, tail: int) -> None:
    log = AgentLog(tmp_path, "triage", provider="generic")
    log.turn("p", ["日本語のテキスト €uro", "😀 emoji ünïcödé"], duration_ms=1)
    log.close()
    full = view(log.path)["output"]["text"].encode()
    out = view(log.path, tail=tail)["output"]
    kept = out["text"].encode()
    assert full.endswith(kept) and len(kept) <= tail
    assert len(kept) > tail - 4 or len(kept) == len(full)  # at most one character less
    assert out["omitted_bytes"] == len(full) - len(kept)
    assert out["truncated"] is (len(kept) < len(full))


def test_tail_drops_old_messages_and_cuts_the_oldest_kept(tmp_path: Path) -> None:
    log = AgentLog(tmp_path, "triage")
    text_turn(log, "first prompt", ["héllo wörld"])
    text_turn(log, "second", ["ünïcödé answer"])
    log.close()
    whole = view(log.path)["transcript"]["messages"]
    assert [m["text"] for m in whole] == ["first prompt", "héllo wörld", "second",
                                          "ünïcödé answer"]
    t = view(log.path, tail=20)["transcript"]  # "ünïcödé answer" is 18 bytes
    assert [m["text"] for m in t["messages"]] == ["nd", "ünïcödé answer"]
    assert t["omitted_bytes"] == len("first prompthéllo wörldseco".encode())
    assert t["truncated"] is True and t["latest_text"] == "ünïcödé answer"
    t = view(log.path, tail=10)["transcript"]
    assert [m["text"] for m in t["messages"]] == ["dé answer"]  # cut inside "é": 9 bytes kept
    assert t["latest_text"] == "dé answer"
    assert view(log.path, tail=0)["transcript"]["messages"] == []


def test_negative_tail_is_an_invalid_argument(hist: History) -> None:
    with pytest.raises(ViewError) as err:
        build_watch(hist.path, TRIAGE, tail=-1)
    assert err.value.code == "invalid_argument"


def test_messages_merge_lines_and_streamed_deltas(tmp_path: Path) -> None:
    log = AgentLog(tmp_path, "gen", provider="generic")
    log.turn("say hi", ["hello", "", "world"], duration_ms=1)
    log.close()
    msgs = build_watch(log.path, AgentRef("gen", "generic"))["transcript"]["messages"]
    assert [(m["role"], m["text"]) for m in msgs] == [("user", "say hi"),
                                                      ("assistant", "hello\n\nworld")]
    log = AgentLog(tmp_path, "triage")
    tid = log.turn("p", [], finish=False).turn_id
    for part in ("Strea", "med ", "answer"):
        log.emit("text-delta", text=part, turnId=tid)
    live = build_watch(log.path, TRIAGE)["transcript"]
    assert live["messages"][-1] == {"role": "assistant", "text": "Streamed answer",
                                    "provider": "claude", "turn_id": tid, "source": "text-delta"}
    log.emit("text", text="Streamed answer", messageId="m9", turnId=tid)
    log.emit("text", text="Streamed answer", final=True, source="result", turnId=tid)
    log.close()
    msgs = build_watch(log.path, TRIAGE)["transcript"]["messages"]
    assert [(m["text"], m["source"]) for m in msgs] == [("p", "prompt"),
                                                        ("Streamed answer", "text")]


def test_status_is_derived_when_the_stream_has_no_status_records(tmp_path: Path) -> None:
    log = AgentLog(tmp_path, "triage")
    start = log.emit("dispatch-start", turnId="turn-1", trigger="manual", deliveries=[])
    assert build_watch(log.path, TRIAGE)["agent"]["status"] == "running"
    assert build_watch(log.path, TRIAGE)["agent"]["last_status_at"] == records(log.path)[0]["ts"]
    log.emit("status", status="rate-limit", turnId="turn-1")  # an adapter's, not the agent's
    assert build_watch(log.path, TRIAGE)["agent"]["status"] == "running"
    log.emit("dispatch-finished", turnId=start["turnId"], status="done", completed=True)
    log.close()
    assert build_watch(log.path, TRIAGE)["agent"]["status"] == "idle"
