"""`watchrun top` without a screen: inert text, relative times, the chips, unreported matches,
and the feed's rows from status snapshots, agent streams and the control socket."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agentrecords import AgentLog, claude_init
from hypothesis import given
from hypothesis import strategies as st
from liverunner import hold_runner_lock

from watchrun.runtime.client import request
from watchrun.tui import feed as feed_mod
from watchrun.tui.feed import Feed
from watchrun.tui.model import Row, Unreported, chips, format_match, row_cells
from watchrun.tui.text import ago, inert, inert_block

NOW = 1_779_000_000.0  # 2026-05-17T06:40:00Z


@pytest.mark.parametrize(("raw", "shown"), [
    ("plain", "plain"),
    ("\x1b[31mred\x1b[0m", "red"),
    ("\x1b]0;pwned title\x07after", "after"),
    ("\x1b]8;;https://evil\x1b\\link\x1b]8;;\x1b\\", "link"),
    ("[bold red]markup[/]", "[bold red]markup[/]"),  # kept as typed: shown through Text
    ("[@click=app.quit]x[/]", "[@click=app.quit]x[/]"),
    ("a\tb\nc", "a b c"),
    ("right\u202eto-left", "right\\u202eto-left"),
    ("zero\u200bwidth", "zero\\u200bwidth"),
    ("10%\r100%", "100%"),
    ("\x9b31mC1\x9dtitle\x9c", "C1"),
    ("tag\U000e0072\U000e0075soft\u00adhyphen", "tag\\U000e0072\\U000e0075soft\\u00adhyphen"),
    ("mvs\u180esep ann\ufff9x\ufffbend \u3164", "mvs\\u180esep ann\\ufff9x\\ufffbend \\u3164"),
])
def test_inert_text(raw: str, shown: str) -> None:
    assert inert(raw) == shown


def test_inert_clips_with_an_ellipsis() -> None:
    assert inert("x" * 50, 10) == "x" * 9 + "…"
    assert inert_block("one\x1b[2Jtwo\nthree\u202e") == "onetwo\nthree\\u202e"


@given(st.text())
def test_inert_never_lets_a_control_or_invisible_mark_through(text: str) -> None:
    out = inert(text, 300)
    assert len(out) <= 300
    assert not any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f for c in out)
    assert not any(c in out for c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
                   "\u200b\u200e\u200f\u2028\u2029\ufeff")


@pytest.mark.parametrize(("ts", "text"), [
    (None, "-"), ("", "-"), ("not a time", "-"), (17, "-"),
    ("2026-05-17T06:40:00.000Z", "just now"),
    ("2026-05-17T06:40:05.000Z", "in 5s"),  # a little in the future: clocks apart
    ("2026-05-17T06:39:18.000Z", "42s ago"),
    ("2026-05-17T06:35:00.000Z", "5m ago"),
    ("2026-05-17T03:40:00.000Z", "3h ago"),
    ("2026-05-15T06:40:00.000Z", "2d ago"),
])
def test_relative_time(ts: object, text: str) -> None:
    assert ago(ts, NOW) == text


def row(wid: str, matches: int, run: str = "1@t0", status: str = "running") -> Row:
    return Row("file", wid, status, 10, matches, None, wid, run)


def test_unreported_counts_what_arrives_after_the_screen_opened() -> None:
    u = Unreported()
    u.observe([row("a", 5), row("b", 0)])
    assert u.total() == 0  # what was there before the screen opened is not news
    u.observe([row("a", 7), row("b", 1)])
    assert (u.of("a"), u.of("b"), u.total()) == (2, 1, 3)
    u.mark_seen("a")
    assert (u.of("a"), u.total()) == (0, 1)
    u.observe([row("a", 8), row("b", 1), row("c", 4)])  # c appeared later: all of it is news
    assert (u.of("a"), u.of("b"), u.of("c")) == (1, 1, 4)


def test_unreported_survives_a_runner_restart_and_forgets_cleared_watchers() -> None:
    u = Unreported()
    u.observe([row("a", 5)])
    u.observe([row("a", 9)])
    assert u.of("a") == 4
    u.observe([row("a", 2, run="2@t1")])  # a new runner counts from 0 again
    assert u.of("a") == 6
    u.observe([])  # cleared
    assert u.total() == 0
    u.observe([row("a", 3, run="2@t9")])  # added again later (a new start): new
    assert u.of("a") == 3


@pytest.mark.parametrize(("polls", "unreported"), [
    # state/ unreadable for one refresh (no rows), then back as it was: nothing is news
    ([[("a", 5), ("b", 9656)], [], [("a", 5), ("b", 9656)]], {"a": 0, "b": 0}),
    # ... and what was news before the blip still is, what came during it too
    ([[("a", 5)], [("a", 7)], [], [], [("a", 9)]], {"a": 4}),
    # one watcher missing from one refresh (its snapshot being replaced, unparsable)
    ([[("a", 5), ("b", 1)], [("b", 1)], [("a", 6), ("b", 1)]], {"a": 1, "b": 0}),
    # seen before the blip: stays seen
    ([[("a", 5)], [("a", 8)], "seen a", [], [("a", 8)]], {"a": 0}),
    # gone, and back as a new start of the watcher (cleared and added again): all news
    ([[("a", 5)], [], [("a", 2, "1@t5")]], {"a": 2}),
    # gone, and back under a restarted runner: its new counts are news, the old ones not
    ([[("a", 5)], [], [("a", 3, "2@t0")]], {"a": 3}),
])
def test_a_watcher_missing_from_one_refresh_is_not_new_when_it_comes_back(
        polls: list[Any], unreported: dict[str, int]) -> None:
    """helper-91's F16: rows gone for one refresh (state/ unreadable a moment) made every
    match on disk count as unreported when they came back (`! 0` -> `! 9661`)."""
    u = Unreported()
    for poll in polls:
        if isinstance(poll, str):
            u.mark_seen(poll.split()[1])
        else:
            u.observe([row(wid, n, *run) for wid, n, *run in poll])
    assert {wid: u.of(wid) for wid in unreported} == unreported
    assert u.total() == sum(unreported.values())


def test_chips_count_running_watchers_not_agents() -> None:
    u = Unreported()
    rows = [row("a", 0), row("b", 0, status="backoff"), row("c", 0, status="exited"),
            row("d", 0, status="stopped"), row("e", 0, status="fatal"),
            Row("agent", "triage", "running", None, 0, None)]
    u.observe(rows)
    assert chips(rows, u) == ("⊚ 2", "! 0")


def test_the_running_chip_counts_watchers_at_work_not_those_in_trouble() -> None:
    """helper-91's F3: a watcher that may not read its file (`error`) or write its records
    (`paused`) counted as running; one being stopped still runs its process and counts."""
    rows = [row("a", 0), row("b", 0, status="waiting"), row("c", 0, status="stopping"),
            row("d", 0, status="error"), row("e", 0, status="paused")]
    assert chips(rows, Unreported()) == ("⊚ 3", "! 0")
    assert all(r.running for r in rows)  # each can still be stopped (`x`), none cleared (`d`)


def test_row_cells_and_match_lines_are_plain_inert_text() -> None:
    r = Row("command", "t[x]", "running", 1234, 5, "2026-05-17T06:39:00.000Z",
            "make \x1b[2J[red]test[/]")
    assert row_cells(r, 2, NOW) == ["command", "t[x]", "running", "1,234", "5 (+2)", "1m ago",
                                    "make [red]test[/]"]
    rec = {"ts": "2026-05-17T06:39:00.000Z", "path": "/var/log/a.log", "lineNo": 7,
           "line": "ERROR \x1b]0;x\x07[b]boom[/b]", "truncated": True}
    assert format_match(rec) == \
        "2026-05-17T06:39:00.000Z  a.log:7  ERROR [b]boom[/b] [truncated]"
    assert format_match({"ts": "t", "run": 3, "lineNo": 1, "line": "x"}) == "t  run 3:1  x"


# -- the feed -----------------------------------------------------------------------------------

def snapshot(root: Path, wid: str, held: bool = True, **fields: Any) -> None:
    (root / "state").mkdir(parents=True, exist_ok=True)
    snap = {"schema": 1, "id": wid, "label": wid, "kind": "file", "source": f"/l/{wid}.log",
            "status": "running", "runnerPid": os.getpid(), "startedAt": "2026-05-17T06:00:00.000Z",
            "linesRead": 10, "matchCount": 2, "lastMatchAt": None, **fields}
    (root / "state" / f"{wid}.status.json").write_text(json.dumps(snap))
    if held:
        hold_runner_lock(root)  # its runner (this process) is live


def fixed(reply: dict[str, Any]) -> feed_mod.Control:
    def control(path: Path, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        assert payload == {"cmd": "status"}
        return reply
    return control


def test_with_a_live_runner_an_earlier_runners_snapshots_are_no_rows(tmp_path: Path) -> None:
    """helper-91's F13: after a runner restarted with a smaller config, the screen listed the
    earlier runner's watchers `stopped` (`watchrun list` shows the live runner's), and `d`
    said "cleared 0 watchers" as their rows went."""
    snapshot(tmp_path, "calm")
    snapshot(tmp_path, "old", runnerPid=2**22 + 1)  # (its runner holds no lock: gone)
    live = {"ok": True, "state": "running", "watchers": ["calm"]}
    assert [r.id for r in Feed(tmp_path, control=fixed(live)).poll().rows] == ["calm"]
    read_only = Feed(tmp_path).poll()  # (no socket: every snapshot, as `list` shows them)
    assert not read_only.live
    assert [(r.id, r.status) for r in read_only.rows] == [("calm", "running"), ("old", "stopped")]


def test_a_long_id_is_cut_to_its_column() -> None:
    """helper-91's F14: at 80 columns one 64-character id pushed STATUS and the counts off."""
    wid = "a" + "b" * 63
    cells = row_cells(Row("file", wid, "running", 1, 0, None), 0, NOW)
    assert cells[1] == "a" + "b" * 30 + "…" and cells[2] == "running"


def test_rows_from_snapshots_with_the_live_runners_word(tmp_path: Path) -> None:
    snapshot(tmp_path, "app", runnerPid=os.getpid())  # alive: it says running
    snapshot(tmp_path, "gone")
    snapshot(tmp_path, "done", kind="command", source=["make", "test"], label="make test",
             status="exited")
    reply = {"ok": True, "state": "running", "watchers": ["app", "done", "added"]}
    snap = Feed(tmp_path, control=fixed(reply)).poll()
    assert snap.live and snap.note == "runner running"
    assert [(r.id, r.status, r.kind) for r in snap.rows] == [
        ("app", "running", "file"), ("done", "exited", "command"),
        ("gone", "stopped", "file"),  # the live runner does not run it any more
        ("added", "starting", "?"),  # the runner runs it; no snapshot yet
    ]
    assert snap.rows[1].detail == "make test"


def test_a_watcher_being_stopped_is_stopping_not_stopped(tmp_path: Path) -> None:
    """helper-91's F6: the runner's `status` lists a watcher waiting out its stopTimeout under
    `stopping`, not `watchers`; the feed made it `stopped` (offered to `d`, off the chip)."""
    snapshot(tmp_path, "stubborn", status="stopping")
    reply = {"ok": True, "state": "running", "watchers": [], "stopping": ["stubborn"]}
    assert [(r.id, r.status) for r in Feed(tmp_path, control=fixed(reply)).poll().rows] == [
        ("stubborn", "stopping")]


def test_copied_or_disguised_snapshots_make_no_second_row(tmp_path: Path) -> None:
    """helper-91's F1: `cp state/a.status.json state/a-old.status.json` gave two rows keyed
    `watcher:a` (Textual's DuplicateKey ended the screen), and a snapshot saying `kind: agent`
    took the key of the agent's row."""
    snapshot(tmp_path, "a")
    (tmp_path / "state" / "a-old.status.json").write_bytes(
        (tmp_path / "state" / "a.status.json").read_bytes())
    snapshot(tmp_path, "triage", kind="agent")
    log = AgentLog(tmp_path, "triage")
    log.emit("status", status="idle")
    log.close()
    reply = {"ok": True, "state": "running", "watchers": ["a", "triage"]}
    rows = Feed(tmp_path, control=fixed(reply)).poll().rows
    assert [(r.kind, r.id, r.status) for r in rows] == [
        ("?", "a-old", "unreadable"),  # the copy: under its file's name, as `list` shows it
        ("file", "a", "running"), ("?", "triage", "running"), ("agent", "triage", "idle")]


@pytest.mark.parametrize(("problems", "dropped", "note"), [
    ([], 0, "runner running"),
    (["app: the stop record could not be written"], 0,
     "runner running · 1 problem, the newest: app: the stop record could not be written"),
    (["reload failed: one", "reload failed: two\x1b[2J"], 3,
     "runner running · 5 problems, the newest: reload failed: two"),  # the escape dropped
    ([], 2, "runner running · 2 problems (no longer listed: see the log)"),  # (an IndexError)
])
def test_the_runners_problems_are_in_the_header(tmp_path: Path, problems: list[str],
                                                 dropped: int, note: str) -> None:
    """A runner that survived problems said so only in its log and the control socket's
    `status`: the header now says how many and the newest (made inert: a terminal escape
    in it is dropped)."""
    reply = {"ok": True, "state": "running", "watchers": [], "problems": problems,
             "problemsDropped": dropped}
    assert Feed(tmp_path, control=fixed(reply)).poll().note == note


def test_no_runner_is_read_only_and_says_why(tmp_path: Path) -> None:
    # no such process, nothing holds control.lock: the runner is gone
    snapshot(tmp_path, "app", held=False, runnerPid=2**22 + 1)
    snap = Feed(tmp_path).poll()
    assert not snap.live
    assert snap.note.startswith("read-only: no live runner on ")
    assert [(r.id, r.status) for r in snap.rows] == [("app", "stopped")]
    ok, message = Feed(tmp_path).stop("app")
    assert not ok and "no live runner" in message and "watchrun run" in message


class FakeRunner:
    """A real control.sock whose peer answers `reply` to each request (None: never answers)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.reply: bytes | None = None
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(root / "control.sock"))
        self.server.listen(4)
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.conns.append(conn)
            if self.reply is not None:
                conn.recv(65536)
                conn.sendall(self.reply)

    def close(self) -> None:
        self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()
        self.thread.join(5)
        for c in self.conns:
            c.close()


def test_a_stale_socket_of_a_killed_runner_is_read_only(tmp_path: Path) -> None:
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(tmp_path / "control.sock"))  # bound, never listening: connect is refused
    try:
        snap = Feed(tmp_path, control=request).poll()
    finally:
        stale.close()
    assert not snap.live and snap.note.endswith("(Connection refused)")
    assert Feed(tmp_path).clear() == (False, f"{snap.note.removeprefix('read-only: ')}; is "
                                             "`watchrun run` running with this output dir?")


@pytest.fixture
def fake_runner(tmp_path: Path) -> Iterator[FakeRunner]:
    runner = FakeRunner(tmp_path)
    yield runner
    runner.close()


def test_a_runner_that_does_not_answer_makes_the_view_read_only(
        fake_runner: FakeRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(feed_mod, "POLL_TIMEOUT_S", 0.3)
    snap = Feed(fake_runner.root, control=request).poll()
    assert not snap.live and snap.note.startswith("read-only: timed out (on ")


def test_a_garbled_reply_makes_the_view_read_only(fake_runner: FakeRunner) -> None:
    fake_runner.reply = b"\x1b[2J not json\n"
    snap = Feed(fake_runner.root, control=request).poll()
    assert not snap.live and snap.note.startswith("read-only: ")
    assert "\x1b" not in snap.note


def test_agent_rows_are_read_incrementally(tmp_path: Path) -> None:
    log = AgentLog(tmp_path, "triage")
    d1 = log.queue("app", ["ERROR one", "ERROR two"])
    log.turn("look", [claude_init()], trigger="wake", deliveries=(d1,))
    feed = Feed(tmp_path, {"triage": "claude", "idle-one": "codex"}, control=fixed({"ok": False}))
    rows = {r.id: r for r in feed.poll().rows}
    assert rows["triage"].status == "idle" and rows["triage"].matches == 2
    assert rows["triage"].last_match is not None
    assert rows["triage"].detail.startswith("claude · 1 turn(s)")
    assert (rows["idle-one"].status, rows["idle-one"].matches) == ("idle", 0)  # never ran
    log.queue("app", ["ERROR three"])
    log.turn("again", [claude_init()], finish=False)
    rows = {r.id: r for r in feed.poll().rows}
    assert rows["triage"].status == "running" and rows["triage"].matches == 3
    assert "2 turn(s)" in rows["triage"].detail
    log.close()
    got = feed.transcript("triage", None)
    assert got is not None
    seq, text = got
    assert seq == log.sink.next_seq - 1 and "look" in text and "again" in text
    assert feed.transcript("triage", seq) is None  # nothing new: nothing read again


def test_an_agent_whose_writer_is_gone_mid_turn_is_interrupted(tmp_path: Path) -> None:
    """Read-only, the screen said `running` for ever for an agent whose `agent run` was
    SIGKILLed mid-turn; with nobody holding its lock it is `interrupted`."""
    log = AgentLog(tmp_path, "triage")
    log.turn("look", [claude_init()], finish=False)
    lock = tmp_path / "state" / "agents-triage.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    feed = Feed(tmp_path, {"triage": "claude"}, control=fixed({"ok": False}))
    with open(lock, "w") as held:  # the writer, alive
        fcntl.flock(held, fcntl.LOCK_EX)
        assert feed.poll().rows[0].status == "running"
    assert feed.poll().rows[0].status == "interrupted"  # (closed: the kernel let it go)
    log.close()


def test_an_agent_stream_that_started_over_is_read_again(tmp_path: Path) -> None:
    log = AgentLog(tmp_path, "triage")
    for line in ("a", "b", "c"):
        log.queue(f"w-{line}", [line])
    log.close()
    feed = Feed(tmp_path, control=fixed({"ok": False}))
    assert feed.poll().rows[0].matches == 3
    (tmp_path / "agents" / "triage.jsonl").unlink()
    log = AgentLog(tmp_path, "triage")
    log.queue("app", ["z"])
    log.close()
    assert feed.poll().rows[0].matches == 1
