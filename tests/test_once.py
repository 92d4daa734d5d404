"""`watchrun run --once` end to end through `main` (in this process when the run starts no
command, `inproc.once_in_process`; the console script otherwise): gates, exit codes, echo,
GitHub Actions annotations behind a stop-commands fence, the step summary and JUnit."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import forkserver
import pytest
from inproc import inproc, once_in_process
from liverunner import (
    as_nobody,
    read_records,
    stored_validated,
    wait_for,
    watchrun_bin,
    write_config,
)

PY, TIMEOUT_S = sys.executable, 60


@dataclass
class Run:
    rc: int
    out: str
    err: str
    took: float


def base_env(**extra: str) -> dict[str, str]:
    """The test's environment without any CI variables (the suite may itself run in CI)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "RUNNER_", "GITLAB_")) and k != "CI"}
    return {**env, **extra}


def once(folder: Path, config: dict[str, Any], *args: str, merged: bool = False,
         **env: str) -> Run:
    cfg = write_config(folder, config)
    started = time.monotonic()
    if not merged and once_in_process(config, env):  # (a process: tests/test_cli_contract.py)
        done = inproc(folder, "run", "--once", "-c", str(cfg), *args, env=base_env(**env))
        return Run(done.returncode, done.stdout, done.stderr, time.monotonic() - started)
    full = base_env(**env)
    stored_validated(cfg, args, full)  # (as `watchrun validate` before it)
    argv = [watchrun_bin(), "run", "--once", "-c", str(cfg), *args]
    proc = forkserver.run(argv, env=full, cwd=folder, merged=merged,
                          timeout=TIMEOUT_S) or subprocess.run(
        argv, cwd=folder, env=full, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merged else subprocess.PIPE, timeout=TIMEOUT_S, check=False)
    took = time.monotonic() - started
    return Run(proc.returncode, proc.stdout.decode(), (proc.stderr or b"").decode(), took)


def gated(cid: str, command: str | list[str], pattern: str, **gate: Any) -> dict[str, Any]:
    return {"id": cid, "command": command, "pattern": pattern, "gate": gate}



def rotated_by_rename(log: Path, appended: str, fresh: str | None = None) -> Path:
    """The line `appended` added to `log`, then the log rotated as logrotate does by default:
    renamed to `log.1`, and a new `log` holding the line `fresh` (None: none made, as with
    `nocreate`). Returns the rotated file."""
    with log.open("a") as fh:
        fh.write(f"{appended}\n")
    rotated = log.with_name(f"{log.name}.1")
    log.rename(rotated)
    if fresh is not None:
        log.write_text(f"{fresh}\n")
    return rotated


def rotate_three_times(log: Path, lines: list[str]) -> None:
    """Append each of `lines` to `log`, then rotate it as logrotate does (`log.2` -> `log.3`,
    `log` -> `log.1`, a new empty `log`): three generations for three lines."""
    for k, line in enumerate(lines, 1):
        with open(log, "a") as fh:
            fh.write(f"{line}\n")
        for n in range(k - 1, 0, -1):
            log.with_name(f"{log.name}.{n}").rename(log.with_name(f"{log.name}.{n + 1}"))
        log.rename(log.with_name(f"{log.name}.1"))
        log.write_text("")


def table_row(out: str, wid: str) -> list[str]:
    (row,) = [ln.split() for ln in out.splitlines() if ln.split()[:1] == [wid]]
    return row


def read_then_rotated_past_one_generation(folder: Path, first: str, rotated: list[str],
                                          max_matches: int) -> tuple[Path, dict[str, Any]]:
    """`app.log` holding `first`, read by a once run of a watcher gated at `max_matches` with
    `maxGenerations: 1`, then rotated three times with `rotated` (`rotate_three_times`): the
    next run finds more rotated generations than it follows. Returns the log and the config."""
    log = folder / "app.log"
    log.write_text(f"{first}\n")
    config = {"limits": {"maxGenerations": 1},
              "watchers": [{"id": "log", "path": "app.log", "pattern": "ERROR",
                            "gate": {"maxMatches": max_matches}}]}
    assert once(folder, config).rc == 0
    rotate_three_times(log, rotated)
    return log, config


def records_and_lines(folder: Path, wid: str) -> tuple[list[dict[str, Any]], list[str]]:
    """A watcher's records in `folder`'s output dir, and the lines of its matches."""
    records = read_records(folder / ".watchrun" / "watchers" / f"{wid}.jsonl")
    return records, [r["line"] for r in records if r["kind"] == "match"]


# How the GitHub Actions runner reads output (actions/runner ActionCommand, ActionCommandManager):
# `::name props::data` starting a line, `##[name props]data` anywhere; `::stop-commands::T`..`::T::`
def parse_command(line: str) -> tuple[str, str] | None:
    text = line.lstrip()
    if text.startswith("::") and (end := text.find("::", 2)) >= 0:
        return text[2:end].split(" ")[0], text[end + 2:]
    if (at := line.find("##[")) >= 0 and (rb := line.find("]", at)) >= 0:
        return line[at + 3:rb].split(" ")[0], line[rb + 1:]
    return None


def honoured_commands(output: str) -> list[tuple[str, str]]:
    """(command, data) for each line the runner would act on (any name counts as a command)."""
    done: list[tuple[str, str]] = []
    stop_token: str | None = None
    for line in output.splitlines():
        found = parse_command(line)
        if found is None:
            continue
        if stop_token is not None:
            if found[0] == stop_token:
                stop_token = None
                done.append(("resume", ""))
            continue
        if found[0] == "stop-commands":
            stop_token = found[1]
        done.append(found)
    return done


def test_a_passing_build_exits_0_with_its_output_echoed_and_a_table(tmp_path: Path) -> None:
    build = gated("build", "echo compiling; echo 'all tests passed'", r"warning:",
                  maxMatches=0, exitCode=True, require="all tests passed")
    r = once(tmp_path, {"watchers": [build]}, "--junit", "report.xml")
    assert r.rc == 0, r.out + r.err
    assert r.out.startswith("compiling\nall tests passed\n")  # echoed first, table after
    report = ET.parse(tmp_path / "report.xml").getroot()  # written when the gates hold, too
    assert (report.get("tests"), report.get("failures"), len(report[0])) == ("1", "0", 0)
    assert table_row(r.out, "build") == ["build", "0", "0", "0", "pass"]
    assert r.out.rstrip().endswith("watchrun: passed: the 1 gate holds")
    assert r.took < 4.0, f"a trivial once run took {r.took:.1f}s"  # a stopTimeout wait is 5 s


def test_a_forbidden_warning_crosses_the_gate(tmp_path: Path) -> None:
    build = gated("build", ["sh", "-c", "echo cc main.c; echo 'main.c:3: warning: unused x'; "
                            "echo done"], r"warning:", maxMatches=0, exitCode=True)
    r = once(tmp_path, {"watchers": [build]}, "--junit", "report.xml")
    assert r.rc == 1, r.out + r.err
    assert "main.c:3: warning: unused x\n" in r.out.split("WATCHER")[0]  # echoed while it ran
    failure = ET.parse(tmp_path / "report.xml").find("testcase[@name='build']/failure")
    assert failure is not None and "run 1:2: main.c:3: warning: unused x" in (failure.text or "")
    assert table_row(r.out, "build") == ["build", "1", "0", "0", "FAIL"]
    assert "  - 1 match of /warning:/ (at most 0 allowed)\n" \
           "    run 1:2: main.c:3: warning: unused x\n" in r.out
    assert r.out.rstrip().endswith("watchrun: FAILED: 1 of 1 gate crossed")


def test_a_build_that_exits_1_crosses_its_exit_code_gate(tmp_path: Path) -> None:
    build = gated("build", ["sh", "-c", "echo linking; exit 1"], "zzz", exitCode=True)
    ungated = {"id": "lint", "command": ["sh", "-c", "exit 4"], "pattern": "zzz"}
    r = once(tmp_path, {"watchers": [build, ungated]})
    assert r.rc == 1, r.out + r.err
    assert table_row(r.out, "build") == ["build", "0", "-", "1", "FAIL"]
    assert "  - the command exited with code 1\n" in r.out
    assert not [ln for ln in r.out.splitlines() if ln.startswith("lint")]  # no gate, no row


def test_a_command_killed_by_a_signal_has_an_exit_record_that_says_so(tmp_path: Path) -> None:
    """docs/records.md's `exit` of a run a signal ended, as a real runner writes it (the
    records.md audit: only the command source with a stand-in context was checked)."""
    crash = gated("crash", ["sh", "-c", "echo start; kill -SEGV $$$$"], "zzz",  # ($$: a $)
                   exitCode=True)
    r = once(tmp_path, {"watchers": [crash]})
    assert r.rc == 1, r.out + r.err
    (end,) = [x for x in read_records(tmp_path / ".watchrun" / "watchers" / "crash.jsonl")
              if x["kind"] == "exit"]
    assert (end["status"], end["signal"], end["exitCode"], end["run"]) == (
        "signaled", "SIGSEGV", None, 1), end


def test_a_string_command_whose_program_is_missing_could_not_run(tmp_path: Path) -> None:
    """A string command runs under /bin/sh: a missing program is the shell's exit 127, which
    was an ordinary crossing of `exitCode: true` (exit 1); it is "could not run" (exit 3), as
    the same command written as a list is."""
    shell = gated("shell", "no-such-binary-watchrun --flag", "zzz", exitCode=True)
    r = once(tmp_path, {"watchers": [shell]})
    assert (r.rc, table_row(r.out, "shell")[1:]) == (3, ["0", "-", "127", "ERROR"]), r.out
    assert "not found" in r.out.split("WATCHER")[0]  # the shell's complaint, echoed
    assert "\nshell: could not run\n  - the command exited with code 127 (the shell's code for " \
        "a command not found): it may never have run\n" in r.out


def test_a_string_command_that_ran_and_exited_127_is_not_said_to_be_missing(
        tmp_path: Path) -> None:
    """The verdict says what 127 means to the shell; it does not assert the program was not
    found when it ran (and printed) and chose that status: it may never have run, and 127 is
    taken for that (exit 3: docs/decisions.md, CI gating)."""
    r = once(tmp_path, {"watchers": [gated("ran", "echo found; exit 127", "zzz", exitCode=True)]})
    assert r.rc == 3, r.out + r.err
    assert r.out.startswith("found\n")
    assert "  - the command exited with code 127 (the shell's code for a command not found): " \
        "it may never have run\n" in r.out
    assert "did not find" not in r.out + r.err


def test_a_required_line_that_never_appears_crosses_the_gate(tmp_path: Path) -> None:
    server = gated("server", ["sh", "-c", "echo booting; echo 'listening on :8080'"], "panic",
                   require="Server started")
    r = once(tmp_path, {"watchers": [server]})
    assert r.rc == 1, r.out + r.err
    assert "  - required pattern /Server started/ never appeared\n" in r.out
    seen = gated("server", ["sh", "-c", "echo 'Server started'"], "panic", require="server STARTED")
    (tmp_path / "ok").mkdir()
    assert once(tmp_path / "ok", {"watchers": [seen]}).rc == 0  # caseSensitive defaults to false


def test_a_log_with_10000_matches_caps_annotations_and_summarises(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("".join(f"{n} ERROR boom WARN slow FATAL x\n" for n in range(10_000)))
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    watchers = [{"id": wid, "path": "app.log", "pattern": pat, "gate": {"maxMatches": 0}}
                for wid, pat in (("errors", "ERROR"), ("warns", "WARN"), ("fatals", "FATAL"))]
    r = once(tmp_path, {"watchers": watchers}, "--quiet", GITHUB_ACTIONS="true",
             GITHUB_STEP_SUMMARY=str(summary), GITHUB_WORKSPACE=str(tmp_path))
    assert r.rc == 1, r.out + r.err
    assert table_row(r.out, "errors") == ["errors", "10000", "0", "-", "FAIL"]
    assert "    app.log:1: 0 ERROR boom WARN slow FATAL x\n" in r.out
    assert "    … and 9995 more (every match is in watchers/errors.jsonl)\n" in r.out
    errors = [ln for ln in r.out.splitlines() if ln.startswith("::error ")]
    warnings = [ln for ln in r.out.splitlines() if ln.startswith("::warning ")]
    assert len(errors) == 10  # 3 gates x 5 lines wanted; GitHub shows 10 per step
    assert errors[0] == ("::error file=app.log,line=1,title=watchrun gate errors::10000 matches"
                         " of /ERROR/ (at most 0 allowed)%0Aapp.log:1: 0 ERROR boom WARN slow "
                         "FATAL x")
    assert warnings == ["::warning title=watchrun::5 more gate annotations not shown (GitHub "
                        "shows 10 per step); the job log and the step summary list every crossed "
                        "gate"]
    md = summary.read_text()
    assert md.startswith("earlier step\n### watchrun gates\n")  # appended, not overwritten
    assert "| `errors` | 10000 | 0 | - | ❌ FAIL |" in md
    records = read_records(tmp_path / ".watchrun" / "watchers" / "errors.jsonl")
    assert sum(x["kind"] == "match" for x in records) == 10_000


def test_log_lines_cannot_become_workflow_commands(tmp_path: Path) -> None:
    hostile = ("echo '::add-mask::hunter2'; echo '::error::forged'; echo '  ::warning::x'; "
               "echo 'text ##[add-mask]hunter3'; echo '::stop-commands::guess'; "
               "echo '::endgroup::'; printf 'clear\\033[2J\\033]0;pwn\\007 screen\\n'; "
               "echo 'warning: real'")
    build = gated("build", hostile, "warning|add-mask|error", maxMatches=0)
    runs = [once(tmp_path, {"watchers": [build]}, "--junit", "j.xml", merged=True,
                 GITHUB_ACTIONS="true") for _ in range(2)]
    r = runs[0]
    assert r.rc == 1, r.out
    lines = r.out.splitlines()
    token = lines[0].removeprefix("::stop-commands::")
    assert re.fullmatch("[0-9a-f]{32}", token), lines[0]
    assert runs[1].out.splitlines()[0] != lines[0]  # a fresh token per run
    end = lines.index(f"::{token}::")
    fenced = "\n".join(lines[1:end])
    for echoed in ("::add-mask::hunter2", "::error::forged", "text ##[add-mask]hunter3",
                   "clear screen", "WATCHER  MATCHES"):
        assert echoed in fenced  # echoed and tabled inside the fence
    assert "\x1b" not in r.out and "\x07" not in r.out  # sanitized (SPEC §6)
    honoured = honoured_commands(r.out)
    assert honoured[:2] == [("stop-commands", token), ("resume", "")]
    assert len(honoured) == 7 and all(  # then only watchrun's 5 annotations
        name == "error" and data.startswith("5 matches of /warning|add-mask|error/")
        for name, data in honoured[2:])


def test_log_lines_cannot_become_workflow_commands_with_json(tmp_path: Path) -> None:
    """`--json` has no fence (stdout is the document): a matched line holding `##[error]…`
    reached the step log as is, in the document's `first[].line` and in the JSON log's match
    lines on stderr, and the runner obeys `##[command]` anywhere in a line. Every `##[` in
    printed JSON is written `#\\u0023[` now: the same text to a JSON parser, inert to the
    runner; only watchrun's own annotations (on stderr) are obeyed."""
    (tmp_path / "app.log").write_text("ok\nERROR ##[add-mask]hunter3\n"
                                      "ERROR x ##[error]forged annotation\n")
    app = {"id": "app", "path": "app.log", "pattern": "ERROR", "gate": {"maxMatches": 0}}
    r = once(tmp_path, {"watchers": [app]}, "--json", GITHUB_ACTIONS="true")
    assert r.rc == 1, r.out + r.err
    (verdict,) = json.loads(r.out)["verdicts"]  # the document parses to the lines as read
    assert [f["line"] for f in verdict["first"]] == ["ERROR ##[add-mask]hunter3",
                                                     "ERROR x ##[error]forged annotation"]
    logged = [json.loads(ln) for ln in r.err.splitlines() if ln.startswith("{")]
    assert [x["line"] for x in logged if x["event"] == "match"] == [
        "ERROR ##[add-mask]hunter3", "ERROR x ##[error]forged annotation"]
    assert honoured_commands(r.out) == []
    honoured = honoured_commands(r.err)
    assert len(honoured) == 2 and all(  # watchrun's annotations, one per line shown
        name == "error" and data.startswith("2 matches of /ERROR/") for name, data in honoured)


def test_a_command_that_cannot_start_exits_3_with_the_reason(tmp_path: Path) -> None:
    ok = gated("ok", "echo fine", "zzz", maxMatches=0)
    missing = gated("tool", ["no-such-binary-watchrun", "--version"], "zzz", exitCode=True)
    r = once(tmp_path, {"watchers": [ok, missing]}, "--junit", "report.xml")
    assert r.rc == 3, r.out + r.err
    assert "[tool] error: the command could not be started: " in r.err
    assert "no-such-binary-watchrun" in r.err and "ENOENT" in r.err
    assert table_row(r.out, "tool")[-1] == "ERROR"
    root = ET.parse(tmp_path / "report.xml").getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("2", "0", "1")
    error = root.find("testcase[@name='tool']/error")
    assert error is not None and "ENOENT" in (error.get("message") or "")


@pytest.mark.parametrize(("command", "verdict"), [("echo fine", 0), ("echo warning: x", 1)])
def test_a_junit_file_that_cannot_be_written_is_exit_3(tmp_path: Path, command: str,
                                                      verdict: int) -> None:
    """README: exit 3 when "the JUnit file could not be written", whether the gates hold or
    not; the verdict is still printed and the reason names the file."""
    build = gated("build", command, "warning:", maxMatches=0)
    (tmp_path / "reports").write_text("a file where the report's folder should be\n")
    r = once(tmp_path, {"watchers": [build]}, "--junit", "reports/junit.xml")
    assert r.rc == 3, r.out + r.err
    assert table_row(r.out, "build")[-1] == ("pass", "FAIL")[verdict]
    assert "cannot write the JUnit report reports/junit.xml" in r.err


def test_an_unreadable_log_file_is_a_runtime_error_not_a_pass(tmp_path: Path) -> None:
    log = {"id": "log", "path": "build/missing.log", "pattern": "ERROR", "gate": {"maxMatches": 0}}
    r = once(tmp_path, {"watchers": [log]})
    assert (r.rc, table_row(r.out, "log")[-1]) == (3, "ERROR"), r.out + r.err
    assert f"[log] error: {tmp_path}/build/missing.log does not exist\n" in r.err
    assert "\nlog: could not run\n" in r.out and r.out.endswith(  # (nothing was read)
        "watchrun: FAILED: 1 watcher could not run\n"), r.out
    (v,) = json.loads(once(tmp_path, {"watchers": [log]}, "--json").out)["verdicts"]
    assert (v["status"], v["errorKind"]) == ("error", "not-run")


@pytest.mark.parametrize(("make", "what"), [(os.mkfifo, "a named pipe (FIFO)"),
                                            (os.mkdir, "a directory")])
def test_a_gate_on_a_fifo_or_a_directory_fails_closed(tmp_path: Path, make: Any,
                                                      what: str) -> None:
    """Not a regular file at the path (config.md: a FIFO is an error, `run --once` exit 3): the
    gate is never passed on what could not be read, and a FIFO is never waited on."""
    make(tmp_path / "build.log")
    r = once(tmp_path, {"watchers": [{"id": "log", "path": "build.log", "pattern": "ERROR",
                                      "fromStart": True, "gate": {"maxMatches": 0}}]})
    assert (r.rc, table_row(r.out, "log")[-1]) == (3, "ERROR"), r.out + r.err
    assert f"[log] error: cannot read {tmp_path}/build.log: is {what}, not a regular file\n" \
        in r.err
    assert "(not opened yet)" in r.err and "not there" not in r.err  # it is there
    (error,) = [x for x in read_records(tmp_path / ".watchrun" / "watchers" / "log.jsonl")
                if x["kind"] == "error"]
    assert str(tmp_path / "build.log") in error["message"], error


def test_a_log_the_runner_may_not_read_is_exit_3() -> None:
    """EACCES (README: a log file that is missing or unreadable is exit 3): a runner run as
    uid 65534 (`setpriv`), gated on a root-owned log of mode 0600, fails the gate closed."""
    nobody = as_nobody()
    base = Path(tempfile.mkdtemp(prefix="watchrun-eacces-"))
    try:
        base.chmod(0o755)
        (base / "app.log").write_text("ERROR hidden\n")
        (base / "app.log").chmod(0o600)
        (base / "home").mkdir()
        os.chown(base / "home", 65534, 65534)
        cfg = write_config(base, {"watchers": [{"id": "log", "path": "app.log", "pattern": "ERROR",
                                                "fromStart": True, "gate": {"maxMatches": 0}}]})
        proc = subprocess.run(
            [*nobody, watchrun_bin(), "run", "--once", "-c", str(cfg), "--output-dir",
             str(base / "home" / "out")],
            cwd=base, env=base_env(HOME=str(base / "home")), capture_output=True, text=True,
            timeout=TIMEOUT_S, check=False)
        if "ModuleNotFoundError" in proc.stderr or "Permission denied" in proc.stderr[:200]:
            pytest.skip(f"watchrun cannot run as nobody here: {proc.stderr[-200:]}")
        assert (proc.returncode, table_row(proc.stdout, "log")[-1]) == (3, "ERROR"), \
            proc.stdout + proc.stderr
        assert f"[log] error: cannot read {base}/app.log: Permission denied" in proc.stderr
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_quiet_keeps_the_verdict_but_not_the_echo_and_still_fences(tmp_path: Path) -> None:
    build = gated("build", "echo '::error::from the build'; echo warning: w", "warning",
                  maxMatches=0)
    r = once(tmp_path, {"watchers": [build]}, "--quiet", GITHUB_ACTIONS="true")
    assert r.rc == 1
    assert "from the build" not in r.out and r.err == ""
    lines = r.out.splitlines()
    assert lines[0].startswith("::stop-commands::") and lines[1].startswith("WATCHER")
    assert {n for n, _ in honoured_commands(r.out)} == {"stop-commands", "resume", "error"}


def start_once(folder: Path, watcher: dict[str, Any]) -> subprocess.Popen[bytes]:
    cfg = write_config(folder, {"watchers": [watcher]})
    return subprocess.Popen([watchrun_bin(), "run", "--once", "-c", str(cfg)], cwd=folder,
                            env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_an_interrupted_once_run_is_not_a_pass(tmp_path: Path) -> None:
    proc = start_once(tmp_path, gated("build", "echo started; exec sleep 60", "z", maxMatches=0))
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"started\n"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 3, out.decode() + err.decode()
    assert b"  - the command did not run to its exit (the run was interrupted)\n" in out
    assert b"\nbuild: was interrupted\n" in out  # (it said "could not run": it ran)
    assert b"watchrun: FAILED: 1 watcher was interrupted" in out


@pytest.mark.parametrize("as_json", [False, True])
def test_a_once_run_interrupted_after_its_gates_held_is_not_a_pass(tmp_path: Path,
                                                                    as_json: bool) -> None:
    """Every watcher had finished (its gate held) while an action still ran: SIGTERM then
    gave exit 0 and "passed: all 1 gates hold", though the run never ended by itself."""
    pidfile = tmp_path / "pid"
    cfg = write_config(tmp_path, {"watchers": [{
        **gated("build", "echo ERROR x", "ERROR", maxMatches=5),
        "actions": [{"type": "exec", "timeout": "5m",
                     "command": ["sh", "-c", f"echo $$ > {pidfile}; exec sleep 60"]}]}]})
    proc = subprocess.Popen([watchrun_bin(), "run", "--once", "-c", str(cfg),
                             *(["--json"] if as_json else [])], cwd=tmp_path, env=base_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: proc.poll() is not None or (pidfile.exists() and pidfile.read_text()),
             "the action to start")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 3, out.decode() + err.decode()
    assert b"the run was interrupted by SIGTERM: exit 3" in err
    if as_json:
        doc = json.loads(out)
        assert (doc["passed"], doc["interrupted"], doc["crossed"]) == (False, "SIGTERM", 0)
    else:
        assert b"watchrun: INTERRUPTED by SIGTERM before the run ended: exit 3" in out


def test_broken_stdout_degrades_quietly_and_keeps_the_gate_result(tmp_path: Path) -> None:
    lines = 4000  # > a 64 KiB pipe buffer: the runner must hit the closed pipe
    proc = start_once(tmp_path, gated("build", [PY, "-c", f"for i in range({lines}): print("
                                            "'line', i, 'x' * 40)"], "line 3999 ", maxMatches=0))
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"line 0 ")  # `| head -1`
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=TIMEOUT_S) == 1, err
    assert "Traceback" not in err and "Exception ignored" not in err and "Broken" not in err
    records = read_records(tmp_path / ".watchrun" / "watchers" / "build.jsonl")
    assert [x["line"] for x in records if x["kind"] == "match"] == [f"line 3999 {'x' * 40}"]


def _two_once_runs(tmp_path: Path, watcher: dict[str, Any], then: str = "a") -> tuple[Run, Run]:
    log = tmp_path / "app.log"
    log.write_text("ERROR one\nINFO fine\nERROR two\n")
    config = {"watchers": [{**watcher, "path": "app.log", "pattern": "ERROR",
                            "gate": {"maxMatches": 5}}]}
    first = once(tmp_path, config)
    with open(log, then) as fh:  # "a": append; "r+": truncate and rewrite, same inode
        if then == "r+":
            fh.truncate(0)
        fh.write("ERROR three\nunterminated ERROR")
    return first, once(tmp_path, config)


def test_a_file_watcher_reads_from_the_start_then_from_its_checkpoint(tmp_path: Path) -> None:
    first, second = _two_once_runs(tmp_path, {"id": "tail"})
    assert table_row(first.out, "tail")[:2] == ["tail", "2"]  # fresh checkout: from the start
    assert table_row(second.out, "tail")[:2] == ["tail", "2"]  # then from the checkpoint on


@pytest.mark.parametrize(("watcher", "then"), [({"fromStart": True}, "a"), ({}, "r+")])
def test_a_second_once_run_counts_every_line_it_reads(tmp_path: Path, watcher: dict[str, Any],
                                                       then: str) -> None:
    first, second = _two_once_runs(tmp_path, {"id": "log", **watcher}, then)
    assert table_row(first.out, "log")[:2] == ["log", "2"]
    assert table_row(second.out, "log")[:2] == ["log", "4" if then == "a" else "2"]


@pytest.mark.parametrize("watcher", [{"fromStart": True}, {}])
def test_a_generation_rotated_between_once_runs_is_read_on(tmp_path: Path,
                                                           watcher: dict[str, Any]) -> None:
    """A line written after a run, then rotated away before the next (`app.log` renamed to
    `app.log.1`, a new `app.log`), is read by the next run from where the last one ended, with
    `fromStart` too (which reads the new file whole): no run ever skips it."""
    log = tmp_path / "app.log"
    log.write_text("ERROR one\nINFO fine\n")
    config = {"watchers": [{"id": "log", **watcher, "path": "app.log", "pattern": "ERROR",
                            "gate": {"maxMatches": 0}}]}
    assert once(tmp_path, config).rc == 1
    rotated_by_rename(log, "ERROR lost", "INFO fresh")
    second = once(tmp_path, config)
    assert second.rc == 1, second.out + second.err
    assert table_row(second.out, "log")[:2] == ["log", "1"]
    records, lines = records_and_lines(tmp_path, "log")
    assert lines == ["ERROR one", "ERROR lost"]
    (rotate,) = [r for r in records if r["kind"] == "rotate"]
    assert rotate["reason"] == "rename"
    third = once(tmp_path, config)  # nothing new: the rotated generation is not read again
    assert table_row(third.out, "log")[:2] == ["log", "0"] and third.rc == 0, third.out


def test_generations_past_max_generations_rotated_between_runs_are_a_gap(tmp_path: Path) -> None:
    """Three rotations between two runs with `maxGenerations: 1`: the generation followed is
    read on, then the newest rotated one and the file at the path; the one between is a `gap`
    with its size (config.md: older unread ones are a `gap` record), never silently skipped."""
    log, config = read_then_rotated_past_one_generation(
        tmp_path, "ERROR 0", [f"ERROR {k}" for k in (1, 2, 3)], max_matches=9)
    log.write_text("ERROR 4\n")
    second = once(tmp_path, config)
    assert table_row(second.out, "log")[:2] == ["log", "3"], second.out + second.err
    records, lines = records_and_lines(tmp_path, "log")
    assert lines == ["ERROR 0", "ERROR 1", "ERROR 3", "ERROR 4"]
    (gap,) = [r for r in records if r["kind"] == "gap"]
    assert (gap["reason"], gap["unreadBytes"], gap["generations"]) == (
        "max-generations", len("ERROR 2\n"), 1), gap
    assert gap["message"].endswith("(limits.maxGenerations=1): app.log.2"), gap


def test_an_environment_value_that_is_not_utf8_is_u_fffd_in_every_record(
        tmp_path: Path) -> None:
    """records.md: a byte that is not UTF-8 becomes U+FFFD in an environment value too (here
    interpolated into the command, so it is in the `start` record and the matched line)."""
    cfg = write_config(tmp_path, {"watchers": [{"id": "c", "command": ["printf", "ERROR %s\\n",
                                                                       "${X}"],
                                                "pattern": "ERROR", "gate": {"maxMatches": 1}}]})
    env = {**{k.encode(): v.encode() for k, v in base_env().items()}, b"X": b"a\xffb\xed\xa0\x80c"}
    proc = subprocess.run([watchrun_bin(), "run", "--once", "-c", str(cfg)], cwd=tmp_path,
                          env=env, capture_output=True, timeout=TIMEOUT_S, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    raw = (tmp_path / ".watchrun" / "watchers" / "c.jsonl").read_bytes()
    records = [json.loads(line) for line in raw.decode("utf-8").splitlines()]  # strict UTF-8
    (start,) = [r for r in records if r["kind"] == "start"]
    (match,) = [r for r in records if r["kind"] == "match"]
    assert "a\ufffdb" in json.dumps(start["command"], ensure_ascii=False), start
    assert match["line"].startswith("ERROR a\ufffdb"), match
    json.dumps(records, ensure_ascii=False).encode("utf-8")  # no lone surrogate in any string


def test_lines_recorded_past_a_lagging_checkpoint_are_skipped_and_counted(
        tmp_path: Path) -> None:
    """A runner that dies after writing records and before saving its checkpoint (injected:
    the checkpoint of the run before is put back) is followed by one that skips what was
    recorded, writes no match twice, and counts the lines it skipped (`skippedDuplicates`,
    `watchrun_skipped_duplicates_total`)."""
    log, state = tmp_path / "app.log", tmp_path / ".watchrun" / "state"
    config = {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR",
                            "gate": {"maxMatches": 9}}]}
    log.write_text("ERROR 1\n")
    assert once(tmp_path, config).rc == 0
    lagging = (state / "app.checkpoint.json").read_bytes()
    with open(log, "a") as fh:
        fh.write("ERROR 2\nINFO between\nERROR 3\nINFO after\n")
    assert once(tmp_path, config).rc == 0
    (state / "app.checkpoint.json").write_bytes(lagging)
    with open(log, "a") as fh:
        fh.write("ERROR 4\n")
    third = once(tmp_path, config)
    assert table_row(third.out, "app")[:2] == ["app", "1"], third.out + third.err
    assert records_and_lines(tmp_path, "app")[1] == ["ERROR 1", "ERROR 2", "ERROR 3", "ERROR 4"]
    status = json.loads((state / "app.status.json").read_text())
    assert status["skippedDuplicates"] == 3  # ERROR 2 to ERROR 3: read again as far as recorded


def test_a_once_run_watches_nothing_it_reads_to_the_end(tmp_path: Path) -> None:
    """Once mode reads each file to its end and stops: it asks the kernel for no change
    notification (the ready line says so), and still reads every line."""
    (tmp_path / "app.log").write_text("INFO a\nERROR one\nERROR two\n")
    r = once(tmp_path, {"watchers": [{"id": "log", "path": "app.log", "pattern": "ERROR",
                                      "fromStart": True, "gate": {"maxMatches": 2}}]})
    assert r.rc == 0, r.out + r.err
    assert "(change notification: none)" in r.err
    assert table_row(r.out, "log")[:2] == ["log", "2"]


def test_agents_run_only_when_woken_and_their_turns_are_awaited(tmp_path: Path) -> None:
    (tmp_path / "app.log").write_text("INFO a\nERROR disk full\n")
    config = {
        "watchers": [{"id": "log", "path": "app.log", "pattern": "ERROR", "wake": "triage",
                      "gate": {"maxMatches": 1}}],
        "agents": [{"name": "triage", "provider": "mock", "prompt": "look: {matches}"},
                   {"name": "bystander", "provider": "mock"}],
    }
    r = once(tmp_path, config)
    assert r.rc == 0, r.out + r.err
    out = tmp_path / ".watchrun" / "agents"
    for name, turns in (("triage", ["done"]), ("bystander", [])):
        records = read_records(out / f"{name}.jsonl")
        assert [x["status"] for x in records if x["kind"] == "dispatch-finished"] == turns
    assert r.took < 10.0


def test_a_prompt_too_big_for_one_argument_is_cut_in_its_middle_not_refused_by_exec(
        tmp_path: Path) -> None:
    """Three matched lines of 50 000 bytes (within the default maxLineBytes and matchLines) made
    a 150 KB prompt for an agent whose command holds `{prompt}`: Linux refuses an argument over
    128 KiB (E2BIG), so the agent failed to start each time it was woken. Its prompt's middle is
    cut to fit, the cut is said in the prompt, its record (`cutBytes`) and the log, and the
    agent gets the template's words from before and after the matches."""
    (tmp_path / "app.log").write_text("".join(f"ERROR {i} {'z' * 50_000}\n" for i in range(3)))
    echo = ("import sys; a = sys.argv[1]; print(len(a.encode()), "
            "a.startswith('Fix these:\\nERROR 0 z'), a.endswith('\\nThen run the tests.'))")
    config = {
        "watchers": [{"id": "log", "path": "app.log", "pattern": "ERROR", "fromStart": True,
                      "wake": "fixer"}],
        "agents": [{"name": "fixer", "provider": "generic", "prompt": "Fix these:\n{matches}\n"
                    "Then run the tests.", "command": [sys.executable, "-c", echo, "{prompt}"]}],
    }
    r = once(tmp_path, config)
    assert r.rc == 0, r.out + r.err
    records = read_records(tmp_path / ".watchrun" / "agents" / "fixer.jsonl")
    (finished,) = [x for x in records if x["kind"] == "dispatch-finished"]
    assert finished["status"] == "done", finished
    (said,) = [x["text"] for x in records if x["kind"] == "text"]
    size, head, tail = said.split()
    assert int(size) <= 128 * 1024 - 1 and (head, tail) == ("True", "True"), said
    (prompt,) = [x for x in records if x["kind"] == "prompt"]
    assert prompt["cutBytes"] > 150_000 - 128 * 1024, prompt.get("cutBytes")
    assert f"[… {prompt['cutBytes']} bytes of this prompt cut here" in prompt["text"]
    assert f"{prompt['cutBytes']} bytes cut from the middle of its prompt" in r.err
    assert "(give the prompt on stdin: leave {prompt} out of the command)" in r.err  # (it works)


def test_a_command_without_prompt_gets_the_whole_prompt_on_its_stdin(tmp_path: Path) -> None:
    """The cut's warning says to leave `{prompt}` out to get the prompt on stdin, but the prompt
    was then appended as the last argument and cut all the same: there was no way to give an
    agent a long prompt whole. Without `{prompt}` it is on stdin, nothing cut."""
    (tmp_path / "app.log").write_text("".join(f"ERROR {i} {'z' * 50_000}\n" for i in range(3)))
    echo = ("import sys; a = sys.stdin.read(); print(len(a.encode()), len(sys.argv), "
            "a.startswith('Fix these:\\nERROR 0 z'), a.endswith('\\nThen run the tests.'))")
    config = {
        "watchers": [{"id": "log", "path": "app.log", "pattern": "ERROR", "fromStart": True,
                      "wake": "fixer"}],
        "agents": [{"name": "fixer", "provider": "generic", "prompt": "Fix these:\n{matches}\n"
                    "Then run the tests.", "command": [sys.executable, "-c", echo]}],
    }
    r = once(tmp_path, config)
    assert r.rc == 0, r.out + r.err
    records = read_records(tmp_path / ".watchrun" / "agents" / "fixer.jsonl")
    (said,) = [x["text"] for x in records if x["kind"] == "text"]
    (prompt,) = [x for x in records if x["kind"] == "prompt"]
    assert "cutBytes" not in prompt and "cut from the middle" not in r.err
    assert said.split() == [str(len(prompt["text"].encode())), "1", "True", "True"], said
    assert len(prompt["text"].encode()) > 150_000


def test_files_are_scanned_after_the_commands_that_write_them(tmp_path: Path) -> None:
    config = {"watchers": [
        {"id": "build", "command": "echo compiling; echo 'ERROR in build.log' > build.log; "
         "echo done", "pattern": "nothing-here"},
        {"id": "buildlog", "path": "build.log", "pattern": "ERROR", "fromStart": True,
         "gate": {"maxMatches": 0}},
    ]}
    r = once(tmp_path, config)
    assert r.rc == 1, r.out + r.err
    assert table_row(r.out, "buildlog")[:2] == ["buildlog", "1"]


RAW_UNSAFE = ("\x1b", "\x07", "\u202e", "\u2028")
"""ESC, BEL, a right-to-left override, a line separator: none may reach the terminal raw."""


def test_hostile_file_names_and_lines_reach_the_log_escaped(tmp_path: Path) -> None:
    """The verdict's `path:line`, its matched line, its GitHub annotation and the echo of a
    command's output printed escape sequences, bidi controls and U+2028 as they came (`list`
    and `matches` showed them escaped)."""
    name = "lo\x1b[31mg\x1b]0;title\x07\u202e.log"
    (tmp_path / name).write_text("ERROR deploy ok \u202egnp.exe\u2028forged\n")
    conf = {"watchers": [
        {"id": "f", "path": "${P}", "pattern": "ERROR", "fromStart": True,
         "gate": {"maxMatches": 0}},
        {"id": "c", "command": [PY, "-c", "print('echo \\u202eright\\u2028left')"],
         "pattern": "NOTHING"}]}
    run = once(tmp_path, conf, P=str(tmp_path / name), GITHUB_ACTIONS="true",
               GITHUB_WORKSPACE=str(tmp_path))
    assert run.rc == 1, run.err
    assert not any(c in run.out for c in RAW_UNSAFE), run.out
    assert "echo \\u202eright\\u2028left" in run.out  # the echo
    (annotation,) = [ln for ln in run.out.splitlines() if ln.startswith("::error ")]
    assert "gnp.exe" in annotation and "\\u202e" in annotation
    assert "ERROR deploy ok \\u202egnp.exe\\u2028forged" in run.out  # the table's evidence


def test_a_gate_on_a_procfs_file_fails_closed(tmp_path: Path) -> None:
    """/proc files say size 0 whatever they hold: the file was "read to its end" at 0 bytes and
    its gate passed with nothing read."""
    if not Path("/proc/self/status").exists():
        pytest.skip("no procfs here")
    run = once(tmp_path, {"watchers": [{"id": "p", "path": "/proc/self/status",
                                        "pattern": "^Name", "fromStart": True,
                                        "gate": {"maxMatches": 0}}]}, "--quiet")
    assert run.rc == 3, run.out
    assert "is a procfs pseudo-file, not a regular file: its size says nothing" in run.out


def test_a_failed_agent_turn_or_action_is_a_warning_not_a_verdict(tmp_path: Path) -> None:
    """docs/cli.md: agents and actions react to the lines, the gate judges them. A woken agent
    that cannot start and an action that fails are warnings with their records; the gate that
    holds passes (exit 0), the one crossed fails (exit 1): neither becomes an ERROR."""
    config: dict[str, Any] = {
        "agents": [{"name": "bad", "provider": "generic",
                    "command": ["/nonexistent/agent", "{prompt}"]}],
        "watchers": [{**gated("a", "echo ERROR", "ERROR", maxMatches=5), "wake": "bad",
                      "actions": [{"type": "exec", "name": "seven",
                                   "command": ["sh", "-c", "exit 7"]}]}]}
    r = once(tmp_path, config)
    assert (r.rc, table_row(r.out, "a")[-1]) == (0, "pass"), r.out + r.err
    assert "warning" in r.err and "cannot start '/nonexistent/agent'" in r.err, r.err
    out = tmp_path / ".watchrun"
    (finished,) = [x for x in read_records(out / "agents" / "bad.jsonl")
                   if x["kind"] == "dispatch-finished"]
    assert finished["status"] == "failed"
    (result,) = [x for x in read_records(out / "watchers" / "a.jsonl")
                 if x["kind"] == "action-result"]
    assert (result["action"], result["status"]) == ("seven", "failed"), result
    config["watchers"][0]["gate"] = {"maxMatches": 0}
    crossed = once(tmp_path, config)
    assert (crossed.rc, table_row(crossed.out, "a")[-1]) == (1, "FAIL"), crossed.out
