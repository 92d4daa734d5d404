"""A name is not a line: a `\\r` or backspaces in a watched path (or a command's `cwd`) drop no
part of it on any surface. The line rules (a `\\r` keeps the last segment, a backspace deletes)
showed `/tmp/x\\r/var/log/auth.log` as `/var/log/auth.log` in the log, `list`, `status`,
`matches`, `top`, `validate` and the records: another file. Real runners on real files."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from liverunner import LiveRunner, cli, read_records, wait_for, write_config

from watchrun.tui.feed import Feed
from watchrun.tui.model import Row, format_match, row_cells

CR_DIR = "x\r"
"""A directory whose `\\r` hid what came before it: `x\\r/var/log/auth.log` read as
`/var/log/auth.log`."""
BS_NAME = "real\b\b\b\bfake.log"
"""Backspaces that ate the file name's start: shown `fake.log`."""
TAB_NAME = "t\tb.log"
"""A tab, printed raw, misaligned `list`'s columns."""


@pytest.fixture
def short() -> Iterator[Path]:
    """A folder with a short path, so `list`'s SOURCE column (48 characters) shows it whole."""
    folder = Path(tempfile.mkdtemp(prefix="hn", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def _files(folder: Path) -> dict[str, Path]:
    auth = folder / CR_DIR / "var" / "log" / "auth.log"
    auth.parent.mkdir(parents=True)
    paths = {"cr": auth, "bs": folder / BS_NAME, "tab": folder / TAB_NAME}
    for path in paths.values():
        path.write_text("ERROR first\n")
    return paths


def _config(folder: Path, paths: dict[str, Path]) -> Path:
    return write_config(folder, {"watchers": [
        *({"id": wid, "path": str(p.relative_to(folder)), "pattern": "ERROR", "fromStart": True}
          for wid, p in paths.items()),
        {"id": "cmd", "command": "sleep 60", "cwd": CR_DIR, "pattern": "ERROR"}]})


def _shown(path: Path | str) -> str:
    """How every surface shows the name: each control as its escape, nothing dropped."""
    return str(path).replace("\r", "\\r").replace("\b", "\\b").replace("\t", "\\t")


def test_a_cr_or_backspace_in_a_path_hides_nothing_on_any_surface(short: Path) -> None:
    paths = _files(short)
    config = _config(short, paths)
    done = cli("validate", "-c", config, cwd=short)
    assert done.returncode == 0, done.stderr
    for wid, path in paths.items():  # before: `watcher cr   file     /var/log/auth.log`
        assert f"watcher {wid:<3}  file     {_shown(path)}" in done.stdout, done.stdout
    runner = LiveRunner(config)
    try:
        runner.wait_log("[cmd] started run 1")
        for wid, path in paths.items():
            runner.wait_log(f"[{wid}] match <dir>/{_shown(path.relative_to(short))}:1: ERROR")
        log = runner.stderr()
        for wid, path in paths.items():  # before: `[cr] following /var/log/auth.log`
            assert f"[{wid}] following {_shown(path)}\n" in log, log
        for wid, path in paths.items():  # the records: the name, its controls escaped
            want = str(path).replace("\r", "\\r").replace("\b", "\\b")  # (JSON keeps a tab)
            recs = wait_for(lambda w=wid: runner.matches(w), f"{wid}'s match")
            assert [r["path"] for r in [*runner.records(wid)[:1], *recs]] == [want, want]
        listed = cli("list", "-c", config, cwd=short).stdout
        rows = {line.split()[0]: line for line in listed.splitlines()[1:]}
        assert "\t" not in listed
        for wid, path in paths.items():  # before: SOURCE `/var/log/auth.log`, `fake.log`
            assert f"  {_shown(path)}  " in rows[wid], listed
        column = listed.splitlines()[0].index("SOURCE")
        assert {rows[w].index(str(short)) for w in paths} == {column}  # aligned, tab or not
        for wid, path in paths.items():
            status = cli("status", wid, "-c", config, cwd=short).stdout
            assert f"\nsource             {_shown(path)}\n" in status, status
            assert f"\nlabel              {_shown(path.relative_to(short))}\n" in status
            matches = cli("matches", wid, "-c", config, cwd=short).stdout
            assert f"  {_shown(path)}:1  ERROR first" in matches, matches
        status = cli("status", "cmd", "-c", config, cwd=short).stdout
        assert f"\ncwd                {_shown(short / CR_DIR)}\n" in status, status

        feed = Feed(runner.out)  # `watchrun top`: its rows and its matches pane

        def rows() -> list[Row] | None:  # (once the runner wrote their snapshots)
            found = feed.poll().rows
            return found if all(r.kind != "?" for r in found) else None
        cells = {row.id: row_cells(row, 0, 0.0)[-1] for row in wait_for(rows, "top's rows")}
        assert {w: cells[w] for w in paths} == {
            w: _shown(p.relative_to(short)) for w, p in paths.items()}
        assert format_match(runner.matches("bs")[0]).split()[1] == "real\\b\\b\\b\\bfake.log:1"
        assert format_match(runner.matches("tab")[0]).split()[1] == "t\\tb.log:1"
    finally:
        assert runner.stop() == 0


def test_the_json_log_and_a_once_verdict_show_the_whole_name(short: Path) -> None:
    paths = _files(short)
    config = write_config(short, {"watchers": [
        {"id": "cr", "path": str(paths["cr"]), "pattern": "ERROR", "fromStart": True,
         "gate": {"maxMatches": 0}}]})
    done = cli("run", "--once", "--log-format", "json", "-c", config, cwd=short)
    assert done.returncode == 1, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    start = next(x for x in lines if x["event"] == "start")
    shown = _shown(paths["cr"])  # before: `"msg": "following /var/log/auth.log"`
    assert (start["msg"], start["path"]) == (f"following {shown}", shown)
    evidence = f"    {_shown(paths['cr'].relative_to(short))}:1: ERROR first"  # (the verdict
    assert evidence in done.stdout, done.stdout  # shows a path under the working directory so)
    assert [r["path"] for r in read_records(short / ".watchrun" / "watchers" / "cr.jsonl")
            if r["kind"] == "match"] == [shown]
