"""A blocking call that never returns (a checkpoint written to a dead NFS mount) cannot keep a
stopped runner alive: asyncio's default executor joined its threads without a bound, so a
SIGTERM'd runner stopped everything and then never exited. The loop's worker threads
(`watchrun.runtime.workers.Workers`) are daemon threads whose close waits a bounded time and
names what is still running; the runner says so and exits 3."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from liverunner import read_records, wait_for, write_config

from watchrun.runtime.client import request
from watchrun.runtime.workers import Workers, run_with_workers

HANGS = """
import os, sys, threading
import watchrun.offload, watchrun.runtime.watchers, watchrun.runtime.workers
watchrun.offload.STOP_CALL_S, watchrun.runtime.workers.GRACE_S = 1.5, 1.0  # (10 s, 5 s)
watchrun.runtime.watchers.AFTER_GRACE_S = 1.0  # (5 s: a watcher's task past stopTimeout)
from {module} import {cls}
real = {cls}.{method}
class Dead:
    def {method}(self, *args, **kwargs):
        if os.path.exists("hang"):  # from now on the output dir's file system never answers
            threading.Event().wait()
        return real(self, *args, **kwargs)
{cls}.{method} = Dead.{method}
sys.argv = ["watchrun", *sys.argv[1:]]
from watchrun.cli import entry
sys.exit(entry())
"""
"""`watchrun` whose `{cls}.{method}` blocks forever once the file `hang` exists (the seam: a
file system that stops answering cannot be made on demand); a stop waits 1.5 s for a blocking
call, 1 s for a watcher's task past stopTimeout and the exit 1 s for the threads (10 s, 5 s and
5 s in the runner)."""
@contextlib.contextmanager
def seamed_runner(code: str, cfg: Path) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """`watchrun run -c cfg` through the seam `code`, its stderr lines gathered as they come;
    killed (if still running) on the way out."""
    proc = subprocess.Popen([sys.executable, "-c", code, "-c", str(cfg)], cwd=cfg.parent,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = proc.stderr
    assert stderr is not None
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.extend(iter(stderr.readline, "")))
    reader.start()
    try:
        yield proc, err
    finally:
        proc.kill()
        reader.join(10)


SEAMS = {  # (the seam, and the call the stop names: a checkpoint's save runs in its batch's)
    "a checkpoint save": ("watchrun.sources.checkpoints", "CheckpointStore", "save",
                          "CheckpointStore.save_all"),
    "a JSONL's close": ("watchrun.output.sink", "JsonlSink", "close", "Dead.close"),
    "a status snapshot's write": ("watchrun.runtime.status_files", "SnapshotFiles", "store",
                                  "Dead.store"),
}


@pytest.mark.parametrize("seam", sorted(SEAMS))
def test_a_runner_whose_call_hangs_still_exits_on_sigterm(tmp_path: Path, seam: str) -> None:
    module, cls, method, named = SEAMS[seam]
    (tmp_path / "app.log").write_text("")
    cfg = write_config(tmp_path, {"limits": {"stopTimeout": "100ms"}, "watchers": [
        {"id": "log", "path": "app.log", "pattern": "ERROR"}]})
    code = HANGS.format(module=module, cls=cls, method=method)
    with seamed_runner(code, cfg) as (proc, err):
        checkpoint = tmp_path / ".watchrun" / "state" / "log.checkpoint.json"
        wait_for(checkpoint.exists, "the start's checkpoint")  # saved before READY: from now
        (tmp_path / "hang").touch()  # on only a record makes the next save
        with (tmp_path / "app.log").open("a") as fh:
            fh.write("ERROR one\n")  # a record, so a checkpoint save that will hang
        jsonl = tmp_path / ".watchrun" / "watchers" / "log.jsonl"
        wait_for(lambda: b'"kind":"match"' in jsonl.read_bytes(), "the match record")
        proc.send_signal(signal.SIGTERM)  # (a JSONL is closed at the stop)
        rc = proc.wait(timeout=60)  # it used to wait for the hung call forever
    text = "".join(err)
    assert rc == 3, text
    assert " still running at the end of the stop (" in text, text
    stuck = [line for line in text.splitlines() if "at the end of the stop (" in line]
    assert stuck and named in stuck[0] and "a file system that does not answer?" in stuck[0]
    assert "internal error" not in text and "Traceback" not in text, text


def test_agent_run_whose_records_close_hangs_exits_3_naming_it(tmp_path: Path) -> None:
    """`agent run` closes its agent's records after the turn (an fsync); one that never
    returned held the command forever (its close and asyncio's executor waited without a
    bound). It exits 3 after the turn, saying what is still running."""
    cfg = tmp_path / "watch.yaml"
    cfg.write_text("agents:\n  - name: triage\n    provider: mock\n")
    (tmp_path / "hang").touch()  # every JSONL close blocks: the agent's, after its turn
    code = HANGS.format(module="watchrun.output.sink", cls="JsonlSink", method="close")
    proc = subprocess.run([sys.executable, "-c", code, "agent", "run", "triage", "-c",
                           str(cfg)], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "closing its records failed: Dead.close did not return in 1.5 s" in proc.stderr
    assert "watchrun: error: agent triage: " in proc.stderr
    assert " done, then 1 blocking call still running at the end of the stop (Dead.close): " \
        "a file system that does not answer?" in proc.stderr, proc.stderr
    records = read_records(tmp_path / ".watchrun" / "agents" / "triage.jsonl")
    assert [r["status"] for r in records if r["kind"] == "dispatch-finished"] == ["done"]


def test_results_and_exceptions_come_back_and_an_idle_thread_is_reused() -> None:
    pool = Workers()
    assert pool.submit(sum, [1, 2]).result(5) == 3
    with pytest.raises(ZeroDivisionError):
        pool.submit(lambda: 1 // 0).result(5)
    assert pool.submit(str.upper, "x").result(5) == "X"
    assert len(pool._daemons) == 1  # one at a time: the idle thread took each
    pool.shutdown()
    assert pool.stuck == []
    with pytest.raises(RuntimeError):
        pool.submit(print)


def stuck_forever(release: threading.Event) -> None:
    release.wait()


def test_close_waits_a_bounded_time_and_names_what_is_still_running() -> None:
    pool = Workers(grace_s=0.3)
    release = threading.Event()
    try:
        pool.submit(stuck_forever, release)
        wait_for(lambda: bool(pool._running), "the call to start")
        started = time.monotonic()
        pool.shutdown(wait=True)
        assert 0.25 <= time.monotonic() - started < 5
        assert pool.stuck == ["stuck_forever"]
        assert all(t.daemon for t in pool._daemons)  # the interpreter's exit does not wait
    finally:
        release.set()


def test_the_loop_uses_them_for_to_thread_and_its_close_is_bounded() -> None:
    pool = Workers(grace_s=0.3)
    release = threading.Event()

    async def main() -> str:
        asyncio.get_running_loop().run_in_executor(None, stuck_forever, release)
        thread = await asyncio.to_thread(threading.current_thread)
        return thread.name

    try:
        started = time.monotonic()
        assert run_with_workers(main(), pool).startswith("watchrun-worker-")
        assert time.monotonic() - started < 5 and pool.stuck == ["stuck_forever"]
    finally:
        release.set()


STALLS = """
import os, sys
import watchrun.runtime.lag as lag
lag.STALL_S = 1.0
from watchrun.sources.generation import Generation
real = Generation.drain
async def drain(self, *args, **kwargs):
    if os.path.exists("hang"):  # the watched file's file system does not answer: the read
        with open("hang", "rb") as fifo:  # blocks in the kernel, on the loop, asleep, until
            fifo.read()  # the test writes to `hang` (a FIFO) and closes it (no call here has
        os.unlink("hang")  # a frame of its own, as a read has not; a poll of `hang` every
    return await real(self, *args, **kwargs)  # 10 ms was seen running on a loaded host)
Generation.drain = drain
sys.argv = ["watchrun", *sys.argv[1:]]
from watchrun.cli import entry
sys.exit(entry())
"""
"""`watchrun` whose read of the watched file blocks the loop in a FIFO `hang` until it is
written to, with the stall reported after 1 s (5 s in the runner)."""


def test_a_loop_held_by_a_read_is_said_while_it_lasts_and_when_it_ends(tmp_path: Path) -> None:
    """A read of a watched file on a network file system that stops answering holds the loop
    (a known limit: docs/architecture.md). Nothing said so while it lasted: the loop-lag monitor
    runs on the loop, the log, `status` and the metrics were all silent. A thread now says it
    after STALL_S, naming where the loop is held, and the loop says when it runs again."""
    (tmp_path / "app.log").write_text("")
    cfg = write_config(tmp_path, {"watchers": [
        {"id": "log", "path": "app.log", "pattern": "ERROR"}]})
    with seamed_runner(STALLS, cfg) as (proc, err):
        wait_for(lambda: "1 watcher, 0 agents running" in "".join(err), "the start")
        os.mkfifo(tmp_path / "hang")
        with (tmp_path / "app.log").open("a") as fh:
            fh.write("ERROR one\n")  # its read holds the loop
        wait_for(lambda: "has not run for" in "".join(err), "the stall to be said")
        with (tmp_path / "hang").open("wb") as fifo:
            fifo.write(b"answered\n")
        wait_for(lambda: "runs again after a stall of" in "".join(err), "the end of the stall")
        jsonl = tmp_path / ".watchrun" / "watchers" / "log.jsonl"
        wait_for(lambda: b'"line":"ERROR one"' in jsonl.read_bytes(), "the match record")
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
    text = "".join(err)
    assert rc == 0, text
    (stalled,) = [line for line in text.splitlines() if "has not run for" in line]
    assert "watchrun: error: the event loop has not run for 1 s: it is held in drain " \
        "(<string>:" in stalled, stalled  # (the seam's own frame: a real read's is ours)
    assert "called from Followed._drain (watchrun/sources/followed.py:" in stalled, stalled
    assert "(a file system that does not answer?)" in stalled, stalled  # (off CPU: waiting)
    assert "warning: the event loop runs again after a stall of " in text
    assert "nothing is read, recorded or answered until it returns" in stalled


BUSY = """
import os, sys
import watchrun.runtime.lag as lag
lag.STALL_S = 1.0
from watchrun.output.sink import JsonlSink
real = JsonlSink.match_records
def match_records(self, *args, **kwargs):
    while os.path.exists("hang"):  # formatting records that takes seconds, on CPU
        pass
    return real(self, *args, **kwargs)
JsonlSink.match_records = match_records
sys.argv = ["watchrun", *sys.argv[1:]]
from watchrun.cli import entry
sys.exit(entry())
"""
"""`watchrun` whose match records take CPU while the file `hang` exists, its stalls said
after 1 s."""


def test_a_loop_held_by_the_runners_own_work_is_not_blamed_on_a_file_system(
        tmp_path: Path) -> None:
    """The loop held by a flood's records being formatted (explore-latency F1) was said as
    "held in JsonlSink.write_lines (...) (a file system that does not answer?)": the disk was
    fine. A stall during which the loop's thread was on CPU is said as the runner's own work."""
    (tmp_path / "app.log").write_text("")
    cfg = write_config(tmp_path, {"watchers": [
        {"id": "log", "path": "app.log", "pattern": "ERROR"}]})
    with seamed_runner(BUSY, cfg) as (proc, err):
        wait_for(lambda: "1 watcher, 0 agents running" in "".join(err), "the start")
        (tmp_path / "hang").touch()
        with (tmp_path / "app.log").open("a") as fh:
            fh.write("ERROR one\n")  # its record's formatting holds the loop
        wait_for(lambda: "has not run for" in "".join(err), "the stall to be said")
        (tmp_path / "hang").unlink()
        wait_for(lambda: "runs again after a stall of" in "".join(err), "the end of the stall")
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
    text = "".join(err)
    assert rc == 0, text
    (stalled,) = [line for line in text.splitlines() if "has not run for" in line]
    assert "called from WatcherPipeline." in stalled, stalled
    assert "(busy on CPU: the runner's own work, not a wait on storage)" in stalled, stalled
    assert "file system" not in stalled, stalled


SUSPENDABLE = """
import sys
import watchrun.runtime.lag as lag
lag.STALL_S = 1.0
sys.argv = ["watchrun", *sys.argv[1:]]
from watchrun.cli import entry
sys.exit(entry())
"""
"""`watchrun` with its stalls said after 1 s (5 s in the runner)."""


def test_a_stopped_process_is_said_as_such_not_as_a_file_system_that_does_not_answer(
        tmp_path: Path) -> None:
    """A runner SIGSTOPped for a while (a frozen container, `kill -STOP` by hand) said, once
    continued, that its event loop had been held in `EpollSelector.select` "(a file system that
    does not answer?)": an error that sent the operator looking at the disks. The guard thread
    was stopped as well: the loop, late by more than the stall bound with the process having used
    no CPU meanwhile, says that the whole process did not run (a warning), once it runs. Nor is
    it the loop's lag: `loopLagMaxS` (and the metrics' gauge) said 3 s for it, until a restart."""
    (tmp_path / "app.log").write_text("")
    cfg = write_config(tmp_path, {"watchers": [
        {"id": "log", "path": "app.log", "pattern": "ERROR"}]})
    with seamed_runner(SUSPENDABLE, cfg) as (proc, err):
        wait_for(lambda: "1 watcher, 0 agents running" in "".join(err), "the start")
        proc.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        wait_for(lambda: Path(f"/proc/{proc.pid}/stat").read_text().split(") ")[1][0] == "T",
                 "the runner to be stopped")
        wait_for(lambda: time.monotonic() - stopped > 3.0, "3 s of the fault")  # (its length)
        proc.send_signal(signal.SIGCONT)
        wait_for(lambda: "did not run for" in "".join(err), "the stall to be said")
        status = request(tmp_path / ".watchrun" / "control.sock", {"cmd": "status"}, timeout=30)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
    text = "".join(err)
    assert rc == 0, text
    assert status["loopLagMaxS"] < 1.0, status
    assert "has not run for" not in text and "runs again" not in text, text
    (said,) = [line for line in text.splitlines() if "did not run for" in line]
    assert "watchrun: warning: the runner did not run for " in said and \
        "the whole process was stopped (SIGSTOP, a frozen container or VM, a host out of CPU)" \
        in said, said
