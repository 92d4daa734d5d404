"""Signals after the runner's loop gave them back, while the process exits (asyncio's
teardown, the wait for calls still running, a once run's verdict, the log's last lines): they
got the default disposition there, so a SIGHUP (logrotate's postrotate) ended the runner with
129 and no word, sometimes before a once run's verdict was printed, and a SIGTERM or SIGINT
ended it by the signal instead of with its status (a tester's F4, 2026-12-06). The seam sends
the signals the moment the loop gives them back."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from liverunner import DEADLINE_S, read_records, wait_for, watchrun_bin, write_config

SIGNALLED_AFTER_THE_LOOP = """
import atexit, os, signal, sys
import watchrun.runtime.signals as signals
close = signals.SignalInbox.close
def signalled():
    for name in os.environ["LATE_SIGNALS"].split():
        os.kill(os.getpid(), getattr(signal, name))
def close_signalled(self):
    if os.environ["LATE_WHEN"] == "before":
        signalled()
    left = close(self)
    if os.environ["LATE_WHEN"] == "after":
        signalled()
    return left
signals.SignalInbox.close = close_signalled
def at_the_end():  # (the last of the exit's own calls: Python's finalization comes next)
    with open("dispositions", "w") as f:
        f.write(" ".join("ignored" if signal.getsignal(s) == signal.SIG_IGN else "caught"
                         for s in (1, 2, 15)))
atexit.register(at_the_end)
sys.argv = ["watchrun", *sys.argv[1:]]
from watchrun.cli import entry
sys.exit(entry())
"""
"""`watchrun` sent LATE_SIGNALS by itself just before (LATE_WHEN=before: handled, their calls
to the loop not run yet) or just after (after) its loop gives the signals back; it writes the
dispositions of SIGHUP, SIGINT and SIGTERM at its exit to `dispositions`."""

CASES = [
    ("run", "after", "SIGHUP", 0), ("run", "after", "SIGTERM", 0),
    ("run", "after", "SIGINT", 0), ("run", "after", "SIGHUP SIGTERM SIGINT", 0),
    ("once", "after", "SIGHUP", 0), ("once", "after", "SIGTERM", 3),
    ("once", "after", "SIGINT", 3), ("once", "before", "SIGTERM", 3)]
"""(mode, when, the signals, the exit status): a live runner exits with its status; a once run
a stop signal reached before its verdict was out is never a pass (also one whose call to the
loop had not run as the loop ended: it was lost), and a SIGHUP is nothing."""


@pytest.mark.parametrize(("mode", "when", "signals", "status"), CASES)
def test_a_signal_after_the_loop_leaves_the_exit_status_as_promised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, when: str, signals: str,
        status: int) -> None:
    """Also: at the exit's last own call these signals are ignored, since Python's
    finalization then gives every signal it handles its default back (a SIGTERM in the last
    milliseconds ended a once run that had printed its pass with 143)."""
    from test_stuck_calls import seamed_runner

    (tmp_path / "app.log").write_text("all well\n")
    cfg = write_config(tmp_path, {"watchers": [{"id": "app", "path": "app.log",
                                                "pattern": "ERROR", "gate": {"maxMatches": 0}}]})
    monkeypatch.setenv("LATE_SIGNALS", signals)
    monkeypatch.setenv("LATE_WHEN", when)
    code = SIGNALLED_AFTER_THE_LOOP
    if mode == "once":
        code = code.replace('*sys.argv[1:]]', '"run", "--once", *sys.argv[1:]]')
    with seamed_runner(code, cfg) as (proc, err):
        if mode == "run":
            wait_for(lambda: "1 watcher, 0 agents running" in "".join(err), "the start")
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == status, "".join(err)
    said = "".join(err)
    assert "Traceback" not in said
    if mode == "once":
        assert ("the run was interrupted by SIG" in said) == (status == 3), said
    assert (tmp_path / "dispositions").read_text() == "ignored ignored ignored"


SIGNALLED_IN_ITS_STOP = """
import asyncio, os, signal, sys
import watchrun.runtime.shutdown as shutdown
stop_everything = shutdown._stop_everything
async def signalled_first(sup, reason):
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(1000):  # (until the stop under way has heard it)
        if sup.stop_reason != "once":
            break
        await asyncio.sleep(0.01)
    await stop_everything(sup, reason)
shutdown._stop_everything = signalled_first
sys.argv = ["watchrun", "run", "--once", *sys.argv[1:]]
from watchrun.cli import entry
sys.exit(entry())
"""


def test_a_once_run_signalled_during_its_own_stop_is_no_pass(tmp_path: Path) -> None:
    """A SIGTERM while a once run stopped after it ended by itself was taken as the second
    signal and the verdict then passed (exit 0), where a few ms later it was 143 and during the
    report 3 (a tester's U1). A once run a stop signal reached before its verdict was out is
    never a pass. That one signal kills what remains, and the log says which did: "second
    signal" counted the run's own end as the first (a fourth explorer's N2)."""
    from test_stuck_calls import seamed_runner

    (tmp_path / "app.log").write_text("all well\n")
    cfg = write_config(tmp_path, {"watchers": [{"id": "app", "path": "app.log",
                                                "pattern": "ERROR", "gate": {"maxMatches": 0}}]})
    with seamed_runner(SIGNALLED_IN_ITS_STOP, cfg) as (proc, err):
        assert proc.wait(timeout=20) == 3, "".join(err)
    said = "".join(err)
    assert "the run was interrupted by SIGTERM: exit 3" in said
    assert "SIGTERM while stopping (once): killing what remains now" in said, said
    assert "second signal" not in said, said


def test_a_stop_inside_an_extensions_init_during_the_report_is_no_pass(tmp_path: Path) -> None:
    """A SIGTERM while the verdict's report imported the JUnit writer's C accelerator
    (`_elementtree`, whose init imports `pyexpat`) waited for that import to end; the report
    was done before it looked again, and the stop was dropped: the run passed (exit 0). The
    seam makes the look again come only after 60 s: the report's end acts on it."""
    from test_signals_early import stop_in_import_env

    (tmp_path / "app.log").write_text("all well\n")
    write_config(tmp_path, {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR",
                                          "gate": {"maxMatches": 0}}]})
    proc = subprocess.run(
        [watchrun_bin(), "run", "--once", "-c", "watch.yaml", "--junit", "report.xml"],
        cwd=tmp_path, capture_output=True, text=True, timeout=DEADLINE_S,
        env=stop_in_import_env(tmp_path, "pyexpat", "_elementtree", STOP_LOOK_S="60"))
    assert (tmp_path / "sent").exists(), proc.stderr
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    assert "the run was interrupted by SIGTERM while its verdict was reported" in proc.stderr


HURRIED = """
import os, sys
import watchrun.output.logstream, watchrun.runtime.signals as signals
watchrun.output.logstream.EXIT_WAIT_S = 30.0  # (2 s: how long a reader may take nothing)
close = signals.SignalInbox.close
def close_said(self):
    left = close(self)
    open("closed", "w").close()
    return left
signals.SignalInbox.close = close_said
sys.argv = ["watchrun", *sys.argv[1:]]
from watchrun.cli import entry
sys.exit(entry())
"""
"""`watchrun` whose exit waits 30 s for a log reader that takes nothing, and that makes the
file `closed` as its loop gives the signals back."""


def test_a_stop_after_the_loop_cuts_the_wait_for_the_log_reader_short(tmp_path: Path) -> None:
    """Once the runner had stopped, signals changed nothing, so its exit waited for a stderr
    reader as long as that took something (44 s after a SIGTERM, seen by a third explorer:
    S6) or for EXIT_WAIT_S when it took nothing. A stop then cuts the wait short: what the
    reader has not taken is left out."""
    import fcntl
    import sys

    ids = [f"command-{i:02}" for i in range(40)]  # (their log: more than the pipe holds)
    cfg = write_config(tmp_path, {"limits": {"maxWatchers": 40}, "watchers": [
        {"id": i, "pattern": "^x", "command": "echo x"} for i in ids]})
    proc = subprocess.Popen([sys.executable, "-c", HURRIED, "run", "-c", str(cfg)],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    fcntl.fcntl(proc.stderr, fcntl.F_SETPIPE_SZ, 4096)
    outs = [tmp_path / ".watchrun" / "watchers" / f"{i}.jsonl" for i in ids]
    try:  # stderr is never read: its log lines wait
        wait_for(lambda: all(any(r["kind"] == "exit" for r in read_records(o)) for o in outs),
                 "every command to have ended")
        proc.send_signal(signal.SIGTERM)
        wait_for((tmp_path / "closed").exists, "the loop to give the signals back")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0  # (not 30 s)
    finally:
        proc.kill()
        proc.communicate()
