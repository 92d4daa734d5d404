"""A child forked whose start then fails (explore-limits F3): on Python 3.11 asyncio starts a
thread per child after the fork, and a process limit (RLIMIT_NPROC, a cgroup's pids.max) can
refuse it with the child already running. Its start is then a spawn error like a refused fork
(EAGAIN: a warning, the restart policy's backoff), and the child's process group is ended and
the child reaped: never a watcher failed as `internal` while its child runs on unread, nor a
second copy at the next `watchrun start`. The failure is injected where it happens (the waiter
thread's start), the rest is real."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from insupervisor import Running, until

from watchrun.process.spawn import Spawner, SpawnError
from watchrun.runtime.workers import Workers

threaded = pytest.mark.skipif(
    sys.version_info >= (3, 12), reason="asyncio waits for children with a pidfd: no thread")


@contextlib.contextmanager
def waiter_threads_refused(which: set[int]) -> Iterator[list[int]]:
    """The `which`-th (1-based) child waiter threads asyncio starts cannot start, as under a
    process limit; yields the pids of the children they were to wait for."""
    start, seen, refused = threading.Thread.start, [0], []

    def refusing(thread: threading.Thread) -> None:
        if "waitpid-" in thread.name:  # (asyncio-waitpid-N)
            seen[0] += 1
            if seen[0] in which:
                refused.append(thread._args[1])  # type: ignore[attr-defined]  # (loop, pid, …)
                raise RuntimeError("can't start new thread")
        start(thread)

    threading.Thread.start = refusing  # type: ignore[method-assign]
    try:
        yield refused
    finally:
        threading.Thread.start = start  # type: ignore[method-assign]


def gone(pid: int) -> bool:
    """Neither a process nor a process group `pid` is left (the child was reaped)."""
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


@threaded
def test_a_child_whose_waiter_cannot_start_is_ended_and_said_as_eagain() -> None:
    async def body() -> None:
        with waiter_threads_refused({1}) as refused, pytest.raises(SpawnError) as caught:
            await Spawner().spawn("exec sleep 300", cwd=None, env={})
        (pid,) = refused
        assert caught.value.errno_name == "EAGAIN"
        assert caught.value.message.startswith(
            "cannot start 'exec sleep 300': can't start new thread to wait for it, so it was "
            "ended (EAGAIN; the limit on processes and threads is reached: `ulimit -u`"), \
            caught.value.message
        assert gone(pid)
        with pytest.raises(ChildProcessError):  # reaped, not left a zombie
            os.waitpid(pid, os.WNOHANG)

    asyncio.run(body())


@threaded
def test_a_restart_whose_waiter_cannot_start_backs_off_and_runs_again(tmp_path: Path) -> None:
    """The explorer's case: a command restarted (`restart: always`) whose second run's waiter
    thread is refused. It was `error{internal}`, `fatal`, its run 2 running on unread."""
    config: dict[str, Any] = {"watchers": [{
        "id": "ticker", "command": "echo ERROR tick; exec sleep 0.2", "pattern": "ERROR",
        "restart": "always"}]}

    async def body() -> None:
        with waiter_threads_refused({2}) as refused:
            async with Running(tmp_path, config) as r:
                await until(lambda: sum(x["kind"] == "start" for x in r.records("ticker")) >= 2,
                            "a run after the refused one")
                records = r.records("ticker")
                errors = [x for x in records if x["kind"] == "error"]
                assert [x["code"] for x in errors] == ["EAGAIN"], errors
                assert "can't start new thread" in errors[0]["message"]
                assert [x["run"] for x in records if x["kind"] == "start"][:2] == [1, 3]
                assert r.sup.board.live_record("ticker")["status"] != "fatal"
        (pid,) = refused
        assert gone(pid)

    asyncio.run(body())


def test_a_worker_thread_that_cannot_start_leaves_the_call_to_the_others_or_refuses_it() -> None:
    """The loop's worker threads under the same limit: a call was queued, then refused (so it
    could run later, refused), and the stop then failed `cannot join thread before it is
    started` (the runner's last line: `internal error`, exit 3)."""
    start = threading.Thread.start

    def refusing(thread: threading.Thread) -> None:
        if thread.name.startswith("watchrun-worker-"):
            raise RuntimeError("can't start new thread")
        start(thread)

    ran: list[str] = []
    workers = Workers(max_workers=4, grace_s=5)
    threading.Thread.start = refusing  # type: ignore[method-assign]
    try:
        with pytest.raises(RuntimeError, match="can't start new thread"):
            workers.submit(ran.append, "refused")  # no thread at all: refused
    finally:
        threading.Thread.start = start  # type: ignore[method-assign]
    busy = threading.Event()
    first = workers.submit(busy.wait, 10)  # one thread now, busy
    threading.Thread.start = refusing  # type: ignore[method-assign]
    try:
        second = workers.submit(ran.append, "queued")  # taken by the busy one once it is free
    finally:
        threading.Thread.start = start  # type: ignore[method-assign]
    busy.set()
    assert first.result(10) is True and second.result(10) is None
    workers.shutdown()
    assert ran == ["queued"] and workers.stuck == []


REAL_LIMIT = """
import asyncio, os, resource, sys
from watchrun.process.spawn import Spawner, SpawnError
import watchrun.process.unwaited  # (imported as root: the interpreter may be under /root)
uid = int(sys.argv[1])
os.setgroups([]); os.setgid(uid); os.setuid(uid)
def tasks():
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                found += [t for t in os.listdir(f"/proc/{pid}/task")
                          if os.stat(f"/proc/{pid}/task/{t}").st_uid == uid]
            except OSError:
                pass
    return found
n = len(tasks())  # this process's threads: the fork fits the limit, a thread more does not
resource.setrlimit(resource.RLIMIT_NPROC, (n + 1, n + 1))
async def main():
    try:
        await Spawner().spawn("exec sleep 300", cwd="/", env={})
        print("spawned")
    except SpawnError as exc:
        print(exc.errno_name, exc.message)
asyncio.run(main())
print("left", len(tasks()) - n)
"""


@threaded
def test_a_real_process_limit_that_refuses_the_waiter_thread_leaves_no_child() -> None:
    """RLIMIT_NPROC of a user no other process runs as, set to what its one process holds plus
    one: the fork fits and the waiter thread does not (as root only: it switches users)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run as a user no other process runs as")
    uid = 60000 + os.getpid() % 5000
    done = subprocess.run([sys.executable, "-c", REAL_LIMIT, str(uid)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    said, left = done.stdout.splitlines()
    assert said.startswith("EAGAIN cannot start 'exec sleep 300': can't start new thread to "
                           "wait for it, so it was ended"), done.stdout
    assert left == "left 0", done.stdout  # the child reaped: no process of that user is left
