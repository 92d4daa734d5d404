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
