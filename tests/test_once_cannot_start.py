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


def test_every_spawn_failure_is_said_as_such_whatever_its_errno(tmp_path: Path) -> None:
    """README "Exit 3 names its cause": a command exec(2) refuses with any errno (here ELOOP and
    ENAMETOOLONG, which a fixed list of errnos once missed) is "the command could not be
    started: <why>" in the verdict, `--json` and JUnit, never "the run was interrupted"."""
    (tmp_path / "loop2").symlink_to("loop1")
    (tmp_path / "loop1").symlink_to("loop2")
    doc = {"watchers": [
        {"id": "loop", "command": ["./loop1"], "pattern": "x", "gate": {"maxMatches": 0}},
        {"id": "long", "command": ["./" + "a" * 300], "pattern": "x", "gate": {"maxMatches": 0}}]}
    junit = tmp_path / "j.xml"
    run = once(tmp_path, doc, "--junit", str(junit))
    assert run.rc == 3, run.out + run.err
    for wid, name in (("loop", "ELOOP"), ("long", "ENAMETOOLONG")):
        assert table_row(run.out, wid)[-1] == "ERROR"
        error = ET.parse(junit).getroot().find(f"testcase[@name='{wid}']/error")
        assert error is not None
        message = error.get("message") or ""
        assert message.startswith("the command could not be started: cannot start"), message
        assert f"({name})" in message and "interrupted" not in message
    assert "interrupted" not in run.out + run.err
    doc_json = json.loads(once(tmp_path, doc, "--json").out)
    reasons = {v["id"]: v["reasons"] for v in doc_json["verdicts"]}
    assert reasons["loop"][0].startswith("the command could not be started: ")
    assert "(ELOOP)" in reasons["loop"][0] and "(ENAMETOOLONG)" in reasons["long"][0]
    assert doc_json["interrupted"] is None
    assert [v["errorKind"] for v in doc_json["verdicts"]] == ["not-run", "not-run"]


def test_a_start_that_fails_after_an_ungated_watcher_names_its_cause_for_every_watcher(
        tmp_path: Path) -> None:
    """A start that fails at watcher b (its JSONL is a directory) after ungated a was built:
    every watcher is an ERROR naming that cause, in the table, `--json` and JUnit (the cause
    was in no report, and only a was listed, "stopped before it": `1 watcher could not run`)."""
    out = tmp_path / "out"
    (out / "watchers" / "b.jsonl").mkdir(parents=True)
    for wid in "abc":
        (tmp_path / f"{wid}.log").write_text("x\n")
    doc = {"output": {"dir": str(out)}, "watchers": [
        {"id": wid, "path": str(tmp_path / f"{wid}.log"), "pattern": "ERROR"} for wid in "abc"]}
    cause = f"could not start: watcher b: EPERM: cannot open {out}/watchers/b.jsonl"
    junit = tmp_path / "report.xml"
    run = once(tmp_path, doc, "--junit", str(junit))
    assert run.rc == 3, run.err
    assert [table_row(run.out, wid)[-1] for wid in "abc"] == ["ERROR"] * 3
    assert run.out.count(f"it never ran: {cause}") == 3, run.out
    assert "watchrun: FAILED: 3 watchers could not run" in run.out
    assert run.err.count("EPERM") == 1, run.err  # the log says it once, not once a watcher
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    assert [c.get("name") for c in cases] == ["a", "b", "c"]
    for case in cases:
        error = case.find("error")
        assert error is not None and cause in error.get("message", ""), ET.tostring(case)
    doc_json = json.loads(once(tmp_path, doc, "--json").out)
    assert (doc_json["passed"], doc_json["errors"]) == (False, 3)
    assert all(cause in v["reasons"][0] for v in doc_json["verdicts"])
