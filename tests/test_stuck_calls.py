"""A blocking call that never returns (a checkpoint written to a dead NFS mount) cannot keep a
stopped runner alive: asyncio's default executor joined its threads without a bound, so a
SIGTERM'd runner stopped everything and then never exited. The loop's worker threads
(`watchrun.runtime.workers.Workers`) are daemon threads whose close waits a bounded time and
names what is still running; the runner says so and exits 3."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from liverunner import wait_for, write_config

from watchrun.runtime.workers import GRACE_S, Workers, run_with_workers

HANGS = """
import os, sys, threading
from watchrun.sources.checkpoints import CheckpointStore
real = CheckpointStore.save
class Dead:
    def save(self, *args, **kwargs):
        if os.path.exists("hang"):  # from now on the state dir's file system never answers
            threading.Event().wait()
        return real(self, *args, **kwargs)
CheckpointStore.save = Dead.save
sys.argv = ["watchrun", *sys.argv[1:]]
from watchrun.cli.main import main
sys.exit(main())
"""
"""`watchrun` whose checkpoint saves block forever once the file `hang` exists (the seam: a
file system that stops answering cannot be made on demand)."""


def test_a_runner_whose_checkpoint_save_hangs_still_exits_on_sigterm(tmp_path: Path) -> None:
    (tmp_path / "app.log").write_text("")
    cfg = write_config(tmp_path, {"limits": {"stopTimeout": "100ms"}, "watchers": [
        {"id": "log", "path": "app.log", "pattern": "ERROR"}]})
    proc = subprocess.Popen([sys.executable, "-c", HANGS, "-c", str(cfg)], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = proc.stderr
    assert stderr is not None
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.extend(iter(stderr.readline, "")))
    reader.start()
    try:
        checkpoint = tmp_path / ".watchrun" / "state" / "log.checkpoint.json"
        wait_for(checkpoint.exists, "the start's checkpoint")  # saved before READY: from now
        (tmp_path / "hang").touch()  # on only a record makes the next save
        with (tmp_path / "app.log").open("a") as fh:
            fh.write("ERROR one\n")  # a record, so a checkpoint save that will hang
        jsonl = tmp_path / ".watchrun" / "watchers" / "log.jsonl"
        wait_for(lambda: b'"kind":"match"' in jsonl.read_bytes(), "the match record")
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)  # it used to wait for the hung call forever
    finally:
        proc.kill()
        reader.join(10)
    text = "".join(err)
    assert rc == 3, text
    assert f"blocking calls still running {GRACE_S:g} s after the stop (" in text, text
    assert "Dead.save" in text and "a file system that does not answer?" in text


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
