"""Process groups a runner started (issue #10): recorded in state/, ended by the guardian when
the runner dies, or by the next runner; identified by group id *and* leader start time, so a
reused pid is never signalled."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from watchrun.process.groups import Group, GroupRegistry, end_groups, leftover_groups, members
from watchrun.process.guard import command
from watchrun.process.guard_lazy import LazyGuardian
from watchrun.process.tree import Stat, read_table, start_time


def st(pgid: int, start: int, state: str = "S") -> Stat:
    return Stat(state, 1, pgid, pgid, start)


def ids(table: dict[int, str | None]) -> object:
    return lambda pid: table.get(pid, "")


@pytest.mark.parametrize(("table", "owners", "expected"), [
    ({10: st(10, 500), 11: st(10, 510), 12: st(99, 510)}, {}, {10, 11}),  # leader + member
    ({11: st(10, 510), 12: st(10, 520)}, {}, {11, 12}),  # the leader died; the group lives on
    ({10: st(10, 900), 11: st(10, 910)}, {}, set()),  # pid 10 reused by another group's leader
    ({11: st(10, 400)}, {}, set()),  # older than our leader: not ours
    ({11: st(10, 510), 12: st(10, 520)}, {12: "other.1.x"}, {11}),  # another runner's child
    ({11: st(10, 510, "Z")}, {}, set()),  # a zombie is not signalled
    ({11: st(10, 510)}, {11: None}, {11}),  # environ unreadable: group and time decide
])
def test_members_are_verified_by_group_and_start_time(
        table: dict[int, Stat], owners: dict[int, str | None], expected: set[int]) -> None:
    assert members(table, Group(10, 500, "me.1.x"), ids(owners)) == expected  # type: ignore[arg-type]


@pytest.fixture
def group() -> Iterator[tuple[subprocess.Popen[bytes], list[int]]]:
    """A real process group: a shell (the leader) with two children."""
    leader = subprocess.Popen(["sh", "-c", "sleep 1000 & sleep 1000 & echo ready; wait"],
                              start_new_session=True, stdout=subprocess.PIPE)
    assert leader.stdout is not None and leader.stdout.readline() == b"ready\n"
    kids = [int(p) for p in subprocess.run(["pgrep", "-g", str(leader.pid)], text=True,
                                           capture_output=True).stdout.split()]
    yield leader, kids
    for pid in kids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    leader.kill()
    leader.wait()


def dead(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


def test_end_groups_ends_a_verified_tree_and_nothing_else(
        group: tuple[subprocess.Popen[bytes], list[int]]) -> None:
    leader, kids = group
    bystander = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    start = start_time(leader.pid)
    assert start is not None and len(kids) == 3
    assert end_groups([Group(leader.pid, start + 1, "")], 1.0) == 0  # wrong start: not ours
    assert end_groups([Group(leader.pid, start, "")], 1.0) == 3
    leader.wait(timeout=5)
    assert all(dead(p) for p in kids)
    assert not dead(bystander.pid)
    bystander.kill()
    bystander.wait()


def test_the_registry_file_names_the_runner_and_its_live_groups(tmp_path: Path,
        group: tuple[subprocess.Popen[bytes], list[int]],
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Rewritten at each spawn and exit, on the event loop: without an fsync (a power loss
    ends the processes too), so a slow disk does not stall the loop at each spawn."""
    def no_fsync(fd: int) -> None:
        raise AssertionError("the registry fsynced on the event loop")

    monkeypatch.setattr(os, "fsync", no_fsync)
    leader, _ = group
    told: list[str] = []
    path = tmp_path / "processes.json"
    reg = GroupRegistry(path, told.append)
    reg.add(leader.pid, "me.1.x", 0)
    doc = json.loads(path.read_text())
    assert doc["runner"] == {"pid": os.getpid(), "start": start_time(os.getpid())}
    assert doc["groups"] == [{"pgid": leader.pid, "start": start_time(leader.pid),
                              "spawnId": "me.1.x"}]
    assert leftover_groups(path) == (os.getpid(), [])  # its runner is alive: nothing to end
    reg.remove(leader.pid)
    assert json.loads(path.read_text())["groups"] == []
    assert told == [f"+{leader.pid} {start_time(leader.pid)} me.1.x\n", f"-{leader.pid}\n"]


def test_a_group_whose_leader_exited_at_once_is_still_told_to_the_guardian() -> None:
    """A command that starts a background child and exits at once (`daemon & exit 0`) was
    often reaped by asyncio before its group was registered: its start time was unreadable, so
    the group was recorded nowhere (about 1 start in 7), and a runner SIGKILLed before the
    run's end left the child to run on: neither the guardian nor the next runner knew it."""
    from watchrun.process.spawn import Spawner, end_now

    told: list[str] = []
    reg = GroupRegistry(None, told.append)

    async def go() -> list[int]:
        procs = []
        try:
            for _ in range(40):
                procs.append(await Spawner(reg).spawn("sleep 1000 & exit 0", cwd=None, env={}))
                await procs[-1].wait()
            groups = [Group(int(p), int(t), i) for p, t, i in
                      (line[1:].split() for line in told if line.startswith("+"))]
            assert sorted(g.pgid for g in groups) == sorted(p.pgid for p in procs)
            await asyncio.to_thread(end_groups, groups, 0.0)  # what the guardian does
            table = read_table()
            return [pid for pid, stat in table.items() if stat.state != "Z"
                    and stat.pgid in {p.pgid for p in procs}]
        finally:
            for proc in procs:
                await end_now(proc)

    assert asyncio.run(asyncio.wait_for(go(), 60)) == []


def test_groups_of_a_dead_runner_are_leftovers(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    path = tmp_path / "processes.json"
    path.write_text(json.dumps({"runner": {"pid": gone.pid, "start": 1},
                                "groups": [{"pgid": 7, "start": 8, "spawnId": "s"}]}))
    assert leftover_groups(path) == (gone.pid, [Group(7, 8, "s")])
    path.write_text("{not json")
    assert leftover_groups(path) == (None, [])


def test_groups_of_a_recorder_that_holds_its_lock_are_no_leftovers(tmp_path: Path) -> None:
    """An `agent run` in another pid namespace wrote its own pid (1 there), which here is
    another process or none: judged by it, its live turn was ended. While a process holds the
    lock (`state/agents-NAME.lock`, the kernel's answer) nothing is left over; once it is let
    go, its groups are."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    path, lock = tmp_path / "agent-a.processes.json", tmp_path / "agents-a.lock"
    path.write_text(json.dumps({"runner": {"pid": gone.pid, "start": 1},
                                "groups": [{"pgid": 7, "start": 8, "spawnId": "s"}]}))
    assert leftover_groups(path, lock) == (gone.pid, [Group(7, 8, "s")])  # (no lock file yet)
    lock.write_text("")
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\n"
                               "f = open(sys.argv[1]); fcntl.flock(f, fcntl.LOCK_EX)\n"
                               "print('held', flush=True); time.sleep(600)", str(lock)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert leftover_groups(path, lock) == (None, [])
    finally:
        holder.kill()
        holder.wait()
    assert leftover_groups(path, lock) == (gone.pid, [Group(7, 8, "s")])


@pytest.mark.parametrize("clean", [True, False])
def test_the_guardian_ends_the_groups_only_when_the_runner_dies(
        clean: bool, group: tuple[subprocess.Popen[bytes], list[int]]) -> None:
    leader, kids = group
    guardian = subprocess.Popen(command(), stdin=subprocess.PIPE, start_new_session=True)
    assert guardian.stdin is not None
    guardian.stdin.write(f"+{leader.pid} {start_time(leader.pid)} x\n+1 1 y\n-1\n".encode())
    if clean:
        guardian.stdin.write(b".\n")
    guardian.stdin.close()  # as when the runner exits, or is SIGKILLed
    assert guardian.wait(timeout=10) == 0
    if clean:
        assert not any(dead(p) for p in kids)
        return
    leader.wait(timeout=5)
    deadline = time.monotonic() + 5
    while not all(dead(p) for p in kids) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert all(dead(p) for p in kids)


def test_a_guardian_started_again_has_the_groups_before_it_exists(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A loaded run's find: a guardian started again was told the groups only after its start,
    so a runner SIGKILLed in between (the test killed it on the "starting another, told the
    process groups" line) left them running. The groups are in its pipe before it starts: here
    the runner "dies" the moment the new guardian exists (its end of the pipe turns to
    /dev/null), and the guardian still ends the group."""
    victim = subprocess.Popen(["sleep", "1000"], start_new_session=True,
                              env={**os.environ, "WATCHRUN_SPAWN_ID": "t.1.abc"})
    real = subprocess.Popen

    def dies_after_start(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        proc: subprocess.Popen[bytes] = real(*args, **kwargs)  # type: ignore[call-overload]
        pipe = os.readlink(f"/proc/self/fd/{kwargs['stdin']}")
        null = os.open(os.devnull, os.O_WRONLY)
        for fd in map(int, os.listdir("/proc/self/fd")):  # the write end: the runner is gone
            with contextlib.suppress(OSError):
                if fd != kwargs["stdin"] and os.readlink(f"/proc/self/fd/{fd}") == pipe:
                    os.dup2(null, fd)
        os.close(null)
        return proc

    monkeypatch.setattr("watchrun.process.guard.subprocess.Popen", dies_after_start)
    lazy = LazyGuardian(warn=lambda _: None)
    lazy.known = lambda: [Group(victim.pid, start_time(victim.pid), "t.1.abc")]
    try:
        lazy.start()  # (no loop: the guardian is not watched, only started)
        assert victim.wait(timeout=10) in (-signal.SIGTERM, -signal.SIGKILL)  # (ended by it)
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()
        guardian = lazy._guardian
        if guardian is not None and guardian._proc is not None:
            guardian._proc.wait(timeout=10)
            guardian.release()
