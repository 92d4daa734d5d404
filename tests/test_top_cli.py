"""`watchrun top` as a command: its README key list is the screen's bindings, its screenshot is
committed, it needs a terminal and Textual, and no other command imports Textual."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest
from liverunner import DEADLINE_S, modules_after_commands, watchrun_bin, write_config
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
    done = subprocess.run([watchrun_bin(), "top", "--output-dir", str(tmp_path)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=DEADLINE_S)
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
