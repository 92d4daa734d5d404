"""The control socket of a runner out of descriptors before any request was served
(explore-limits F8): every request failed inside the runner with the path of a module it was
loading (`[Errno 24] Too many open files: '…/runtime/commands.py'`), one error line per
request. A live runner loads the requests' code when its socket is bound; a request that runs
out of descriptors (a once run's first, which loads it then) is answered with the limit and
where to raise it, and logged once a minute, as a connection it could not accept is; so is a
watcher a reload could not start for want of them."""

from __future__ import annotations

import os
import resource
import signal
from pathlib import Path

from liverunner import LiveRunner, cli, wait_for, write_config

LIMIT_SAID = "Too many open files (this runner may have "


def starve(pid: int) -> None:
    """The runner's soft descriptor limit down to what it holds and one: a client is accepted,
    and nothing more can be opened while it is served."""
    hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)[1]
    held = {int(fd) for fd in os.listdir(f"/proc/{pid}/fd")}
    free = [fd for fd in range(len(held) + 2) if fd not in held]  # (a closed one below others
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (free[1], hard))  # is free: one, no more)


def test_a_live_runner_out_of_descriptors_still_answers_its_first_requests(
        tmp_path: Path) -> None:
    (tmp_path / "app.log").write_text("")
    config = write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": "ERROR"}]})
    r = LiveRunner(config)
    try:
        wait_for(lambda: "agents running" in r.stderr(), "the runner to be ready")
        starve(r.pid)
        asked = [cli("status", "-c", config, cwd=tmp_path) for _ in range(3)]
        said = "".join(a.stdout + a.stderr for a in asked)
        assert "commands.py" not in said and "Errno" not in said, said
        assert asked[-1].returncode == 0, said
        assert asked[-1].stdout.startswith("runner running: 1 watcher"), said
    finally:
        assert r.stop() == 0, r.stderr()
    assert "control request" not in r.stderr(), r.stderr()


def test_a_request_out_of_descriptors_is_answered_with_the_limit_and_logged_once(
        tmp_path: Path) -> None:
    config = write_config(tmp_path, {"watchers": [
        {"id": "build", "command": "exec sleep 60", "pattern": "ERROR"}]})
    r = LiveRunner(config, "--once")  # (a once run loads the requests' code at the first)
    try:
        wait_for(lambda: "agents running" in r.stderr(), "the runner to be ready")
        starve(r.pid)
        asked = [cli("status", "-c", config, cwd=tmp_path) for _ in range(4)]
        said = "".join(a.stdout + a.stderr for a in asked)
        answered = [a for a in asked if LIMIT_SAID in a.stderr]
        assert len(answered) >= 2, said
        assert all(a.returncode == 3 for a in answered), said
        assert "commands.py" not in said and "Errno" not in said, said
        wait_for(lambda: "control request 'status' failed" in r.stderr(), "the log's line")
        failed = [ln for ln in r.stderr().splitlines() if "control request" in ln]
        assert len(failed) == 1 and LIMIT_SAID in failed[0], r.stderr()
    finally:
        r.stop()


def test_a_reload_out_of_descriptors_says_the_limit_for_a_watcher_it_could_not_start(
        tmp_path: Path) -> None:
    """A watcher a reload could not start for want of descriptors was said with the errno's
    text only (`reload: could not be started: EMFILE: cannot open …jsonl: Too many open
    files`), where every other step says the limit and where to raise it."""
    (tmp_path / "app.log").write_text("")
    conf = {"watchers": [{"id": "app", "path": "app.log", "pattern": "ERROR"}]}
    config = write_config(tmp_path, conf)
    r = LiveRunner(config)
    try:
        wait_for(lambda: "agents running" in r.stderr(), "the runner to be ready")
        conf["watchers"].append({"id": "more", "path": "app.log", "pattern": "WARN"})
        write_config(tmp_path, conf)
        starve(r.pid)
        r.send(signal.SIGHUP)
        r.wait_log("reloaded:")
        said = [ln for ln in r.stderr().splitlines() if "[more]" in ln and "could not" in ln]
        assert said and "raise the limit with `ulimit -n`" in said[0], r.stderr()
    finally:
        resource.prlimit(r.pid, resource.RLIMIT_NOFILE, (1024, 1024))
        r.stop()
