"""The runner's log: journald priorities, JSON fields, timestamps off a terminal, sanitized text."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import re
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from liverunner import watchrun_bin, write_config

from watchrun.events import MatchInfo
from watchrun.output import runlog as runlog_module
from watchrun.output.logstream import on_journal
from watchrun.output.runlog import ForwardToRunLog, RunLog

TS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
"""What no log line may carry raw: C0 controls but tab, DEL, C1, Unicode line separators."""
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
HOSTILE = [
    "ERROR \x1b[2J\x1b]0;owned\x07boom",  # CSI, OSC (terminal title)
    "a\nwatchrun: [other] forged line",  # a newline would forge a second log line
    "x\u2028y\u2029z",  # line breaks for JavaScript and some viewers
    "c1 \x9b31m csi and \x85 NEL",  # C1 controls
    "del \x7f and nul \x00 and bell \x07",
]


def strings(value: Any) -> list[str]:
    """Every string in a decoded JSON value (keys too)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def journal_env(path: Path) -> dict[str, str]:
    st_ = os.stat(path)
    return {"JOURNAL_STREAM": f"{st_.st_dev}:{st_.st_ino}"}


def test_on_the_journal_each_line_has_its_syslog_priority(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with open(path, "w") as stream:
        log = RunLog(stream=stream, environ=journal_env(path))
        log.info("running")
        log.warning("cannot watch x", "app")
        log.error("reload failed")
    assert path.read_text().splitlines() == [
        "<6>running", "<4>[app] warning: cannot watch x", "<3>error: reload failed"]


def test_json_lines_on_the_journal_carry_the_priority_too(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with open(path, "w") as stream:
        RunLog("json", stream=stream, environ=journal_env(path)).warning("w", "app")
    prio, _, rest = path.read_text().partition(">")
    assert prio == "<4" and json.loads(rest)["level"] == "warning"


@pytest.mark.parametrize("value", ["", "garbage", "1:2", "12"])
def test_a_journal_stream_that_is_not_stderr_is_ignored(tmp_path: Path, value: str) -> None:
    """systemd.exec(5): JOURNAL_STREAM is inherited by children whose stderr was redirected; only
    a matching device:inode means the journal. Off it, a file gets timestamps."""
    path = tmp_path / "err"
    with open(path, "w") as stream:
        assert not on_journal(stream, {"JOURNAL_STREAM": value})
        RunLog(stream=stream, environ={"JOURNAL_STREAM": value}).warning("w", "app")
    assert re.fullmatch(f"{TS} watchrun: \\[app\\] warning: w\n", path.read_text())


def test_a_terminal_gets_no_timestamps_a_pipe_does() -> None:
    main, sub = os.openpty()
    with os.fdopen(sub, "w") as tty:
        RunLog(stream=tty, environ={}).info("on a terminal")
    assert os.read(main, 1024).decode().replace("\r\n", "\n") == "watchrun: on a terminal\n"
    os.close(main)
    read, write = os.pipe()
    with os.fdopen(write, "w") as pipe:
        RunLog(stream=pipe, environ={}).info("in a pipe")
    with os.fdopen(read) as got:
        assert re.fullmatch(f"{TS} watchrun: in a pipe\n", got.read())


def json_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(x) for x in stream.getvalue().splitlines()]


def test_a_gap_is_a_warning_that_says_what_was_lost_and_why() -> None:
    """A `gap` record (lines never read, records given up) was logged as "[app] gap", at info:
    what was lost, and why, was only in the JSONL."""
    stream = io.StringIO()
    RunLog("text", stream=stream).event("app", "gap", {
        "reason": "missing", "message": "app.log.1 was deleted before it was read to its end",
        "unreadBytes": 120})
    assert stream.getvalue().rstrip("\n").endswith(
        "watchrun: [app] warning: gap (missing): app.log.1 was deleted before it was read to "
        "its end"), stream.getvalue()


def test_json_lines_carry_the_event_its_subject_and_its_fields() -> None:
    stream = io.StringIO()
    log = RunLog("json", stream=stream)
    log.event("app", "rotate", {"path": "/var/log/app.log", "reason": "rename", "inode": 12})
    log.matches("app", [MatchInfo("ERROR x", 7, 100, "/var/log/app.log:7")])
    log.scoped("agent").log("info", "turn-end", "turn-1 done", "triage", status="done",
                            input=10, cached=2, output=3)
    log.info("running", event="ready", watchers=2, ts="not a timestamp", level="x")
    rotate, match, turn, ready = json_lines(stream)
    assert list(rotate)[:5] == ["ts", "level", "event", "watcher", "msg"]
    assert re.fullmatch(TS, rotate["ts"])
    assert {k: rotate[k] for k in ("level", "event", "watcher", "path", "reason", "inode")} == {
        "level": "info", "event": "rotate", "watcher": "app", "path": "/var/log/app.log",
        "reason": "rename", "inode": 12}
    assert rotate["msg"] == "/var/log/app.log rotated (rename)"
    assert (match["event"], match["line"], match["lineNo"], match["where"]) == (
        "match", "ERROR x", 7, "/var/log/app.log:7")
    assert turn["agent"] == "triage" and "watcher" not in turn
    assert (turn["event"], turn["status"], turn["input"], turn["output"]) == ("turn-end", "done",
                                                                             10, 3)
    assert "watcher" not in ready and "agent" not in ready and ready["watchers"] == 2
    assert re.fullmatch(TS, ready["ts"]) and ready["level"] == "info"  # the envelope wins


@pytest.mark.parametrize(("cut", "mark"), [(4000, " [cut: 4000 more bytes not kept]"),
                                            (0, " [text clipped: the line was matched whole]")])
def test_an_echoed_line_cut_at_max_line_bytes_says_so(cut: int, mark: str) -> None:
    """The log echoed a cut line as if it were whole (`matches` and the verdict marked it)."""
    text, js = io.StringIO(), io.StringIO()
    for log in (RunLog("text", stream=text), RunLog("json", stream=js)):
        log.matches("app", [MatchInfo("ERROR x", 7, 100, "a.log:7", cut=cut),
                            MatchInfo("ERROR y", 8, 200, "a.log:8")])
    first, second = text.getvalue().splitlines()
    assert first.endswith(f"match a.log:7: ERROR x{mark}") and second.endswith("ERROR y")
    cut_line, whole = json_lines(js)
    assert (cut_line["line"], cut_line["truncated"]) == ("ERROR x", True)
    assert "truncated" not in whole


@pytest.mark.parametrize("hostile", HOSTILE)
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_every_logged_text_is_sanitized_and_stays_on_one_line(fmt: str, hostile: str) -> None:
    stream = io.StringIO()
    log = RunLog(fmt, stream=stream, timestamps=False)
    log.warning(hostile, hostile, path=hostile, nested={"k": [hostile]})
    log.matches("w", [MatchInfo(hostile, 1, 0, hostile)])
    log.event("w", "error", {"code": "x", "message": hostile})
    out = stream.getvalue()
    assert out.count("\n") == 3
    assert FORBIDDEN.search(out) is None and "\x1b" not in out
    if fmt == "json":
        for rec in json_lines(stream):  # the values, decoded: no controls, no escapes
            assert not [s for s in strings(rec) if CONTROLS.search(s)]
    if "\u2028" in hostile:
        assert "x\\u2028y\\u2029z" in out  # escaped, not dropped


def test_a_json_lines_msg_is_the_text_line_with_its_line_breaks_escaped() -> None:
    """`msg` is the text line: a file name with a newline and U+2028 was a real line break in
    the decoded `msg` (`jq -r .msg` printed two lines) while the text log showed `\\n`. The
    event's fields keep their values (JSON-escaped on the line)."""
    name = "/logs/evil\nname\u2028.log"
    text, js = io.StringIO(), io.StringIO()
    for fmt, stream in (("text", text), ("json", js)):
        RunLog(fmt, stream=stream, timestamps=False).info(f"following {name}", "app", path=name)
    (rec,) = json_lines(js)
    assert rec["msg"] == "following /logs/evil\\nname\\u2028.log" == \
        text.getvalue().removeprefix("watchrun: [app] ").rstrip("\n")
    assert rec["path"] == name


def test_the_held_matches_of_a_second_are_said_once_when_it_is_over(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a flood the timer of one second fired in the next one and said what that second
    had held so far, then the second's end said the rest: two lines a second. The timer of an
    earlier second now waits for the current one to be over."""
    clock = [10.95]
    monkeypatch.setattr(runlog_module, "time", SimpleNamespace(monotonic=lambda: clock[0],
                                                               time=time.time))
    stream = io.StringIO()
    log = RunLog("text", stream=stream, timestamps=False)
    burst = [MatchInfo(f"ERROR {i}", i, 0, f"a.log:{i}") for i in range(25)]

    def held() -> list[str]:
        return [ln for ln in stream.getvalue().splitlines() if "more matches" in ln]

    async def flood() -> None:
        log.matches("app", burst)  # second 10: 20 echoed, 5 held (its timer due at 11.0)
        clock[0] = 11.001
        log.matches("app", burst)  # second 11: the 5 said, 20 echoed, 5 held
        log._timer("app")  # second 10's timer, late, inside second 11: says nothing
        assert len(held()) == 1, held()
        clock[0] = 12.0
        log._timer("app")  # the end of second 11

    asyncio.run(flood())
    assert held() == ["watchrun: [app] ... and 5 more matches (see the JSONL)"] * 2, held()


@given(st.text())
def test_any_text_gives_one_safe_line(text: str) -> None:
    for fmt in ("text", "json"):
        stream = io.StringIO()
        RunLog(fmt, stream=stream, timestamps=False).error(text, text, field=text)
        out = stream.getvalue()
        assert out.count("\n") == 1 and out.endswith("\n")
        assert FORBIDDEN.search(out) is None


def test_the_tap_sees_every_event_even_when_quiet() -> None:
    seen: list[tuple[str, str, str | None, str | None]] = []
    stream = io.StringIO()
    log = RunLog(stream=stream, quiet=True)
    log.add_tap(lambda level, event, subject, name, fields: seen.append(
        (level, event, subject, name)))
    log.event("app", "restart", {"delayMs": 100, "attempt": 1})
    log.scoped("agent").info("turn-1 started", "triage", event="turn-start")
    log.info("runner line")
    assert seen == [("info", "restart", "watcher", "app"),
                    ("info", "turn-start", "agent", "triage"), ("info", "message", None, None)]
    assert stream.getvalue() == ""  # quiet: info is not printed


def test_library_warnings_keep_the_format_and_name_their_source() -> None:
    stream = io.StringIO()
    handler = ForwardToRunLog(RunLog("json", stream=stream))
    logger = logging.getLogger("watchrun.notify")
    logger.addHandler(handler)
    try:
        logger.warning("inotify: %s", "limit reached")
    finally:
        logger.removeHandler(handler)
    (rec,) = json_lines(stream)
    assert (rec["level"], rec["event"], rec["msg"]) == ("warning", "notify",
                                                        "inotify: limit reached")


def test_a_runner_under_systemd_writes_priorities_to_the_journal(tmp_path: Path) -> None:
    """The real process: stderr is the stream JOURNAL_STREAM names (as systemd sets it)."""
    config = write_config(tmp_path, {"watchers": [
        {"id": "c", "command": "echo 'ERROR one'; exit 3", "pattern": "ERROR",
         "restart": "never"}]})
    err = tmp_path / "journal"
    err.touch()
    with open(err, "w") as stream:
        p = subprocess.run([watchrun_bin(), "run", "--once", "-c", str(config)],
                           stderr=stream, stdout=subprocess.DEVNULL, timeout=60,
                           env={**os.environ, **journal_env(err)})
    assert p.returncode == 0
    lines = err.read_text().splitlines()
    assert lines and all(re.match(r"<[346]>", x) for x in lines), lines
    assert "<6>[c] match run 1:1: ERROR one" in lines
    assert "<6>[c] run 1 ended: exit code 3" in lines


def test_a_runner_logs_with_timestamps_when_stderr_is_a_file(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"watchers": [
        {"id": "c", "command": "echo 'ERROR one'", "pattern": "ERROR", "restart": "never"}]})
    err = tmp_path / "err"
    with open(err, "w") as stream:
        p = subprocess.run([watchrun_bin(), "run", "--once", "-c", str(config)], stderr=stream,
                           stdout=subprocess.DEVNULL, timeout=60,
                           env={k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"})
    assert p.returncode == 0
    lines = err.read_text().splitlines()
    assert lines and all(re.match(f"{TS} watchrun: ", x) for x in lines), lines


def test_a_bug_in_a_loop_callback_is_one_line_of_the_runners_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A callback that raises (a bug) is said in the runner's log, in its format, once per
    occurrence, and nothing else reaches stderr (before: asyncio's own multi-line traceback,
    which breaks `--log-format json` readers, written to stderr past the log)."""
    import asyncio

    from insupervisor import Running, until

    (tmp_path / "app.log").write_text("")
    buf = io.StringIO()

    async def body() -> None:
        r = Running(tmp_path, {"watchers": [{"id": "app", "path": "app.log", "pattern": "E"}]},
                    log=RunLog("json", buf, environ={}))
        async with r:
            asyncio.get_running_loop().call_soon(lambda: 1 / 0)
            await until(lambda: "ZeroDivisionError" in buf.getvalue(), "the bug in the log")
            assert any("ZeroDivisionError" in p for p in r.sup.problems)  # and on `status`

    asyncio.run(body())
    records = [json.loads(line) for line in buf.getvalue().splitlines()]  # JSON, every line
    said = [x for x in records if "ZeroDivisionError" in x["msg"]]
    assert [x["level"] for x in said] == ["error"]
    assert said[0]["msg"].startswith("internal error: Exception in callback")
    assert capsys.readouterr().err == ""
