"""`watchrun top` as a command: its README key list is the screen's bindings, its screenshot is
committed, it needs a terminal and Textual, and no other command imports Textual."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest
from liverunner import (
    DEADLINE_S,
    LiveRunner,
    cli,
    modules_after_commands,
    wait_for,
    watchrun_bin,
    write_config,
)
from textual.binding import Binding

from watchrun.cli.top import cmd_top
from watchrun.tui.app import COLUMNS, ListScreen
from watchrun.tui.screens import ConfirmScreen, PaneScreen

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
SCREENS = {"list": ListScreen, "pane": PaneScreen, "confirm": ConfirmScreen}


def section() -> str:
    return README.split("## The live screen: `watchrun top`", 1)[1].split("\n## ", 1)[0]


def test_the_readme_key_list_is_the_screens_bindings() -> None:
    rows = re.findall(r"^\| ((?:`[^`]+` ?)+) \| (\w+) \| ([^|]+) \|$", section(), flags=re.M)
    readme = {(screen, ",".join(re.findall(r"`([^`]+)`", keys)), does.strip())
              for keys, screen, does in rows}
    bound = set()
    for name, screen in SCREENS.items():
        for b in screen.BINDINGS:
            assert isinstance(b, Binding)
            bound.add((name, b.key, b.description))
    assert readme == bound
    assert len(rows) == len(readme)  # no key listed twice


def test_the_readme_shows_the_committed_screenshot() -> None:
    assert "](docs/top.svg)" in section()
    svg = (ROOT / "docs" / "top.svg").read_text(encoding="utf-8")
    text = svg.replace("&#160;", " ")
    assert svg.lstrip().startswith("<svg") and "watchrun top" in text
    for column in COLUMNS:
        assert column in text
    assert "⊚" in text and "! " in text


def test_without_a_terminal_it_points_to_list(tmp_path: Path) -> None:
    done = cli("top", "--output-dir", tmp_path)
    assert done.returncode == 2
    assert done.stderr == ("watchrun: error: `watchrun top` needs a terminal; `watchrun list` "
                           "prints the same rows\n")


def test_without_textual_it_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    for name in [m for m in sys.modules if m == "textual" or m.startswith("watchrun.tui.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "textual", None)  # import textual fails as if missing
    args = argparse.Namespace(config=None, output_dir=tmp_path)
    assert cmd_top(args) == 3
    assert capsys.readouterr().err == ("watchrun: error: `watchrun top` needs Textual: pip "
                                       "install 'watchrun[tui]'\n")


def test_no_other_command_imports_textual(tmp_path: Path) -> None:
    (tmp_path / "app.log").write_text("ERROR x\n")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR", "fromStart": True}]})
    loaded = [m for m in modules_after_commands(config, tmp_path)
              if m.split(".")[0] in ("textual", "rich") or m.startswith("watchrun.tui")]
    assert not loaded, loaded


def test_q_quits_at_once_while_a_stop_waits_for_a_frozen_runner(tmp_path: Path) -> None:
    """helper-91's F2: `y` to a stop, then the runner froze (SIGSTOP: it answers nothing), then
    `q`: the screen went away but `watchrun top` lived on, silent, for the rest of the stop's
    75 s (the thread waiting for the answer was joined at the end), and Ctrl-C did not help."""
    (tmp_path / "app.log").write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    runner = LiveRunner(config)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    seen = bytearray()
    top: subprocess.Popen[bytes] | None = None

    def read() -> None:
        with contextlib.suppress(OSError):  # (EIO once the terminal's last user is gone)
            while chunk := os.read(master, 65536):
                seen.extend(chunk)

    def shows(text: str) -> bool:
        return text.encode() in re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", bytes(seen))
    try:
        runner.wait_running()
        top = subprocess.Popen([watchrun_bin(), "top", "-c", str(config)], stdin=slave,
                               stdout=slave, stderr=slave, start_new_session=True,
                               env={**os.environ, "TERM": "xterm-256color"})
        os.close(slave)
        threading.Thread(target=read, daemon=True).start()
        wait_for(lambda: shows("running"), "the row of app")
        os.write(master, b"x")
        wait_for(lambda: shows("Stop watcher app?"), "the confirm")
        runner.send(signal.SIGSTOP)
        os.write(master, b"y")
        wait_for(lambda: shows("stopping app"), "the stop sent")
        os.write(master, b"q")
        asked = time.monotonic()
        assert top.wait(DEADLINE_S) == 0
        assert time.monotonic() - asked < 10, "q waited for the stop's answer"
        wait_for(lambda: shows("quit while the stop of app waited for the runner's answer; the "
                               "runner may still carry it out (`watchrun list` shows)"),
                 "the note on stderr")
    finally:
        if top is not None and top.poll() is None:
            top.kill()
        runner.send(signal.SIGCONT)
        assert runner.stop() == 0
        os.close(master)


def test_json_is_refused_before_the_command_as_after_it(tmp_path: Path) -> None:
    """helper-91's F9: `watchrun top --json` was refused but `watchrun --json top` opened the
    screen (and without a terminal said so in plain text)."""
    for argv in (["--json", "top"], ["top", "--json"], ["--json", "mcp"], ["mcp", "--json"]):
        done = cli(*argv, "--output-dir", tmp_path)
        assert done.returncode == 2, argv
        word = argv[0] if argv[0] != "--json" else argv[1]
        assert json.loads(done.stdout)["error"]["message"].startswith(
            f"watchrun: `watchrun {word}` takes no --json"), (argv, done.stdout)
