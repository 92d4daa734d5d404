"""CI gate verdicts, the summary table, GitHub annotations, the step summary and JUnit (pure)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from watchrun.cli.gate_report import (
    MAX_ANNOTATIONS,
    StopCommands,
    annotation_lines,
    escape_data,
    escape_property,
    in_github_actions,
    junit,
    markdown,
    relativize,
    summary_table,
)
from watchrun.cli.verdicts import verdicts_doc
from watchrun.config.model import GateSpec, WatcherSpec
from watchrun.runtime.gate import (
    NEVER_RAN,
    Evidence,
    Line,
    Status,
    Verdict,
    judge,
    judge_all,
)

LOG = "/ws/build/app.log"


def cmd(gate: GateSpec | None, command: str | tuple[str, ...] = ("make",)) -> WatcherSpec:
    return WatcherSpec("build", "build", "warn", command=command, gate=gate)


def file(gate: GateSpec | None) -> WatcherSpec:
    return WatcherSpec("log", LOG, "ERROR", path=Path(LOG), gate=gate)


INTERRUPTED = "the command did not run to its exit (the run was interrupted)"
NOT_FOUND = "for a command not found): it may never have run"
KILLED = ("the command was killed by SIGKILL: its output may be incomplete (what it would "
          "still have printed was never seen)")
MAX0 = GateSpec(max_matches=0)
EXIT = GateSpec(exit_code=True)
REQ = GateSpec(require="tests passed")


@pytest.mark.parametrize(
    ("spec", "ev", "status", "reasons"),
    [
        (cmd(None), Evidence(3, exit_code=1), None, []),
        (cmd(MAX0), Evidence(0, exit_code=0), Status.PASS, []),
        (cmd(MAX0), Evidence(1, [("run 1:2", "warn: x")], exit_code=0), Status.FAIL,
         ["1 match of /warn/ (at most 0 allowed)"]),
        (cmd(GateSpec(max_matches=2)), Evidence(2, exit_code=0), Status.PASS, []),
        (cmd(GateSpec(max_matches=2)), Evidence(3, exit_code=0), Status.FAIL,
         ["3 matches of /warn/ (at most 2 allowed)"]),
        (cmd(EXIT), Evidence(0, exit_code=0), Status.PASS, []),
        (cmd(EXIT), Evidence(0, exit_code=1), Status.FAIL, ["the command exited with code 1"]),
        (cmd(EXIT), Evidence(0, exit_code=None, signal="SIGKILL"), Status.FAIL,
         ["the command was killed by SIGKILL"]),
        # 126/127: it may never have run, an ERROR whatever the gate (a maxMatches gate passed)
        (cmd(EXIT, "nosuch --flag"), Evidence(0, exit_code=127), Status.ERROR,
         [f"the command exited with code 127 (the shell's code {NOT_FOUND}"]),
        (cmd(MAX0, "nosuch --flag"), Evidence(0, exit_code=127), Status.ERROR,
         [f"the command exited with code 127 (the shell's code {NOT_FOUND}"]),
        (cmd(REQ, "echo found; exit 126"), Evidence(0, exit_code=126), Status.ERROR,
         ["the command exited with code 126 (the shell's code for a program found but not "
          "executable): it may never have run"]),
        (cmd(None, "nosuch"), Evidence(0, exit_code=127), Status.ERROR,
         [f"the command exited with code 127 (the shell's code {NOT_FOUND}"]),
        (cmd(MAX0, ("./s.sh",)), Evidence(0, exit_code=127), Status.ERROR,
         ["the command exited with code 127 (the code a shell or `#!/usr/bin/env` exits with "
          f"{NOT_FOUND}"]),
        (cmd(MAX0), Evidence(1, [("run 1:1", "warn: x")], exit_code=127), Status.ERROR,
         ["1 match of /warn/ (at most 0 allowed)", "the command exited with code 127 (the code "
          f"a shell or `#!/usr/bin/env` exits with {NOT_FOUND}"]),  # crossed too
        # killed by a signal it did not get from the runner: its output may be incomplete
        (cmd(MAX0), Evidence(0, signal="SIGKILL"), Status.ERROR, [KILLED]),
        (cmd(REQ), Evidence(0, signal="SIGKILL", require_seen=True), Status.ERROR, [KILLED]),
        (cmd(MAX0), Evidence(0, signal="SIGKILL", signal_sent=True), Status.PASS, []),
        (cmd(MAX0), Evidence(0, signal="SIGTERM", interrupted=True), Status.ERROR,
         [INTERRUPTED]),
        (cmd(None), Evidence(0, signal="SIGSEGV"), None, []),  # no gate: nothing judged
        # a string command's shell says its program's death as 128+N (dash, even for one)
        (cmd(MAX0, "make test"), Evidence(0, exit_code=137), Status.ERROR,
         ["the command exited with code 137 (the shell's code for a program killed by "
          "SIGKILL): its output may be incomplete (what it would still have printed was never "
          "seen)"]),
        (cmd(REQ, "make test"), Evidence(0, exit_code=139, require_seen=True), Status.ERROR,
         ["the command exited with code 139 (the shell's code for a program killed by "
          "SIGSEGV): its output may be incomplete (what it would still have printed was never "
          "seen)"]),
        (cmd(MAX0, "make test"), Evidence(0, exit_code=190), Status.ERROR,
         ["the command exited with code 190 (the shell's code for a program killed by signal "
          "62): its output may be incomplete (what it would still have printed was never "
          "seen)"]),
        (cmd(EXIT, "make test"), Evidence(0, exit_code=137), Status.FAIL,
         ["the command exited with code 137"]),  # its death crosses an exitCode gate
        (cmd(MAX0, "make test"), Evidence(0, exit_code=128), Status.PASS, []),
        (cmd(MAX0, "make test"), Evidence(0, exit_code=255), Status.PASS, []),  # (no signal)
        (cmd(MAX0), Evidence(0, exit_code=137), Status.PASS, []),  # a list command's own code
        (cmd(None, "make test"), Evidence(0, exit_code=137), None, []),
        (cmd(GateSpec(max_matches=5)), Evidence(0, exit_code=1), Status.PASS, []),
        (cmd(REQ), Evidence(0, exit_code=0, require_seen=True), Status.PASS, []),
        (cmd(REQ), Evidence(0, exit_code=0, require_seen=False), Status.FAIL,
         ["required pattern /tests passed/ never appeared"]),
        (cmd(GateSpec(max_matches=0, exit_code=True, require="ok")),
         Evidence(2, exit_code=2), Status.FAIL,
         ["2 matches of /warn/ (at most 0 allowed)", "the command exited with code 2",
          "required pattern /ok/ never appeared"]),
        (cmd(EXIT), Evidence(0, ran=False), Status.ERROR, ["the command could not be started"]),
        (cmd(MAX0), Evidence(0), Status.ERROR, [INTERRUPTED]),  # stopped before it exited
        (cmd(None), Evidence(0), Status.ERROR, [INTERRUPTED]),
        (cmd(None), Evidence(0, ran=False, error="cannot start 'x': not found (ENOENT)"),
         Status.ERROR, ["the command could not be started: cannot start 'x': not found (ENOENT)"]),
        (file(EXIT), Evidence(0, path=LOG), Status.PASS, []),  # exitCode means nothing for files
        (file(None), Evidence(0, path=LOG, error=f"cannot read {LOG}: No such file or directory"),
         Status.ERROR, [f"cannot read {LOG}: No such file or directory"]),
        (file(MAX0), Evidence(4, path=LOG, error="cannot read"), Status.ERROR,
         ["4 matches of /ERROR/ (at most 0 allowed)", "cannot read"]),  # crossed too
        (file(GateSpec(max_matches=4)), Evidence(4, path=LOG, error="cannot read"), Status.ERROR,
         ["cannot read"]),
        (cmd(GateSpec(exit_code=True, require="ok")), Evidence(0, exit_code=2, error="unread"),
         Status.ERROR, ["the command exited with code 2", "unread"]),  # (`require`: unknown)
    ],
)
def test_judge(spec: WatcherSpec, ev: Evidence, status: Status | None,
               reasons: list[str]) -> None:
    v = judge(spec, ev)
    if status is None:
        assert v is None
        return
    assert v is not None
    assert (v.status, list(v.reasons)) == (status, reasons)
    assert v.ok is (status is Status.PASS)


def test_judge_keeps_the_first_lines_with_file_and_line_numbers() -> None:
    first = [(f"{LOG}:{n}", f"ERROR {n}") for n in (3, 9, 12, 13, 20, 21, 22)]
    v = judge(file(MAX0), Evidence(7, first, path=LOG))
    assert v is not None
    assert v.too_many and v.matches == 7
    assert v.first == tuple(Line(w, t, LOG, int(w.rsplit(":", 1)[1])) for w, t in first[:5])
    c = judge(cmd(MAX0), Evidence(1, [("run 1:4", "warn: a:b")], exit_code=0))
    assert c is not None and c.first == (Line("run 1:4", "warn: a:b"),) and c.exit == "0"


def test_an_error_that_crossed_its_gate_too_keeps_the_crossing_and_its_lines() -> None:
    """An ERROR (a file it could not read) hid the gate the lines it read crossed: no lines,
    `crossed` false, the table's verdict only ERROR; and the table and footer said the watchers
    "could not run", which had read lines."""
    first = [(f"{LOG}:{n}", f"ERROR {n}") for n in (2, 5)]
    v = judge(file(MAX0), Evidence(2, first, path=LOG, error="cannot read app.log.1"))
    assert v is not None and (v.status, v.crossed, v.too_many) == (Status.ERROR, True, True)
    assert (v.crossings, v.errors) == (("2 matches of /ERROR/ (at most 0 allowed)",),
                                       ("cannot read app.log.1",))
    assert v.first == tuple(Line(w, t, LOG, int(w.rsplit(":", 1)[1])) for w, t in first)
    held = judge(file(GateSpec(max_matches=2)), Evidence(2, first, path=LOG, error="x"))
    assert held is not None and (held.crossed, held.first, held.shown) == (False, (), "ERROR")
    assert table_row(summary_table([v]), "log") == ["log", "2", "0", "-", "FAIL+ERROR"]
    table = summary_table([v, held]).splitlines()
    assert "log: gate crossed, and it could not look at every line" in table
    assert table[-1] == "watchrun: FAILED: 1 of 2 gates crossed, 2 watchers could not look at " \
        "every line"


def table_row(table: str, wid: str) -> list[str]:
    (row,) = [ln.split() for ln in table.splitlines() if ln.split()[:1] == [wid]]
    return row


def test_judge_all_keeps_config_order_and_skips_ungated_healthy_watchers() -> None:
    a = WatcherSpec("a", "a", "x", command="true", gate=MAX0)
    b = WatcherSpec("b", "b", "x", command="true")
    c = WatcherSpec("c", "c", "x", command="true", gate=EXIT)
    ev = {"c": Evidence(0, exit_code=1), "a": Evidence(0, exit_code=0),
          "b": Evidence(9, exit_code=3)}
    assert [(v.id, v.status) for v in judge_all([a, b, c], ev)] == [
        ("a", Status.PASS), ("c", Status.FAIL)]


def test_judge_all_fails_closed_for_a_gated_watcher_without_evidence() -> None:
    log = WatcherSpec("log", "log", "ERROR", path=Path(LOG), gate=MAX0)  # never started
    idle = WatcherSpec("idle", "idle", "x", command="true")  # ungated, never started
    build = WatcherSpec("build", "build", "x", command="true", gate=EXIT)
    ev = {"build": Evidence(0, exit_code=0)}
    verdicts = judge_all([log, idle, build], ev)
    assert [(v.id, v.status, v.reasons) for v in verdicts] == [
        ("log", Status.ERROR, (NEVER_RAN,)), ("build", Status.PASS, ())]
    why = "it never ran: could not start: watcher log: EISDIR"
    assert judge_all([log], {}, why)[0].reasons == (why,)
    assert summary_table(judge_all([log], {})).splitlines()[-1] == \
        "watchrun: FAILED: 1 watcher could not run"


def verdict(vid: str, status: Status = Status.FAIL, *, matches: int = 0,
            first: tuple[Line, ...] = (), reasons: tuple[str, ...] = ("the command exited with "
            "code 1",), threshold: int | None = None, exit_: str | None = "1") -> Verdict:
    return Verdict(vid, vid, status, reasons if status is not Status.PASS else (), matches,
                   threshold, exit_, first, bool(first))


def test_summary_table_lists_every_gate_then_the_crossed_ones_with_their_lines() -> None:
    lines = (Line("build/app.log:3", "ERROR disk full", LOG, 3),
             Line("build/app.log:9", "ERROR again", LOG, 9))
    vs = [
        verdict("unit", Status.PASS, threshold=0, exit_="0"),
        verdict("log", matches=12, threshold=0, exit_=None, first=lines,
                reasons=("12 matches of /ERROR/ (at most 0 allowed)",)),
        verdict("deploy", Status.ERROR, exit_=None,
                reasons=("the command could not be started: not found",)),
    ]
    assert summary_table(vs) == "\n".join([
        "WATCHER  MATCHES  THRESHOLD  EXIT  VERDICT",
        "unit     0        0          0     pass",
        "log      12       0          -     FAIL",
        "deploy   0        -          -     ERROR",
        "",
        "log: gate crossed",
        "  - 12 matches of /ERROR/ (at most 0 allowed)",
        "    build/app.log:3: ERROR disk full",
        "    build/app.log:9: ERROR again",
        "    … and 10 more (every match is in watchers/log.jsonl)",
        "",
        "deploy: could not run",
        "  - the command could not be started: not found",
        "",
        "watchrun: FAILED: 1 of 3 gates crossed, 1 watcher could not run",
    ])


@pytest.mark.parametrize(
    ("statuses", "last"),
    [
        ([], "watchrun: no gated watchers (add `gate:` to a watcher to gate CI on it)"),
        ([Status.PASS, Status.PASS], "watchrun: passed: all 2 gates hold"),
        ([Status.PASS, Status.FAIL], "watchrun: FAILED: 1 of 2 gates crossed"),
        ([Status.ERROR, Status.ERROR], "watchrun: FAILED: 2 watchers could not run"),
    ],
)
def test_summary_footer(statuses: list[Status], last: str) -> None:
    vs = [verdict(f"w{i}", s) for i, s in enumerate(statuses)]
    assert summary_table(vs).splitlines()[-1] == last


def test_summary_clips_a_long_line() -> None:
    v = verdict("w", matches=1, first=(Line("run 1:1", "x" * 5000),), threshold=0)
    shown = [ln for ln in summary_table([v]).splitlines() if ln.startswith("    run 1:1")]
    assert len(shown) == 1 and len(shown[0]) < 320 and shown[0].endswith("…")


@pytest.mark.parametrize(
    ("raw", "data", "prop"),
    [
        ("plain", "plain", "plain"),
        ("100%", "100%25", "100%25"),
        ("a\nb\r\nc", "a%0Ab%0D%0Ac", "a%0Ab%0D%0Ac"),
        ("%0A", "%250A", "%250A"),
        ("k: v, w", "k: v, w", "k%3A v%2C w"),
        ("::add-mask::x", "::add-mask::x", "%3A%3Aadd-mask%3A%3Ax"),
    ],
)
def test_escaping(raw: str, data: str, prop: str) -> None:
    assert (escape_data(raw), escape_property(raw)) == (data, prop)


def test_annotations_point_at_file_lines_inside_the_workspace() -> None:
    lines = (Line("build/app.log:3", "ERROR 50% done", LOG, 3),
             Line("/tmp/other.log:7", "ERROR elsewhere", "/tmp/other.log", 7))
    v = verdict("log", matches=2, first=lines, threshold=0, exit_=None,
                reasons=("2 matches of /ERROR/ (at most 0 allowed)", "required pattern /ok/ "
                         "never appeared"))
    assert annotation_lines([v, verdict("fine", Status.PASS)], "/ws") == [
        "::error file=build/app.log,line=3,title=watchrun gate log::2 matches of /ERROR/ (at most"
        " 0 allowed)%0Abuild/app.log:3: ERROR 50%25 done",
        "::error title=watchrun gate log::2 matches of /ERROR/ (at most 0 allowed)%0A"
        "/tmp/other.log:7: ERROR elsewhere",
        "::error title=watchrun gate log::required pattern /ok/ never appeared",
    ]


def test_annotation_data_cannot_break_out_of_its_line() -> None:
    evil = "x\r\n::add-mask::secret\n::error::forged %0A"
    v = verdict("w", matches=1, first=(Line("run 1:1", evil),), threshold=0,
                reasons=("1 match of /x/ (at most 0 allowed)",))
    out = annotation_lines([v])
    assert len(out) == 1 and "\n" not in out[0] and "\r" not in out[0]
    assert out[0].startswith("::error title=watchrun gate w::")
    # (the edge sanitizer drops the CR and shows the newlines as `\n`; %-escaping follows)
    assert out[0].endswith("x\\n::add-mask::secret\\n::error::forged %250A")


@pytest.mark.parametrize(("crossed", "errors", "warned"), [
    (1, 1, None), (10, 10, None), (11, 10, 1), (40, 10, 30),
])
def test_annotations_are_capped_and_the_rest_summarised(crossed: int, errors: int,
                                                         warned: int | None) -> None:
    vs = [verdict(f"w{i}") for i in range(crossed)] + [verdict("ok", Status.PASS)]
    out = annotation_lines(vs)
    assert sum(a.startswith("::error ") for a in out) == errors == min(crossed, MAX_ANNOTATIONS)
    warnings = [a for a in out if a.startswith("::warning ")]
    if warned is None:
        assert warnings == []
    else:
        assert warnings == [f"::warning title=watchrun::{warned} more gate annotations not shown "
                            "(GitHub shows 10 per step); the job log and the step summary list "
                            "every crossed gate"]


def test_run_level_problems_come_first_and_count_against_the_cap() -> None:
    vs = [verdict(f"w{i}") for i in range(12)]
    out = annotation_lines(vs, problems=["it was interrupted by SIGTERM\nbefore it ended"])
    assert out[0] == "::error title=watchrun::it was interrupted by SIGTERM\\nbefore it ended"
    assert sum(a.startswith("::error ") for a in out) == MAX_ANNOTATIONS
    assert out[-1].startswith("::warning title=watchrun::3 more")
    assert annotation_lines([verdict("ok", Status.PASS)], problems=[]) == []


def test_many_matches_of_one_gate_give_one_annotation_per_shown_line() -> None:
    lines = tuple(Line(f"app.log:{n}", "ERROR", "/ws/app.log", n) for n in range(1, 6))
    v = verdict("log", matches=10_000, first=lines, threshold=0, exit_=None,
                reasons=("10000 matches of /ERROR/ (at most 0 allowed)",))
    out = annotation_lines([v, verdict("unit"), *(verdict(f"x{i}") for i in range(6))], "/ws")
    assert len(out) == 11 and out[-1].startswith("::warning title=watchrun::2 more")
    assert [a.split(",")[1] for a in out[:5]] == [f"line={n}" for n in range(1, 6)]


def test_stop_commands_token_is_random_and_fences_by_the_documented_syntax() -> None:
    a, b = StopCommands(), StopCommands()
    assert a.token != b.token and len(a.token) == 32
    assert a.begin() == f"::stop-commands::{a.token}" and a.end() == f"::{a.token}::"


@pytest.mark.parametrize(("env", "on"), [
    ({"GITHUB_ACTIONS": "true"}, True), ({"GITHUB_ACTIONS": "false"}, False), ({}, False),
    ({"GITLAB_CI": "true"}, False),
])
def test_in_github_actions(env: dict[str, str], on: bool) -> None:
    assert in_github_actions(env) is on


def test_markdown_summary_escapes_text_and_fences_lines_safely() -> None:
    lines = (Line("run 1:2", "uses ``` and <script> | pipes"),)
    vs = [verdict("unit", Status.PASS, threshold=0, exit_="0"),
          verdict("build", matches=1, first=lines, threshold=0, exit_="0",
                  reasons=("1 match of /a*b_c|<x>/ (at most 0 allowed)",)),
          verdict("deploy", Status.ERROR, exit_=None, reasons=("could not start",))]
    md = markdown(vs)
    assert md.splitlines()[:7] == [
        "### watchrun gates", "",
        "| watcher | matches | threshold | exit | verdict |", "|---|---|---|---|---|",
        "| `unit` | 0 | 0 | 0 | ✅ pass |", "| `build` | 1 | 0 | 0 | ❌ FAIL |",
        "| `deploy` | 0 | - | - | ⚠️ ERROR |",
    ]
    assert r"**build**: 1 match of /a\*b\_c\|\<x\>/ \(at most 0 allowed\)" in md
    assert "````text\nrun 1:2: uses ``` and <script> | pipes\n````\n" in md
    assert md.endswith("watchrun: FAILED: 1 of 3 gates crossed, 1 watcher could not run\n")
    assert markdown([]) == "### watchrun gates\n\nNo gated watchers.\n"


def test_junit_has_one_testcase_per_verdict_with_failures_and_errors() -> None:
    lines = (Line("app.log:3", "ERROR \ufffe bad \x00 char <&>", LOG, 3),)
    vs = [verdict("unit", Status.PASS, threshold=0, exit_="0"),
          verdict("log", matches=40, first=lines, threshold=0, exit_=None,
                  reasons=("40 matches of /ERROR/ (at most 0 allowed)",)),
          verdict("deploy", Status.ERROR, reasons=("the command could not be started",))]
    root = ET.fromstring(junit(vs, 1.5))
    assert (root.tag, root.get("tests"), root.get("failures"), root.get("errors"),
            root.get("time")) == ("testsuite", "3", "1", "1", "1.500")
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert list(cases) == ["unit", "log", "deploy"]
    assert list(cases["unit"]) == []
    failure = cases["log"].find("failure")
    assert failure is not None
    assert failure.get("message") == "40 matches of /ERROR/ (at most 0 allowed)"
    assert failure.text == ("40 matches of /ERROR/ (at most 0 allowed)\n"
                            "app.log:3: ERROR \ufffd bad  char <&>\n… and 39 more")  # (NUL
    # removed by the edge sanitizer, as on every surface; what XML cannot hold is U+FFFD)
    error = cases["deploy"].find("error")
    assert error is not None and error.get("message") == "the command could not be started"
    empty = ET.fromstring(junit([], 0.0))
    assert (empty.get("tests"), empty.get("failures"), list(empty)) == ("0", "0", [])


def test_relativize_shortens_where_but_keeps_the_absolute_path_for_annotations() -> None:
    v = verdict("log", matches=2, threshold=0, first=(
        Line("/ws/build/app.log:3", "E", "/ws/build/app.log", 3), Line("run 1:2", "E"),
        Line("/wsx/a.log:1", "E", "/wsx/a.log", 1)))
    (short,) = relativize([v], "/ws/")
    assert [ln.where for ln in short.first] == ["build/app.log:3", "run 1:2", "/wsx/a.log:1"]
    assert short.first[0].path == "/ws/build/app.log"


HOSTILE = "lo\x1b[31mg\x1b]0;title\x07\u202e.log"
"""A file name with an SGR, an OSC title with its BEL, and a right-to-left override."""
RAW = ("\x1b", "\x07", "\u202e", "\u2028")


@pytest.mark.parametrize("render", [
    lambda vs: summary_table(vs), lambda vs: "\n".join(annotation_lines(vs, "/ws")),
    lambda vs: markdown(vs), lambda vs: junit(vs, 1.0).decode()])
def test_every_report_shows_hostile_names_and_lines_escaped(render: object) -> None:
    """The verdict's `path:line`, its matched line and its reasons reached the terminal (and
    GitHub's annotations) raw: escape sequences and bidi controls a file name or a log line
    carried."""
    path = f"/ws/{HOSTILE}"
    first = (Line(f"{path}:1", "ERROR ok \u202egnp.exe\u2028forged", path, 1),)
    vs = [verdict("f", matches=1, threshold=0, exit_=None, first=first,
                  reasons=(f"1 match in {path}",))]
    out = render(vs)  # type: ignore[operator]
    assert isinstance(out, str)
    assert not any(c in out for c in RAW), repr(out)
    assert "\\u202e" in out and "\\u2028" in out


def test_json_counts_gates_as_the_table_does() -> None:
    """`--json`'s `gates` counted verdicts: an ungated watcher's ERROR was a gate (2 where the
    table said `0 of 1 gate crossed`), and the table left a gated watcher in ERROR out of its
    `of M gates` (5 gates were `1 of 4`). Both count the gated watchers now; `held` the gates
    that hold."""
    ok = WatcherSpec("ok", "ok", "x", command="true", gate=MAX0)
    fails = WatcherSpec("fails", "fails", "x", command="true", gate=MAX0)
    nostart = WatcherSpec("nostart", "nostart", "x", command=("nope",), gate=MAX0)
    ungated = WatcherSpec("ungated", "ungated", "x", command=("nope",))
    missing = Evidence(0, ran=False, error="not found (ENOENT)")
    vs = judge_all([ok, fails, nostart, ungated], {
        "ok": Evidence(0, exit_code=0), "fails": Evidence(1, [("run 1:1", "x")], exit_code=0),
        "nostart": missing, "ungated": missing})
    assert summary_table(vs).splitlines()[-1] == \
        "watchrun: FAILED: 1 of 3 gates crossed, 2 watchers could not run"
    doc = verdicts_doc(vs)
    assert {k: doc[k] for k in ("gates", "held", "crossed", "errors")} == \
        {"gates": 3, "held": 1, "crossed": 1, "errors": 2}
    assert [v["gated"] for v in doc["verdicts"]] == [True, True, True, False]
    one = judge_all([ok, ungated], {"ok": Evidence(0, exit_code=0), "ungated": missing})
    assert summary_table(one).splitlines()[-1] == \
        "watchrun: FAILED: 0 of 1 gate crossed, 1 watcher could not run"
    assert verdicts_doc(one)["gates"] == 1
