"""An ERROR verdict is headed by what went wrong (could not run, could not look at every line,
was interrupted, could not finish) in the table, its footer, `--json`, JUnit and annotations."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from watchrun.cli.gate_report import annotation_lines, junit, markdown, summary_table
from watchrun.cli.verdicts import verdicts_doc
from watchrun.config.model import GateSpec, WatcherSpec
from watchrun.runtime.gate import Evidence, Trouble, Verdict, cut_note, judge, judge_all

MAX0 = GateSpec(max_matches=0)
CUT = cut_note(1, 65536)


def cmd(wid: str) -> WatcherSpec:
    return WatcherSpec(wid, wid, "ERROR", command=("make",), gate=MAX0)


def judged(spec: WatcherSpec, ev: Evidence) -> Verdict:
    v = judge(spec, ev)
    assert v is not None
    return v


def verdicts() -> list[Verdict]:
    """One of each: a command that could not start, one that ran to its exit with a line cut,
    one the run stopped, one whose records could not be written; and a file never there."""
    log = WatcherSpec("log", "log", "ERROR", path=Path("/ws/app.log"), gate=MAX0)
    return [
        judged(cmd("nostart"), Evidence(0, ran=False, error="ENOENT")),
        judged(cmd("cut"), Evidence(0, exit_code=0, cut=CUT)),
        judged(cmd("stopped"), Evidence(0, exit_code=143, interrupted=True)),
        judged(cmd("records"), Evidence(0, exit_code=0, error="its records could not be "
                                        "written (see the log)", trouble=Trouble.FAILED)),
        *judge_all([log], {}),
    ]


def test_each_error_is_headed_by_what_went_wrong_not_could_not_run() -> None:
    """Every ERROR was headed "could not run" and counted in "N watchers could not run", also
    for a command that ran to its exit with a line cut at maxLineBytes, or that the run
    stopped."""
    table = summary_table(verdicts()).split("\n\n")
    assert [part.splitlines()[0] for part in table[1:-1]] == [
        "nostart: could not run", "cut: could not look at every line",
        "stopped: was interrupted", "records: could not finish", "log: could not run"]
    assert table[-1] == ("watchrun: FAILED: 2 watchers could not run, 1 watcher could not look "
                         "at every line, 1 watcher was interrupted, 1 watcher could not finish")
    two = [judged(cmd(w), Evidence(0, exit_code=0, interrupted=True)) for w in ("a", "b")]
    assert summary_table(two).splitlines()[-1] == "watchrun: FAILED: 2 watchers were interrupted"


def test_json_junit_and_annotations_say_the_kind_of_error() -> None:
    vs = verdicts()
    doc = verdicts_doc(vs)
    assert [(v["status"], v["errorKind"]) for v in doc["verdicts"]] == [
        ("error", "not-run"), ("error", "unread"), ("error", "interrupted"),
        ("error", "failed"), ("error", "not-run")]
    passed = verdicts_doc([judged(cmd("ok"), Evidence(0, exit_code=0))])
    assert passed["verdicts"][0]["errorKind"] is None
    root = ET.fromstring(junit(vs, 1.0))
    texts = [(e.text or "").splitlines()[0] for e in root.iter("error")]
    assert texts == ["could not run", "could not look at every line", "was interrupted",
                     "could not finish", "could not run"]
    titles = [ln.split("::")[1].split("title=")[1] for ln in annotation_lines(vs)]
    assert titles == ["watchrun gate nostart (could not run)",
                      "watchrun gate cut (could not look at every line)",
                      "watchrun gate stopped (was interrupted)",
                      "watchrun gate records (could not finish)",
                      "watchrun gate log (could not run)"]
    md = markdown(vs)
    assert "**cut** (could not look at every line): 1 line was longer" in md
    assert "**stopped** (was interrupted): the command did not run to its exit" in md
