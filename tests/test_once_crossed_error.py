"""`run --once`: a gate crossed by the lines a run did read is reported crossed, with those
lines, also when the watcher could not look at every line (an ERROR beside the FAIL); and
matches count as judged only after a run that ended by itself judged them."""

from __future__ import annotations

import gzip
import json
import signal
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from liverunner import read_records, wait_for, watchrun_bin, write_config
from test_once import TIMEOUT_S, base_env, once, rotated_by_rename, table_row

from watchrun.cli.gate_report import escape_data

CONFIG: dict[str, Any] = {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR",
                                        "gate": {"maxMatches": 0}}]}
CROSSED = "1 match of /ERROR/ (at most 0 allowed)"


def _read_once(folder: Path, text: str) -> Path:
    """`app.log` holding `text`, read to its end by a once run that passed."""
    log = folder / "app.log"
    log.write_text(text)
    assert once(folder, CONFIG).rc == 0
    return log


def test_a_crossed_gate_is_not_hidden_behind_an_error(tmp_path: Path) -> None:
    """logrotate `create` + `compress` between two runs, then the app logs an ERROR in the new
    file: the archive could not be read (ERROR), and the line that was read crossed the gate.
    The verdict said only ERROR: `crossed` nowhere, the line in no report, no JUnit failure,
    no annotation; and the next run did not count it, so a re-run passed (exit 0). It then said
    the watcher "could not run": it had read the new file."""
    log = _read_once(tmp_path, "ok\n")
    with log.open("a") as f:
        f.write("written after that run, never read\n")  # (an archive of what was read is
    archive = Path(f"{log}.1.gz")  # no loss: this one holds more)
    archive.write_bytes(gzip.compress(log.read_bytes()))
    inode = log.stat().st_ino
    log.unlink()
    log.write_text("ERROR in new file\n")
    summary = tmp_path / "summary.md"
    r = once(tmp_path, CONFIG, "--junit", "j.xml", GITHUB_ACTIONS="true",
             GITHUB_WORKSPACE=str(tmp_path), GITHUB_STEP_SUMMARY=str(summary))
    assert (r.rc, table_row(r.out, "app")[1:]) == (3, ["1", "0", "-", "FAIL+ERROR"]), r.out
    unread = (f"lines were never read: {archive} is the generation being read (inode "
              f"{inode}), rotated and compressed before it was read to its end: from line 2 "
              "(offset 3) on it was not read")
    assert "\n".join(["app: gate crossed, and it could not look at every line",
                      f"  - {CROSSED}", "    app.log:1: ERROR in new file",
                      f"  - {unread}"]) in r.out, r.out
    assert "watchrun: FAILED: 1 of 1 gate crossed, 1 watcher could not look at every line" \
        in r.out
    assert "::error title=watchrun gate app (could not look at every line)::" \
        f"{escape_data(unread)}" in r.out.splitlines()
    assert f"::error file=app.log,line=1,title=watchrun gate app::{CROSSED}%0Aapp.log:1: " \
        "ERROR in new file" in r.out.splitlines()
    case = ET.parse(tmp_path / "j.xml").getroot().find("testcase[@name='app']")
    assert case is not None and [e.tag for e in case] == ["error", "failure"]
    failure, error = case.find("failure"), case.find("error")
    assert failure is not None and failure.get("message") == CROSSED
    assert failure.text == f"{CROSSED}\napp.log:1: ERROR in new file"
    assert error is not None and error.get("message") == unread
    assert error.text == f"could not look at every line\n{unread}"
    assert "| `app` | 1 | 0 | - | ❌ FAIL ⚠️ ERROR |" in summary.read_text()


def test_json_counts_a_gate_crossed_beside_an_error_and_shows_its_lines(tmp_path: Path) -> None:
    """logrotate `nocreate`: the path is missing at the run (ERROR), its rotated generation
    held the forbidden line. `--json` said `"crossed": 0` and `"first": []`."""
    log = _read_once(tmp_path, "ok\n")
    rotated_by_rename(log, "ERROR unread")
    r = once(tmp_path, CONFIG, "--json")
    doc = json.loads(r.out)
    assert (r.rc, doc["passed"], doc["crossed"], doc["errors"]) == (3, False, 1, 1), r.out
    (v,) = doc["verdicts"]
    assert (v["status"], v["crossed"], v["matches"]) == ("error", True, 1)
    assert v["reasons"] == [CROSSED, f"{log} does not exist"]  # (its `error` record)
    assert [ln["line"] for ln in v["first"]] == ["ERROR unread"]


def test_matches_of_a_once_run_a_signal_interrupted_count_in_the_next_run(
        tmp_path: Path) -> None:
    """A CI timeout or cancel sends SIGTERM (or SIGINT), not SIGKILL: the run stopped cleanly,
    wrote its `stop` records, and the retry took its matches for judged, though its verdict had
    judged only part of what it was to (exit 3): the retry passed (exit 0) over the ERROR line.
    Now they count toward the next run's gate, as a killed run's do, and are not recorded
    twice."""
    log, out = tmp_path / "app.log", tmp_path / ".watchrun"
    log.write_text("ok\nERROR early failure\nok\n")
    fired = tmp_path / "fired"
    action = {"type": "exec", "command": ["sh", "-c", f"touch {fired}; exec sleep 60"],
              "timeout": "1m"}  # (the run waits for it: still running when the signal comes)
    watcher = {"id": "app", "path": "app.log", "pattern": "ERROR", "gate": {"maxMatches": 0}}
    cfg = write_config(tmp_path, {"watchers": [{**watcher, "actions": [action]}]})
    proc = subprocess.Popen([watchrun_bin(), "run", "--once", "-c", str(cfg)], cwd=tmp_path,
                            env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        wait_for(fired.exists, "the action to run")
    finally:
        proc.send_signal(signal.SIGTERM)
        first, _ = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 3 and b"INTERRUPTED by SIGTERM" in first, first
    jsonl = out / "watchers" / "app.jsonl"
    last = read_records(jsonl)[-1]
    assert (last["kind"], last["reason"]) == ("stop", "interrupted")  # (its verdict: partial)
    retry = once(tmp_path, {"watchers": [watcher]})
    assert retry.rc == 1, retry.out + retry.err
    assert table_row(retry.out, "app")[1:] == ["1", "0", "-", "FAIL"], retry.out
    assert "app.log:2: ERROR early failure" in retry.out
    assert [r["line"] for r in read_records(jsonl) if r["kind"] == "match"] == [
        "ERROR early failure"]
    assert once(tmp_path, {"watchers": [watcher]}).rc == 0  # judged by the retry


STOPPED_LINE = ("trap 'echo ERROR: 3 tests failed before the interrupt; exit 1' TERM; touch up; "
                "sleep 1000 & wait", "ERROR: 3 tests failed before the interrupt", "1")
PARTIAL_LINE = ("printf 'ERROR partial'; touch up; exec sleep 1000", "ERROR partial", "SIGTERM")


@pytest.mark.parametrize(("command", "line", "exit_"), [STOPPED_LINE, PARTIAL_LINE],
                         ids=["printed-on-sigterm", "last-line-without-newline"])
def test_lines_a_command_printed_while_a_signal_stopped_it_cross_its_gate(
        tmp_path: Path, command: str, line: str, exit_: str) -> None:
    """A CI cancel (SIGTERM) while the build runs: what the command printed as it was stopped,
    and a last line without a newline, were echoed and recorded as matches, but the verdict
    was taken before the stop: `MATCHES 0`, not crossed, no JUnit failure, and the recorded
    exit shown as `-`. Now everything the run read up to the stop is judged."""
    cfg = write_config(tmp_path, {"limits": {"stopTimeout": "5s"}, "watchers": [
        {"id": "t", "command": command, "pattern": "ERROR",
         "gate": {"maxMatches": 0, "exitCode": True}}]})
    proc = subprocess.Popen([watchrun_bin(), "run", "--once", "-c", str(cfg), "--junit", "j.xml",
                             "--json"], cwd=tmp_path, env=base_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for((tmp_path / "up").exists, "the command to run")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 3, out
    crossed = "1 match of /ERROR/ (at most 0 allowed)"
    interrupted = "the command did not run to its exit (the run was interrupted)"
    (v,) = json.loads(out)["verdicts"]
    assert (v["status"], v["crossed"], v["matches"], v["exit"]) == ("error", True, 1, exit_)
    assert v["reasons"] == [crossed, interrupted]  # (its exit was the stop's: no crossing)
    assert [ln["line"] for ln in v["first"]] == [line]
    case = ET.parse(tmp_path / "j.xml").getroot().find("testcase[@name='t']")
    assert case is not None and [e.tag for e in case] == ["error", "failure"]
    matches = [r for r in read_records(tmp_path / ".watchrun" / "watchers" / "t.jsonl")
               if r["kind"] == "match"]
    assert [m["line"] for m in matches] == [line]
