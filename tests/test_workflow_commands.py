"""No text watchrun prints can be obeyed as a GitHub Actions workflow command. The Actions runner
obeys `::command::` at the start of a line of a step's output (after blanks) and `##[command]`
anywhere in one; a watched log's lines reach that output through the live runner's log, the
views (`logs`, `matches`, `status`, `list`) and a once run's stderr, which are not behind the
once run's stop-commands fence (stdout and stderr are two pipes: a fence on one does not order
the other). `edge_text` shows both as escapes (`\\u003a:`, `#\\u0023[`); JSON had it already.
The runner looks for `::` after `TrimStart()`, which strips every white space .NET knows
(`DOTNET_WHITE`), a no-break or an ideographic space too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from inproc import inproc
from liverunner import LiveRunner, cli, wait_for, write_config
from test_once import base_env, once

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


DOTNET_WHITE = ("\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
                "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
"""What .NET's `Char.IsWhiteSpace` (so `string.TrimStart()`) takes for white space, as its
documentation lists it: the space, line and paragraph separators, U+0009-U+000D and U+0085."""


def obeyed(text: str) -> list[str]:
    """The lines of `text` the Actions runner would take for a workflow command (a once run's
    own aside): `##[` anywhere, `::` and a name once `TrimStart()` took its white space."""
    return [ln for ln in text.splitlines() if "##[" in ln or (
        re.match(r"::[A-Za-z]", ln.lstrip(DOTNET_WHITE)) and not OWN.fullmatch(ln))]


@pytest.mark.parametrize(("line", "shown"), [
    ("::error::x", "\\u003a:error::x"),
    ("  ::add-mask::s", "  \\u003a:add-mask::s"),
    ("a ##[error]x ##[group]", "a #\\u0023[error]x #\\u0023[group]"),
    ("x ::error::y", "x ::error::y"),  # (not at the start of a line: not a command)
    ("::1 - - GET /", "::1 - - GET /"),  # (no command name: an IPv6 address, left as it is)
    ("#\\u0023[ said", "#\\u0023[ said"),  # (shown again: the same)
    ("\u00a0::add-mask::s", "\u00a0\\u003a:add-mask::s"),  # (a no-break space)
    ("\u3000::error::x", "\u3000\\u003a:error::x"),  # (an ideographic space)
    ("\u1680\u2003\u202f\u205f::warning::x", "\u1680\u2003\u202f\u205f\\u003a:warning::x"),
    ("\t \u2000\u200a::notice::x", "\t \u2000\u200a\\u003a:notice::x"),
    ("\u2028::error::x", "\\u2028::error::x"),  # (shown as an escape: no white space left)
    ("\u200b::error::x", "\\u200b::error::x"),  # (a zero-width space: not white space to .NET)
    ("x\u00a0::error::y", "x\u00a0::error::y"),  # (not at the start of a line)
])
def test_edge_text_shows_a_workflow_command_escaped(line: str, shown: str) -> None:
    assert edge_text(line) == shown
    assert edge_text(edge_text(line)) == shown


def test_each_line_of_a_multiline_value_is_looked_at() -> None:
    assert edge_text("ok\n::error::x\n ##[group]", multiline=True) == \
        "ok\n\\u003a:error::x\n #\\u0023[group]"
    assert edge_text("ok\n\u00a0::error::x\n\u3000 ::add-mask::y", multiline=True) == \
        "ok\n\u00a0\\u003a:error::x\n\u3000 \\u003a:add-mask::y"


@given(st.text(alphabet=st.sampled_from(list(DOTNET_WHITE)), max_size=8),
       st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,12}", fullmatch=True),
       st.text(max_size=20), st.text(max_size=20), st.booleans())
def test_no_white_space_before_a_command_hides_it(space: str, word: str, before: str,
                                                  after: str, multiline: bool) -> None:
    shown = edge_text(f"{before}\n{space}::{word}::{after}", multiline=multiline)
    assert [ln for ln in shown.splitlines()
            if re.match("::[A-Za-z]", ln.lstrip(DOTNET_WHITE))] == []


@given(st.text(alphabet=st.sampled_from(list(":#[ \t\naer-\u00a0\u2003\u3000")), max_size=40),
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


def test_logs_escapes_a_command_behind_unicode_white_space(tmp_path: Path) -> None:
    lines = [" ::add-mask::space", "\u00a0::add-mask::nbsp", "\u3000::error::ideographic",
             "\u2003::warning::em", "\u1680::notice::ogham"]
    (tmp_path / "app.log").write_text("".join(f"{ln}\n" for ln in lines))
    assert once(tmp_path, {"watchers": [{"id": "app", "path": "app.log", "pattern": "::",
                                         "fromStart": True}]}).rc == 0
    done = cli("logs", "app", "-c", tmp_path / "watch.yaml", cwd=tmp_path,
               env=base_env(PYTHONIOENCODING="utf-8"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{ln[0]}\\u003a{ln[2:]}" for ln in lines]
    assert obeyed(done.stdout) == []
