"""`validate` under `WATCHRUN_ENGINES` says what the runner's start will say: a watcher whose
regexes no allowed engine can run, or an engine name it does not know, is an error (exit 2). It
showed `engine: re`, an engine the variable had not allowed, and "valid", for a config whose
`run` then never started (exit 3). A watcher's error is located in the file, as every other."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from inproc import inproc
from liverunner import write_config


@pytest.mark.parametrize(("engines", "watcher", "said"), [
    ("re+prefilter", {"pattern": "^\\W"},
     "error: watchers[0].pattern: no engine can run pattern '^\\\\W' (re+prefilter: no "
     "required literal of 2+ bytes); WATCHRUN_ENGINES=re+prefilter allows no other"),
    ("hyperscan", {"pattern": "(a)\\1", "backtracking": True},
     "error: watchers[0].pattern: no engine can run pattern '(a)\\\\1' (hyperscan: "),
    ("re+prefilter", {"pattern": "ERROR", "gate": {"require": "^\\W"}},
     "error: watchers[0].gate.require: no engine can run pattern '^\\\\W' (re+prefilter: "),
    ("pcre", {"pattern": "ERROR"},
     "error: WATCHRUN_ENGINES names unknown engines ['pcre']: use hyperscan, re2, "
     "re+prefilter, re"),
])
def test_a_pattern_no_allowed_engine_runs_is_invalid_as_the_start_refuses_it(
        tmp_path: Path, engines: str, watcher: dict[str, object], said: str) -> None:
    (tmp_path / "a.log").write_text("ok\n")
    write_config(tmp_path, {"watchers": [{"id": "w", "path": "a.log", **watcher}]})
    env = {**os.environ, "WATCHRUN_ENGINES": engines}
    checked = inproc(tmp_path, "validate", env=env)
    assert checked.returncode == 2, checked.stdout
    assert said in checked.stdout and "invalid — 1 error" in checked.stdout
    assert "engine: re" not in checked.stdout
    ran = inproc(tmp_path, "run", "--once", env=env)
    assert ran.returncode == 3 and "it never ran" in ran.stdout + ran.stderr


def test_an_allowed_engine_is_the_one_shown(tmp_path: Path) -> None:
    write_config(tmp_path, {"watchers": [{"id": "w", "path": "a.log", "pattern": "ERROR"}]})
    for engines in ("re", "re2", "re+prefilter"):
        shown = inproc(tmp_path, "validate", env={**os.environ, "WATCHRUN_ENGINES": engines})
        assert shown.returncode == 0 and f"engine: {engines}\n" in shown.stdout, shown.stdout


def test_the_error_names_where_the_pattern_is_written(tmp_path: Path) -> None:
    (tmp_path / "watch.yaml").write_text(
        "watchers:\n  - id: w\n    path: a.log\n    gate: {require: '^\\W'}\n"
        "    pattern: ERROR\n")
    env = {**os.environ, "WATCHRUN_ENGINES": "re+prefilter"}
    text = inproc(tmp_path, "validate", env=env)
    assert text.returncode == 2
    assert "watch.yaml:4:12: error: watchers[0].gate.require: no engine can run" in text.stdout
    doc = json.loads(inproc(tmp_path, "validate", "--format", "json", env=env).stdout)
    assert [(d["path"], d["line"], d["column"]) for d in doc["diagnostics"]] == [
        ("watchers[0].gate.require", 4, 12)]
