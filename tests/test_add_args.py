"""`watchrun add`'s watcher as sent to the runner: a relative `--path` or `--cwd` is taken from
where `add` runs (the runner resolves nothing against its own directory), and a command runs
there unless `--cwd` says otherwise (README, "Watchers added at runtime")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from watchrun.cli.main import parse
from watchrun.cli.watch_cmds import watcher_of


@pytest.mark.parametrize(("argv", "expected"), [
    (["--path", "logs/app.log"], {"path": "{here}/logs/app.log"}),
    (["--command", "make test"], {"command": "make test", "cwd": "{here}"}),
    (["--command", "pwd", "--cwd", "sub"], {"command": "pwd", "cwd": "{here}/sub"}),
    (["--command", "pwd", "--cwd", "/srv/app"], {"command": "pwd", "cwd": "/srv/app"}),
    (["--command", "pwd", "--cwd", "~/proj"],
     {"command": "pwd", "cwd": os.path.expanduser("~/proj")}),
])
def test_relative_paths_are_taken_from_where_add_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str],
        expected: dict[str, str]) -> None:
    monkeypatch.chdir(tmp_path)
    args = parse(["add", "w1", *argv, "--pattern", "ERROR", "--output-dir", "out"])
    sent = watcher_of(args)
    want = {k: v.format(here=tmp_path) for k, v in expected.items()}
    assert {k: sent.get(k) for k in ("path", "command", "cwd") if k in sent or k in want} == want
