"""The remedies docs/config.md gives for a program that buffers its output on a pipe work: a
match arrives while the program still runs."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from liverunner import LiveRunner, wait_for, write_config

PYTHON = [sys.executable, "-c", "import time; print('ERROR seen'); time.sleep(600)"]
"""Prints a match and runs on: block-buffered on a pipe, the line would wait for its exit."""
SED = "(echo 'ERROR seen'; sleep 600) | {}sed s/x/y/"
"""sed's C stdio buffers its output on a pipe the same way."""


@pytest.mark.parametrize("how", ["python-unbuffered", "stdbuf"])
def test_a_buffering_program_is_matched_while_it_runs(tmp_path: Path, how: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)  # the remedy only where it is set
    watcher: dict[str, Any] = {"id": "app", "pattern": "ERROR"}
    if how == "python-unbuffered":
        watcher |= {"command": PYTHON, "env": {"PYTHONUNBUFFERED": "1"}}
    else:
        if shutil.which("stdbuf") is None or shutil.which("sed") is None:
            pytest.skip("no stdbuf or sed (coreutils) here")
        watcher["command"] = SED.format("stdbuf -oL ")
    r = LiveRunner(write_config(tmp_path, {"watchers": [watcher]}))
    try:
        wait_for(lambda: r.matches("app"), "the match, with the program still running")
        assert [m["line"] for m in r.matches("app")] == ["ERROR seen"]
        assert not [x for x in r.records("app") if x["kind"] == "exit"]  # it is still running
    finally:
        assert r.stop() == 0


def test_a_progress_bar_is_one_line_matched_at_its_newline(tmp_path: Path) -> None:
    """docs/config.md: a line redrawn with `\\r` is one line, matched once when its newline
    comes (not at each redraw), and its record keeps the last segment drawn."""
    go = tmp_path / "go"
    script = ("import os, sys, time; w = sys.stdout.write; w('copy ERROR 10%\\rcopy ERROR 50%'); "
              f"sys.stdout.flush()\nwhile not os.path.exists({str(go)!r}): time.sleep(0.01)\n"
              "w('\\rcopy ERROR 100%\\n'); sys.stdout.flush(); time.sleep(600)")
    r = LiveRunner(write_config(tmp_path, {"watchers": [
        {"id": "app", "command": [sys.executable, "-c", script], "pattern": "ERROR"}]}))
    try:
        wait_for(lambda: [x for x in r.records("app") if x["kind"] == "start"], "the start")
        go.touch()
        wait_for(lambda: r.matches("app"), "the match at the newline")
        assert [m["line"] for m in r.matches("app")] == ["copy ERROR 100%"]
    finally:
        assert r.stop() == 0
    assert len(r.matches("app")) == 1
