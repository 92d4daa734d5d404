"""A runner's stop has one deadline, twice limits.stopTimeout plus 10 s from the stop signal,
which holds wherever the process is held. An output dir that stopped answering kept a SIGTERMed
runner alive as long as it hung (its event loop held in the write of a `stop` record, or of a
match before the signal came, which then was not acted on at all), and where a stop's waits were
bounded they added up (a JSONL's close 10 s, then the last status snapshots 10 s, then 5 s for
the threads): past systemd's TimeoutStopSec. The runner now says what holds it and exits 3 at
the deadline; its commands are ended all the same."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from liverunner import alive, guardian_of, spawned_by, wait_for, write_config

BOUND_S = 2.2
"""The seams' bound: twice the configs' stopTimeout (0.1 s) plus 2 s (10 s in the runner)."""

PROLOGUE = """
import os, sys, threading
import watchrun.offload, watchrun.runtime.lag
watchrun.offload.STOP_MARGIN_S = 2.0  # (10 s: the stop's bound, beyond twice stopTimeout)
watchrun.runtime.lag.STALL_S = 1.0  # (5 s: a stalled loop is said)
"""
TAIL = """
sys.argv = ["watchrun", *sys.argv[1:]]
from watchrun.cli import entry
sys.exit(entry())
"""
HELD_WRITE = PROLOGUE + """
from watchrun.output.sink import JsonlSink
real = JsonlSink._write_all
never, _ = os.pipe()  # nothing is ever written to it: a read of it never returns
def _write_all(self, data):
    if {held!r} in data:  # the output dir's file system stops answering this write: it waits
        os.read(never, 1)  # in the kernel, on the loop, as one to a dead FUSE or NFS server
    return real(self, data)
JsonlSink._write_all = _write_all
""" + TAIL
"""`watchrun` whose write of a record holding `held` never returns, on the loop."""
HUNG_CALLS = PROLOGUE + """
from watchrun.output.sink import JsonlSink
from watchrun.runtime.status_files import SnapshotFiles
close, store = JsonlSink.close, SnapshotFiles.store
def hang():
    if os.path.exists("hang"):  # from now on the output dir's file system never answers
        threading.Event().wait()
class Dead:
    def close(self, *args, **kwargs):
        hang()
        return close(self, *args, **kwargs)
    def store(self, *args, **kwargs):
        hang()
        return store(self, *args, **kwargs)
JsonlSink.close, SnapshotFiles.store = Dead.close, Dead.store
""" + TAIL
"""`watchrun` whose JSONL closes and status snapshot writes (off the loop, in worker threads)
never return once the file `hang` exists."""


@contextlib.contextmanager
def started(code: str, folder: Path) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """The seamed runner on a config of a file watcher and a command watcher whose command
    leaves a process that escaped its group (`setsid`), in a session of its own; its stderr
    lines gathered as they come. Killed on the way out, with what it left."""
    (folder / "app.log").write_text("")
    cfg = write_config(folder, {"limits": {"stopTimeout": "100ms"}, "watchers": [
        {"id": "log", "path": "app.log", "pattern": "ERROR"},
        {"id": "cmd", "command": "setsid sleep 601 & echo ERROR up; sleep 600",
         "pattern": "ERROR"}]})
    proc = subprocess.Popen([sys.executable, "-c", code, "run", "-c", str(cfg)], cwd=folder,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    stderr = proc.stderr
    assert stderr is not None
    err: list[str] = []
    threading.Thread(target=lambda: err.extend(iter(stderr.readline, "")), daemon=True).start()
    try:
        wait_for(lambda: "2 watchers, 0 agents running" in "".join(err) and all(
            spawned_by(proc.pid, b"sleep\0" + n) for n in (b"600", b"601")),
            "the start, and the command's two sleeps")
        yield proc, err
    finally:
        proc.kill()
        proc.wait()
        for pid in spawned_by(proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def stop_timed(proc: subprocess.Popen[str]) -> tuple[int, float]:
    """SIGTERM the runner; its exit status and how long after the signal it exited (it used to
    stay as long as the file system hung: here, for good). Then its command's processes and
    its guardian are ended."""
    guardian = guardian_of(proc.pid)
    proc.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    rc = proc.wait(timeout=60)
    took = time.monotonic() - sent
    wait_for(lambda: not spawned_by(proc.pid) and not alive(guardian),
             "the command's processes and the guardian to be ended", timeout=10)
    return rc, took


def test_a_stop_held_in_a_write_of_its_stop_record_ends_at_the_deadline(tmp_path: Path) -> None:
    with started(HELD_WRITE.format(held=b'"kind":"stop"'), tmp_path) as (proc, err):
        rc, took = stop_timed(proc)
    text = "".join(err)
    assert rc == 3, text
    assert BOUND_S - 0.1 < took < BOUND_S + 3.0, (took, text)
    assert "stopping (SIGTERM)" in text, text
    (said,) = [line for line in text.splitlines() if "the stop did not end" in line]
    assert f"error: the stop did not end within {BOUND_S:g} s of SIGTERM (twice " \
        "limits.stopTimeout plus 2 s): the event loop is held in _write_all (<string>:" in said
    assert "called from JsonlSink." in said and "(watchrun/output/sink.py:" in said, said
    assert ": a file system that does not answer? Exiting now; what its commands left running " \
        "is killed" in said, said
    assert "Traceback" not in text, text


def test_a_signal_that_came_while_a_write_held_the_loop_ends_it_at_the_deadline(
        tmp_path: Path) -> None:
    """The loop is held before the signal comes: the signal is not acted on (its handler runs
    once the write returns), nothing is TERMed, and still the runner exits at the deadline;
    the guardian ends the command's processes, the one that left its group too."""
    with started(HELD_WRITE.format(held=b"ERROR held"), tmp_path) as (proc, err):
        with (tmp_path / "app.log").open("a") as fh:
            fh.write("ERROR held\n")  # its match record's write holds the loop
        wait_for(lambda: "has not run for" in "".join(err), "the stall to be said")
        rc, took = stop_timed(proc)
    text = "".join(err)
    assert rc == 3, text
    assert BOUND_S - 0.1 < took < BOUND_S + 3.0, (took, text)
    assert "stopping" not in text, text  # (the loop never ran again)
    (said,) = [line for line in text.splitlines() if "the stop did not end" in line]
    assert f"the stop did not end within {BOUND_S:g} s of SIGTERM" in said, said
    assert "the event loop is held in _write_all (<string>:" in said, said


def test_the_waits_of_a_stop_are_one_deadline_not_a_sum(tmp_path: Path) -> None:
    """A JSONL's close and the last status snapshots, both hung (off the loop): each was given
    10 s, then the threads 5 s more; now all of them end by the stop's deadline, and the
    stop's own end says what it left running."""
    with started(HUNG_CALLS, tmp_path) as (proc, err):
        (tmp_path / "hang").touch()
        with (tmp_path / "app.log").open("a") as fh:
            fh.write("ERROR one\n")  # (a status snapshot to write: hung from now on)
        wait_for(lambda: "ERROR one" in "".join(err), "the match")
        rc, took = stop_timed(proc)
    text = "".join(err)
    assert rc == 3, text
    assert took < BOUND_S + 2.0, (took, text)  # (it took 35 s)
    assert "[log] error: closing its JSONL failed: Dead.close did not return by the stop's " \
        "deadline (a file system that does not answer?)" in text, text
    assert "error: the last status snapshots were not written: Dead.store did not return by " \
        "the stop's deadline" in text, text
    # (the snapshots' periodic write, and the last one; on a slow host also the guardian's
    # goodbye, begun after the hung calls had spent the deadline: a CI run listed it fifth)
    said = "a file system that does not answer? Exiting without them"
    assert any(f"error: {n} blocking calls still running at the end of the stop (Dead.close, "
               f"Dead.close, Dead.store, Dead.store{more}): {said}" in text
               for n, more in ((4, ""), (5, ", LazyGuardian.close"))), text
    assert "the stop did not end" not in text, text  # (its own end said it, in time)


def test_a_run_is_not_cut_by_the_deadline_an_earlier_run_of_the_process_left(
        tmp_path: Path) -> None:
    """The deadline's thread could take a once run's own end for a stop after the run had ended
    (`stopping()` seen as the loop was leaving) and set a deadline nothing cleared: the next
    runner in the same process (a `watchrun mcp` session's, a test's) found it long past at
    its stop, and every last record timed out at once (`its records could not be written: the
    stop record`, exit 3). Here the earlier run's deadline is set, and past, before the run."""
    from test_once import once

    from watchrun import offload

    (tmp_path / "app.log").write_text("INFO fine\n")
    offload.stop_by(time.monotonic() - 60)
    try:
        run = once(tmp_path, {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR",
                                            "fromStart": True, "gate": {"maxMatches": 0}}]})
    finally:
        offload.stop_by(None)
    assert run.rc == 0, run.out + run.err
