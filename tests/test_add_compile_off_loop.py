"""`watchrun add` of a pattern only RE2 runs: the matcher compiled off the loop, in the add's worker
thread, is the one the watcher runs, so its start compiles nothing on the loop (before, the start
built the RE2 engine again on the loop: ~0.1 s at the 16 KiB bound, stalling every watcher and
every `status`). Also `matcher.compile_for` itself: what it compiles for a thread is what a
Matcher made there uses."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from liverunner import LiveRunner, wait_for, write_config

from watchrun.match import engines, matcher
from watchrun.match.matcher import Matcher

BOUND = 16 * 1024
"""A runtime watcher's `pattern` bound, and its `exclude` regexes' together (docs/control.md)."""


def alternation(word: str, tail: str, limit: int) -> str:
    """`word0<tail>|word1<tail>|…`, as long as fits in `limit` bytes."""
    parts: list[str] = []
    size = -1
    while size + len(f"|{word}{len(parts)}{tail}") <= limit:
        size += len(f"|{word}{len(parts)}{tail}")
        parts.append(f"{word}{len(parts)}{tail}")
    return "|".join(parts)


def heavy(salt: str) -> tuple[str, list[str]]:
    """A 16 KiB alternation and 16 KiB of excludes, ignoring case: spelled out (`[Ww]…`), the
    pattern is past hyperscan's length limit, so RE2 runs it."""
    pattern = alternation(f"{salt}w", "x?y", BOUND)
    excludes = [alternation(f"{salt}s", "x?y", BOUND // 2 - 8),
                alternation(f"{salt}k", "x?y", BOUND // 2 - 8)]
    return pattern, excludes


def loop_cost(pattern: str, excludes: list[str], rounds: int = 3, *,
              case_sensitive: bool = False) -> float:
    """What a start on the loop cost when it compiled the matcher again: a Matcher built in a
    thread that has none yet, after the same pattern was checked and compiled in another (as the
    add's worker thread leaves the parse and RE2's own cache). The least of `rounds` (the work,
    with the least of what else the box ran), each in a thread of its own kept alive until all
    are done (a thread's id, which keys the compiled engines, is reused once it ends)."""
    Matcher(pattern, excludes, case_sensitive)  # the add's check: parsed, RE2 compiled once
    took: list[float] = []
    done = threading.Event()

    def build() -> None:
        began = time.perf_counter()
        Matcher(pattern, excludes, case_sensitive)
        took.append(time.perf_counter() - began)
        done.wait()

    threads = [threading.Thread(target=build) for _ in range(rounds)]
    try:
        for n, t in enumerate(threads, 1):  # one at a time: each build is timed alone
            t.start()

            def built(n: int = n) -> bool:
                return len(took) == n

            wait_for(built, "a build")
    finally:
        done.set()
        for t in threads:
            t.join()
    return min(took)


def loop_cpu(pid: int) -> float:
    """CPU seconds (user and system) the runner's main thread, its event loop, has used."""
    stat = Path(f"/proc/{pid}/task/{pid}/stat").read_text()
    fields = stat.rpartition(")")[2].split()  # (fields 3…; utime and stime are 14 and 15)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def statuses_while(r: LiveRunner, busy: Callable[[], bool],
                   each: Callable[[], object] = lambda: None) -> list[float]:
    """How long each `status` took, sent one after another while `busy()` (then `each()`):
    one is in flight all along, so each waits out any stall of the runner's loop."""
    waits: list[float] = []
    while busy():
        asked = time.perf_counter()
        assert r.control({"cmd": "status"})["ok"] is True
        waits.append(time.perf_counter() - asked)
        each()
    return waits


def add_asking_status(r: LiveRunner, watcher: dict[str, Any],
                      each: Callable[[], object] = lambda: None
                      ) -> tuple[dict[str, Any], list[float]]:
    """`add` the watcher in a thread, with `statuses_while` it runs: its reply, and the waits."""
    replies: list[dict[str, Any]] = []
    adding = threading.Thread(target=lambda: replies.append(
        r.control({"cmd": "add", "watcher": watcher})))
    adding.start()
    try:
        waits = statuses_while(r, adding.is_alive, each)
    finally:
        adding.join()
    assert len(replies) == 1, replies
    return replies[0], waits


def test_an_added_re2_pattern_is_not_compiled_again_on_the_loop(tmp_path: Path) -> None:
    salt = "".join(random.choice("ghjmnpqrtuvxyz") for _ in range(4))  # new to every cache
    pattern, excludes = heavy(salt)
    assert Matcher(pattern, excludes).engine == "re2"
    cost = loop_cost(pattern, excludes)
    (tmp_path / "app.log").write_text("")
    (tmp_path / "big.log").write_text("")
    config = write_config(tmp_path, {"watchers": [{"id": "app", "path": "app.log",
                                                   "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        r.wait_running()
        before = loop_cpu(r.pid)
        reply = r.control({"cmd": "add", "watcher": {
            "id": "big", "path": str(tmp_path / "big.log"), "pattern": pattern,
            "exclude": excludes}})
        on_loop = loop_cpu(r.pid) - before
        assert reply["ok"] is True, reply
        assert reply["watcher"]["engine"] == "re2", reply["watcher"]
        # a start that compiles on the loop spends the compile's CPU (at least `cost`) in the
        # loop's thread; judged by that thread's CPU time, not by how long a `status` waited,
        # which a loaded box stretches (0.116 s beside a 0.221 s compile in a loaded suite)
        assert on_loop < cost * 0.5, (
            f"the runner's loop thread used {on_loop:.3f}s of CPU while the watcher was added "
            f"and started; building its matcher costs {cost:.3f}s, so the start compiled it on "
            "the loop")
        lines = [f"{salt.upper()}W7XY", f"{salt}w8y {salt}s3y", f"{salt}w9 y", f"{salt}W10Y"]
        with (tmp_path / "big.log").open("a") as f:  # the handed-over matcher matches
            f.write("".join(f"{line}\n" for line in lines))
        wait_for(lambda: [m["line"] for m in r.matches("big")] == [lines[0], lines[3]],
                 "the added watcher's two matches (one excluded)")
    finally:
        assert r.stop() == 0
    assert "Traceback" not in r.stderr()


def test_compile_for_hands_the_engine_to_the_thread_it_was_made_for() -> None:
    """`compile_for(thread, …)` run in a worker: a Matcher made afterwards in `thread` with the
    same arguments builds nothing (no engine builder is called) and matches as one built there."""
    pattern, excludes = alternation("hw", "[0-9]+", BOUND), ["skip"]
    target: dict[str, Any] = {}
    ready, go, done = threading.Event(), threading.Event(), threading.Event()

    def loop_thread() -> None:
        target["id"] = threading.get_ident()
        ready.set()
        go.wait()
        calls_before = dict(counted)
        m = Matcher(pattern, excludes)
        target["built"] = {k: counted[k] - calls_before[k] for k in counted}
        target["found"] = m.find(b"x\nHW12 3\nhw51 skip\nhw77\n")
        target["engine"] = m.engine
        done.set()

    counted = dict.fromkeys(engines.BUILDERS, 0)
    real = dict(engines.BUILDERS)

    def counting(name: str) -> Any:
        def build(*args: Any) -> Any:
            counted[name] += 1
            return real[name](*args)
        return build

    thread = threading.Thread(target=loop_thread)
    thread.start()
    try:
        engines.BUILDERS.update({name: counting(name) for name in real})
        ready.wait()
        worker_result: list[str] = []
        worker = threading.Thread(target=lambda: worker_result.append(
            matcher.compile_for(target["id"], pattern, excludes)))
        worker.start()
        worker.join()
        assert worker_result == ["re2"]
        assert sum(counted.values()) >= 1  # compiled there, in the worker
        go.set()
        assert done.wait(30)
    finally:
        go.set()
        thread.join()
        engines.BUILDERS.update(real)
    assert target["built"] == dict.fromkeys(real, 0), target["built"]
    assert target["engine"] == "re2"
    assert target["found"] == [(2, 8), (19, 23)]
