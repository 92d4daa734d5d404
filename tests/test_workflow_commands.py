"""No text watchrun prints can be obeyed as a GitHub Actions workflow command. The Actions runner
obeys `::command::` at the start of a line of a step's output (after blanks) and `##[command]`
anywhere in one; a watched log's lines reach that output through the live runner's log, the
views (`logs`, `matches`, `status`, `list`) and a once run's stderr, which are not behind the
once run's stop-commands fence (stdout and stderr are two pipes: a fence on one does not order
the other). `edge_text` shows both as escapes (`\\u003a:`, `#\\u0023[`); JSON had it already."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from inproc import inproc
from liverunner import LiveRunner, wait_for, write_config
from test_once import once

from watchrun.match.sanitize import edge_text

HOSTILE = ["::error::ERROR forged one", "  ::add-mask::ERROR forged two",
           "ERROR three ##[warning]forged", "\t::warning file=a.py,line=1::ERROR forged four",
           "::1 - - ERROR an IPv6 client, shown as it is"]
CONFIG = {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR", "fromStart": True}]}
PRINTS = ["sh", "-c", "cat lines; exec sleep 1000"]  # (a command's output: `logs` shows it)
OWN = re.compile(r"::stop-commands::[0-9a-f]{32}|::[0-9a-f]{32}::|"
                 r"::(?:error|warning) (?:file=[^,:]+,line=\d+,)?title=watchrun[^:]*::.*")
"""A once run's own workflow commands: its fence, and its annotations after it (one line each,
what they quote %-escaped)."""


def obeyed(text: str) -> list[str]:
    """The lines of `text` the Actions runner would take for a workflow command (a once run's
    own aside)."""
    return [ln for ln in text.splitlines() if "##[" in ln or (
        re.match(r"[ \t]*::[A-Za-z]", ln) and not OWN.fullmatch(ln))]


@pytest.mark.parametrize(("line", "shown"), [
    ("::error::x", "\\u003a:error::x"),
    ("  ::add-mask::s", "  \\u003a:add-mask::s"),
    ("a ##[error]x ##[group]", "a #\\u0023[error]x #\\u0023[group]"),
    ("x ::error::y", "x ::error::y"),  # (not at the start of a line: not a command)
    ("::1 - - GET /", "::1 - - GET /"),  # (no command name: an IPv6 address, left as it is)
    ("#\\u0023[ said", "#\\u0023[ said"),  # (shown again: the same)
])
def test_edge_text_shows_a_workflow_command_escaped(line: str, shown: str) -> None:
    assert edge_text(line) == shown
    assert edge_text(edge_text(line)) == shown


def test_each_line_of_a_multiline_value_is_looked_at() -> None:
    assert edge_text("ok\n::error::x\n ##[group]", multiline=True) == \
        "ok\n\\u003a:error::x\n #\\u0023[group]"


@given(st.text(alphabet=st.sampled_from(list(":#[ \t\naer-")), max_size=40),
       st.booleans())
def test_nothing_edge_text_prints_is_a_workflow_command(text: str, multiline: bool) -> None:
    assert obeyed(edge_text(text, multiline=multiline)) == []


def test_no_surface_prints_a_log_line_as_a_workflow_command(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("")
    (tmp_path / "lines").write_text("".join(f"{ln}\n" for ln in HOSTILE))
    runner = LiveRunner(write_config(tmp_path, {"watchers": [
        *CONFIG["watchers"], {"id": "cmd", "command": PRINTS, "pattern": "ERROR"}]}))
    try:
        runner.wait_log("2 watchers, 0 agents running")
        log.write_text((tmp_path / "lines").read_text())
        for wid in ("app", "cmd"):
            wait_for(lambda w=wid: len(runner.matches(w)) == len(HOSTILE), f"{wid}'s matches")
        wait_for(lambda: "forged four" in inproc(tmp_path, "logs", "cmd").stdout, "its tail")
        said = {args: inproc(tmp_path, *args) for args in [
            ("logs", "cmd"), ("matches", "app"), ("matches", "cmd"), ("status", "cmd"),
            ("list",)]}
    finally:
        assert runner.stop() == 0
    for args, done in said.items():
        assert done.returncode == 0, done.stderr
        assert obeyed(done.stdout + done.stderr) == [], args
    shown = said[("logs", "cmd")].stdout  # (shown, only escaped)
    assert "\\u003a:error::ERROR forged one" in shown and "#\\u0023[warning]forged" in shown
    assert "::1 - - ERROR an IPv6 client" in shown
    assert obeyed(runner.stderr()) == []
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "app.log").write_text(log.read_text())
    gated = once(tmp_path / "ci", {"watchers": [{**CONFIG["watchers"][0], "gate": {
        "maxMatches": 0}}]}, GITHUB_ACTIONS="true")
    assert gated.rc == 1 and "forged four" in gated.out
    assert obeyed(gated.out) == [] and obeyed(gated.err) == []
