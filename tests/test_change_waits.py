"""A change (`stop`, `add`, `clear`) waits as long as the runner may rightly take: a command
that ignores SIGTERM has `limits.stopTimeout` to end (up to 60 s), and a change waits its turn
behind one ahead of it. `watchrun stop` said "the runner did not answer" (exit 3) after 30 s of
a healthy runner doing what its config says, and so did an `add` of another id waiting its
turn, which was then carried out.

The CLI's waits are lowered here (`runtime/client.py`'s ANSWER_S and CHANGE_MARGIN_S) against a
stopTimeout of 1 s, so the test takes seconds; the commands run in this process
(tests/inproc.py), the runner is a process."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from liverunner import LiveRunner, wait_for, write_config
from test_runtime_watchers import lines_of, listed, wr

from watchrun.config import load_config
from watchrun.runtime import client

STOP_S = 1.0
STUBBORN = "trap '' TERM; echo ERROR ignoring TERM; while :; do sleep 0.1; done"
"""A command that ignores SIGTERM, and so do its `sleep`s (an ignored signal stays so across
exec): the runner waits out stopTimeout, then kills it. Its match says the trap is set."""


def add_stubborn(folder: Path, r: LiveRunner, *wids: str) -> None:
    for wid in wids:
        p = wr(folder, "add", wid, "--command", STUBBORN, "--pattern", "ERROR")
        assert p.returncode == 0, p.stderr
    for wid in wids:
        wait_for(lambda w=wid: lines_of(r, w) == ["ERROR ignoring TERM"], f"{wid}'s trap set")


@contextmanager
def stopping(r: LiveRunner, wid: str) -> Iterator[None]:
    """Another client's `stop` of `wid` under way (it holds the runner's lock for changes)."""
    replies: list[dict[str, Any]] = []

    def ask() -> None:
        replies.append(r.control({"cmd": "stop", "id": wid}))

    thread = threading.Thread(target=ask)
    thread.start()
    try:
        wait_for(lambda: wid in r.control({"cmd": "status"})["stopping"], f"{wid} stopping")
        yield
    finally:
        thread.join()
    assert replies == [{"ok": True, "wasRunning": True, "message": f"stopped {wid}"}]


def test_stop_add_and_clear_behind_a_stop_wait_out_stop_timeout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "ANSWER_S", 0.5)  # (a request that waits for nothing)
    monkeypatch.setattr(client, "CHANGE_MARGIN_S", 1.0)  # a change: twice 1 s, and 1 s
    (tmp_path / "a.log").write_text("")
    r = LiveRunner(write_config(tmp_path, {"limits": {"stopTimeout": f"{STOP_S:g}s"},
                                           "watchers": []}))
    try:
        r.wait_running()
        add_stubborn(tmp_path, r, *(f"s{i}" for i in range(1, 8)))
        with stopping(r, "s1"):  # its stop, then s2's: about twice stopTimeout
            began = time.monotonic()
            p = wr(tmp_path, "stop", "s2")
            assert (p.returncode, p.stdout) == (0, "stopped s2\n"), p.stderr
            assert time.monotonic() - began >= STOP_S  # (it waited out s2's stopTimeout)
        with stopping(r, "s3"):
            p = wr(tmp_path, "add", "other", "--path", "a.log", "--pattern", "ERROR")
            assert (p.returncode, p.stdout) == (0, "started other\n"), p.stderr
        # `clear --all` stops s4 to s7 together: one by one, it took four stopTimeouts
        p = wr(tmp_path, "clear", "--all")
        assert (p.returncode, p.stdout) == (0, "cleared 8 watchers\n"), p.stderr
        assert listed(r) == {}
    finally:
        assert r.stop() == 0


def test_a_change_waits_twice_the_configs_stop_timeout_and_a_margin(tmp_path: Path) -> None:
    """docs/cli.md: 30 s; a change twice the config's stopTimeout plus 15 s, if longer; without
    a config, as for the longest stopTimeout (60 s)."""
    config = write_config(tmp_path, {"limits": {"stopTimeout": "32s"}, "watchers": []})
    loaded = load_config([config]).config
    assert loaded is not None
    assert [client.wait_s(cmd, loaded) for cmd in ("stop", "add", "clear", "status")] == [
        79.0, 79.0, 79.0, 30.0]
    assert client.wait_s("restart", None) == 135.0
    default = load_config([write_config(tmp_path, {"watchers": []})]).config
    assert default is not None and client.wait_s("start", default) == 30.0
