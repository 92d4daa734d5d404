"""A once run that cannot start still answers as docs/cli.md and the README promise: `--json`
prints one object (the config's errors, or the verdicts), and an output dir it must not use
gives every gate an ERROR verdict, in the table, the JSON document and the JUnit file."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from test_once import once, table_row

NOBODY = 65534


def config(folder: Path, out: Path) -> dict[str, Any]:
    (folder / "app.log").write_text("")
    return {"output": {"dir": str(out)}, "watchers": [
        {"id": "app", "path": str(folder / "app.log"), "pattern": "ERROR",
         "gate": {"maxMatches": 0}}]}


def test_an_invalid_config_with_json_prints_its_errors_as_the_document(tmp_path: Path) -> None:
    doc = config(tmp_path, tmp_path / "out")
    doc["watchers"][0]["pattern"] = "("
    run = once(tmp_path, doc, "--json")
    assert run.rc == 2, run.err
    error = json.loads(run.out)["error"]
    assert error["code"] == "config_invalid"
    (diagnostic,) = error["diagnostics"]
    assert (diagnostic["path"], diagnostic["file"]) == (
        "watchers[0].pattern", str(tmp_path / "watch.yaml"))


@pytest.fixture
def foreign_out(tmp_path: Path) -> Path:
    """An output dir of another user, which a runner refuses (its owner could plant links)."""
    if os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    out = tmp_path / "out"
    out.mkdir()
    os.chown(out, NOBODY, NOBODY)
    return out


def test_an_unusable_output_dir_fails_every_gate_in_the_table_and_junit(
        tmp_path: Path, foreign_out: Path) -> None:
    junit = tmp_path / "report.xml"
    run = once(tmp_path, config(tmp_path, foreign_out), "--junit", str(junit))
    assert run.rc == 3, run.err
    assert table_row(run.out, "app")[-1] == "ERROR"
    assert f"it never ran: output dir: {foreign_out}: EPERM" in run.out
    (case,) = ET.parse(junit).getroot().iter("testcase")
    error = case.find("error")
    assert error is not None and "it never ran: output dir" in error.get("message", "")
    assert not list(foreign_out.iterdir())  # nothing was written in it


def test_an_unusable_output_dir_with_json_prints_the_verdicts(
        tmp_path: Path, foreign_out: Path) -> None:
    run = once(tmp_path, config(tmp_path, foreign_out), "--json")
    assert run.rc == 3, run.err
    doc = json.loads(run.out)
    assert (doc["passed"], doc["errors"]) == (False, 1)
    (verdict,) = doc["verdicts"]
    assert verdict["status"] == "error" and "it never ran: output dir" in verdict["reasons"][0]
