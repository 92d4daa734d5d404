"""`run --once` fails closed where its gate did not see everything it was to judge: a
generation gone with what it got since the last run unknown, a command whose exit says it
could not run (126, 127), a command killed by a signal it did not get from the runner."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from liverunner import read_records
from test_once import gated, once, rotated_by_rename, table_row

LOG_GATE = {"watchers": [{"id": "a", "path": "app.log", "pattern": "ERROR",
                          "gate": {"maxMatches": 0}}]}


def test_a_generation_gone_since_the_last_run_is_no_pass(tmp_path: Path) -> None:
    """Read to its end, then `ERROR lost` appended, the log rotated and the rotated file
    deleted (logrotate `rotate 0`): a `gap{missing}` with `unreadBytes: 0` (a lower bound: not
    known) was only a warning, and the gate passed (exit 0) over a line nobody read."""
    log = tmp_path / "app.log"
    log.write_text("ok\n")
    assert once(tmp_path, LOG_GATE).rc == 0
    rotated_by_rename(log, "ERROR lost", "fresh").unlink()
    r = once(tmp_path, LOG_GATE, "--junit", "report.xml")
    assert (r.rc, table_row(r.out, "a")[1:]) == (3, ["0", "0", "-", "ERROR"]), r.out + r.err
    assert "\na: could not look at every line\n" \
           f"  - lines of {log} may never have been read: the generation being read (inode " \
           in r.out, r.out
    assert "is gone from line 2 (offset 3) on" in r.out
    assert "nor any generation created and deleted while the runner was not looking (a log " \
           "deleted on purpose between two runs, as `make clean` does, is judged whole with a " \
           "fresh --output-dir per build)\n" in r.out, r.out
    assert r.out.rstrip().endswith("watchrun: FAILED: 1 watcher could not look at every line")
    gaps = [x for x in read_records(tmp_path / ".watchrun" / "watchers" / "a.jsonl")
            if x["kind"] == "gap"]
    assert [(x["reason"], x["unreadBytes"]) for x in gaps] == [("missing", 0)]
    doc = json.loads(once(tmp_path, LOG_GATE, "--json").out)  # said once: the next run
    assert (doc["passed"], doc["errors"]) == (True, 0)  # reads on from there


def test_a_log_rotated_between_runs_and_kept_is_no_gap(tmp_path: Path) -> None:
    """A rotated generation still beside the log is read on, not called gone: a pass where
    no line matches, no `gap` record."""
    log = tmp_path / "app.log"
    log.write_text("ok\n")
    assert once(tmp_path, LOG_GATE).rc == 0
    rotated_by_rename(log, "more", "fresh")
    r = once(tmp_path, LOG_GATE)
    assert (r.rc, table_row(r.out, "a")[1:]) == (0, ["0", "0", "-", "pass"]), r.out + r.err
    kinds = [x["kind"] for x in read_records(tmp_path / ".watchrun" / "watchers" / "a.jsonl")]
    assert "gap" not in kinds and "rotate" in kinds, kinds



def test_a_command_that_could_not_run_fails_a_gate_without_exit_code(tmp_path: Path) -> None:
    """A string command whose program is missing (the shell's 127) and a list command whose
    `#!/usr/bin/env` interpreter is missing (env's 127), gated on `maxMatches` alone: "passed",
    exit 0, for a build that never ran. Now each "could not run", exit 3, as the list command
    whose program is missing already was."""
    script = tmp_path / "s.sh"
    script.write_text("#!/usr/bin/env no-such-interpreter-watchrun\necho hi\n")
    script.chmod(0o755)
    watchers = [gated("shell", "no-such-make-watchrun test", "ERROR|warning", maxMatches=0),
                gated("env", ["./s.sh"], "ERROR", maxMatches=0)]
    r = once(tmp_path, {"watchers": watchers}, "--junit", "report.xml")
    assert r.rc == 3, r.out + r.err
    assert [table_row(r.out, w)[1:] for w in ("shell", "env")] == \
           [["0", "0", "127", "ERROR"]] * 2, r.out
    assert "\nshell: could not run\n  - the command exited with code 127 (the shell's code " \
           "for a command not found): it may never have run\n" in r.out, r.out
    assert "\nenv: could not run\n  - the command exited with code 127 (the code a shell or " \
           "`#!/usr/bin/env` exits with for a command not found): it may never have run\n" \
           in r.out, r.out
    assert r.out.rstrip().endswith("watchrun: FAILED: 2 watchers could not run")
    doc = json.loads(once(tmp_path, {"watchers": watchers[:1]}, "--json").out)
    assert (doc["passed"], doc["verdicts"][0]["errorKind"]) == (False, "not-run")


SEGV = shlex.join([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"])
"""A program that dies of SIGSEGV (as a string command: a child of the shell, which says so by
its exit code 139)."""


def test_a_command_killed_by_a_signal_is_no_pass(tmp_path: Path) -> None:
    """SIGKILLed part-way (the OOM killer's signal) under a gate of `maxMatches` alone: the
    line it would have printed next was never seen, and the gate passed (exit 0). Now the
    verdict says so, an ERROR (exit 3); with `exitCode: true` its death crosses the gate. A
    string command's program killed so is said by its shell's exit code 128+N: an ERROR too
    (it passed, exit 0, as a program's own exit code)."""
    body = "echo hi; kill -9 $$$$; echo ERROR never printed"  # ($$: a `$`)
    killed = gated("killed", ["sh", "-c", body], "ERROR", maxMatches=0)
    r = once(tmp_path, {"watchers": [killed]})
    assert (r.rc, table_row(r.out, "killed")[1:]) == (3, ["0", "0", "SIGKILL", "ERROR"]), r.out
    assert "\nkilled: could not look at every line\n  - the command was killed by SIGKILL: its " \
           "output may be incomplete (what it would still have printed was never seen)\n" \
           in r.out, r.out
    shell = gated("killed", "echo hi; " + SEGV + " && echo ERROR never printed", "ERROR",
                  maxMatches=0)  # (a string command: its shell, not it, exits 139)
    r = once(tmp_path, {"watchers": [shell]})
    assert (r.rc, table_row(r.out, "killed")[1:]) == (3, ["0", "0", "139", "ERROR"]), r.out
    assert "\nkilled: could not look at every line\n  - the command exited with code 139 (the " \
           "shell's code for a program killed by SIGSEGV): its output may be incomplete" \
           in r.out, r.out
    exits = gated("killed", ["sh", "-c", body], "ERROR", maxMatches=0, exitCode=True)
    r = once(tmp_path, {"watchers": [exits]})
    assert (r.rc, table_row(r.out, "killed")[1:]) == (1, ["0", "0", "SIGKILL", "FAIL"]), r.out
    assert "  - the command was killed by SIGKILL\n" in r.out
