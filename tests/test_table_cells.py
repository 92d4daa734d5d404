"""The tables (`list`, `agent list`, the MCP tool's list) stay aligned past wide characters (CJK,
emoji: two terminal cells), combining marks (none) and, on a terminal whose encoding lacks a
character, its `\\uXXXX` escape: they pad and cut by the cells a value takes on the screen, as
`kubectl` and `docker ps` do, not by its characters (docs/cli.md: "a table's columns stay
aligned")."""

from __future__ import annotations

import codecs
import unicodedata
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from liverunner import cli
from test_once import base_env, once

from watchrun.cli.stdio import ESCAPE, json_escape
from watchrun.views.cells import cells, fit, pad
from watchrun.views.render import render_list
from watchrun.views.watchers import list_table

NOW = datetime(2026, 5, 16, 12, tzinfo=UTC)
SOURCES = ["/logs/日本語ログ/サーバー.log", "/logs/e\u0301cole.log", "/logs/emoji🔥.log",
           "/logs/plain.log", "/logs/\uff46\uff55\uff4c\uff4c.log", "/logs/\u1100\u1161\u11a8.log"]


def screen(text: str) -> int:
    """The cells a UTF-8 terminal gives `text` (the test's own model: wide and fullwidth take
    two, a combining mark or a conjoining Hangul vowel or final none)."""
    return sum(0 if unicodedata.combining(c) or "\u1160" <= c <= "\u11ff" else
               2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in text)


def printed(text: str, encoding: str) -> str:
    """`text` as a stream of `encoding` writes it (watchrun's `\\uXXXX` for what it lacks)."""
    codecs.register_error(ESCAPE, json_escape)
    return text.encode(encoding, ESCAPE).decode(encoding)


@pytest.mark.parametrize(("text", "encoding", "taken"), [
    ("plain.log", None, 9),
    ("日本語", None, 6),
    ("e\u0301cole", None, 5),  # (e and a combining acute: one cell)
    ("emoji🔥", None, 7),
    ("\uff46\uff55\uff4c\uff4c", None, 8),  # (fullwidth forms)
    ("\u1100\u1161\u11a8", None, 2),  # (a Hangul syllable of conjoining jamo)
    ("…", None, 1),
    ("é", "ascii", 6),  # (shown as \u00e9)
    ("🔥", "ascii", 12),  # (shown as \ud83d\udd25)
    ("é日", "latin-1", 7),  # (é as itself, 日 as \u65e5)
])
def test_cells_counts_what_a_terminal_shows(text: str, encoding: str | None, taken: int) -> None:
    assert cells(text, encoding) == taken


@pytest.mark.parametrize(("text", "limit", "shown"), [
    ("abc", 3, "abc"),
    ("日本語ログ", 10, "日本語ログ"),
    ("日本語ログ", 9, "日本語ロ…"),
    ("日本語ログ", 6, "日本…"),  # (語 does not fit in the one cell left: 5 of 6)
    ("ab日", 3, "ab…"),
    ("e\u0301cole", 4, "e\u0301co…"),  # (the mark stays with its e)
    ("abcde\u0301f", 5, "abcd…"),  # (the e goes, and its mark with it)
    ("abc", 0, "…"),
])
def test_fit_cuts_by_cells(text: str, limit: int, shown: str) -> None:
    assert fit(text, limit) == shown
    assert cells(fit(text, limit)) <= max(limit, 1)


def test_pad_fills_to_cells() -> None:
    assert pad("日本", 6) == "日本  " and pad("e\u0301", 3) == "e\u0301  "


def statuses(sources: list[str]) -> list[dict[str, Any]]:
    return [{"id": f"w{n}", "status": "running", "kind": "file", "source": src,
             "matchCount": 1, "linesRead": 2, "lastError": "-"} for n, src in enumerate(sources)]


def test_list_columns_line_up_on_a_utf8_terminal() -> None:
    rows = list_table(statuses(SOURCES), NOW).splitlines()[1:]
    assert [ln.split()[-2] for ln in rows] == SOURCES  # (shown whole)
    assert {screen(ln) for ln in rows} == {screen(rows[-1])}  # (each row: the same cells)


def test_list_columns_line_up_where_the_encoding_escapes() -> None:
    table = list_table(statuses(SOURCES), NOW, encoding="ascii")
    rows = [printed(ln, "ascii") for ln in table.splitlines()[1:]]
    assert rows[0].split()[-2].startswith("/logs/\\u65e5\\u672c")
    assert {len(ln) for ln in rows} == {len(rows[-1])}


def test_a_long_source_or_error_is_cut_by_cells() -> None:
    long = "/logs/" + "日本語" * 20 + ".log"
    row = list_table(statuses([long, "/x.log"]), NOW).splitlines()[1]
    shown = row.split()[-2]
    assert shown == "/logs/" + ("日本語" * 7)[:20] + "…" and screen(shown) == 47  # (one short)
    error = {**statuses(["/x.log"])[0], "lastError": "ファイルが見つかりません" * 5}
    assert screen(list_table([error], NOW).splitlines()[1].split()[-1]) == 59


def test_agent_list_cuts_the_last_reply_to_60_cells() -> None:
    row = {"name": "triage", "provider": "claude", "status": "idle", "turns": 1, "tokens": 9,
           "lastReply": "答え" * 40, "lastTurn": "done", "lastError": None,
           "lastActivity": None}
    shown = render_list([row], NOW).splitlines()[1].split()[-1]
    assert shown == "答え" * 14 + "答…" and screen(shown) == 59
    shown = printed(render_list([row], NOW, encoding="ascii").splitlines()[1], "ascii")
    assert shown.split()[-1] == "\\u7b54\\u3048" * 4 + "\\u7b54\\u2026"  # (60 printed)


def test_watchrun_list_lines_up_on_each_terminal(tmp_path: Path) -> None:
    words = ["日本語ログ", "e\u0301cole", "emoji🔥", "plain"]  # (a command's words: its SOURCE)
    config = {"watchers": [{"id": f"w{n}", "command": ["echo", word], "pattern": "ERROR"}
                           for n, word in enumerate(words)]}
    assert once(tmp_path, config).rc == 0
    for encoding, width in (("utf-8", screen), ("ascii", len)):
        done = cli("list", "-c", tmp_path / "watch.yaml", cwd=tmp_path,
                   env=base_env(PYTHONIOENCODING=encoding, NO_COLOR="1"))
        assert done.returncode == 0, done.stderr
        rows = done.stdout.splitlines()[1:]
        assert all(printed(word, encoding) in ln for ln, word in zip(rows, words, strict=True))
        assert {width(ln) for ln in rows} == {width(rows[0])}, (encoding, done.stdout)
