"""Signals after the runner's loop gave them back, while the process exits (asyncio's
teardown, the wait for calls still running, a once run's verdict, the log's last lines): they
got the default disposition there, so a SIGHUP (logrotate's postrotate) ended the runner with
129 and no word, sometimes before a once run's verdict was printed, and a SIGTERM or SIGINT
ended it by the signal instead of with its status (a tester's F4, 2026-12-06). The seam sends
the signals the moment the loop gives them back."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from liverunner import wait_for, write_config

SIGNALLED_AFTER_THE_LOOP = """
import os, signal, sys
import watchrun.runtime.signals as signals
close = signals.SignalInbox.close
def close_then_signalled(self):
    left = close(self)
    for name in os.environ["LATE_SIGNALS"].split():
        os.kill(os.getpid(), getattr(signal, name))
    return left
signals.SignalInbox.close = close_then_signalled
sys.argv = ["watchrun", *sys.argv[1:]]
from watchrun.cli import entry
sys.exit(entry())
"""

CASES = [
    ("run", "SIGHUP", 0), ("run", "SIGTERM", 0), ("run", "SIGINT", 0),
    ("run", "SIGHUP SIGTERM SIGINT", 0),
    ("once", "SIGHUP", 0), ("once", "SIGTERM", 3), ("once", "SIGINT", 3)]
"""(mode, the signals, the exit status): a live runner exits with its status; a once run a
stop signal reached before its verdict was out is never a pass, and a SIGHUP is nothing."""


@pytest.mark.parametrize(("mode", "signals", "status"), CASES)
def test_a_signal_after_the_loop_leaves_the_exit_status_as_promised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, signals: str,
        status: int) -> None:
    from test_stuck_calls import seamed_runner

    (tmp_path / "app.log").write_text("all well\n")
    cfg = write_config(tmp_path, {"watchers": [{"id": "app", "path": "app.log",
                                                "pattern": "ERROR", "gate": {"maxMatches": 0}}]})
    monkeypatch.setenv("LATE_SIGNALS", signals)
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


SIGNALLED_IN_ITS_STOP = """
import os, signal, sys
import watchrun.runtime.shutdown as shutdown
stop_everything = shutdown._stop_everything
async def signalled_first(sup, reason):
    os.kill(os.getpid(), signal.SIGTERM)
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
    never a pass."""
    from test_stuck_calls import seamed_runner

    (tmp_path / "app.log").write_text("all well\n")
    cfg = write_config(tmp_path, {"watchers": [{"id": "app", "path": "app.log",
                                                "pattern": "ERROR", "gate": {"maxMatches": 0}}]})
    with seamed_runner(SIGNALLED_IN_ITS_STOP, cfg) as (proc, err):
        assert proc.wait(timeout=20) == 3, "".join(err)
    assert "the run was interrupted by SIGTERM: exit 3" in "".join(err)
