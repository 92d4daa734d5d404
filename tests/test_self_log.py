"""A watcher of the runner's own log: every match is echoed into the log with its line, so the
echo was matched again (JSON-escaped once more: each step ~3.5 times longer), without end; one
ERROR elsewhere made ~1.5 MB of log in a second. The log's file is refused as the runner's own
records are (stderr redirected to it, or a symlink to /dev/stderr), and where it comes through a
pipe (a container runtime, `journalctl -f`) a matched echo is recorded but never echoed again.
Real runners, real files, real pipes."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from liverunner import DEADLINE_S, cli, read_records, wait_for, watchrun_bin, write_config

PATTERN = "ERROR|FATAL|panic|Traceback"
REFUSED = "it is the runner's own log (its stderr is this file)"


def _start(folder: Path, stderr: int, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([watchrun_bin(), "run", "-c", str(folder / "watch.yaml"), *args],
                            cwd=folder, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=stderr, start_new_session=True)


@pytest.fixture
def stopped() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The runners a test starts: stopped (SIGTERM, exit 0 asserted) when it ends."""
    started: list[subprocess.Popen[bytes]] = []
    try:
        yield started
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                assert proc.wait(timeout=DEADLINE_S) == 0
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


def _lines(path: Path, text: str) -> int:
    """How many lines of the file hold `text` (a JSON line may hold it twice: `msg`, `line`)."""
    return sum(text in line for line in path.read_text().splitlines())


def _matches(folder: Path, wid: str) -> list[dict[str, object]]:
    path = folder / ".watchrun" / "watchers" / f"{wid}.jsonl"
    return [r for r in read_records(path) if r["kind"] == "match"] if path.exists() else []


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_a_watcher_of_the_runner_s_own_log_file_is_refused(
        tmp_path: Path, fmt: str, stopped: list[subprocess.Popen[bytes]]) -> None:
    log, app = tmp_path / "watchrun.log", tmp_path / "app.log"
    app.write_text("")
    (tmp_path / "err.log").symlink_to("/dev/stderr")  # (as the nginx image ships its logs)
    write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": PATTERN},
        {"id": "self", "path": "watchrun.log", "pattern": PATTERN},
        {"id": "link", "path": "err.log", "pattern": PATTERN}]})
    with log.open("ab") as err:  # `watchrun run 2>>watchrun.log`
        stopped.append(_start(tmp_path, err.fileno(), "--log-format", fmt))
    wait_for(lambda: _lines(log, REFUSED) == 2 and _lines(log, "app.log"),
             "the two watchers of the log refused")
    listed = cli("list", cwd=tmp_path).stdout
    states = {ln.split()[0]: ln.split()[1] for ln in listed.splitlines()[1:]}
    assert states == {"app": "running", "self": "error", "link": "error"}, listed
    with app.open("a") as fh:
        fh.write("ERROR app failure once\n")
    wait_for(lambda: _matches(tmp_path, "app"), "the app's match")
    wait_for(lambda: "ERROR app failure once" in log.read_text(), "its echo in the log")
    # before: `self` and `link` followed the log and matched the echo, again and again
    assert _matches(tmp_path, "self") == [] and _matches(tmp_path, "link") == []
    assert _lines(log, "ERROR app failure once") == 1


def test_a_once_run_that_watches_its_own_log_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "app.log").write_text("ERROR before\n")
    write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": PATTERN, "fromStart": True},
        {"id": "self", "path": "watchrun.log", "pattern": PATTERN, "fromStart": True,
         "gate": {"maxMatches": 100}}]})
    with (tmp_path / "watchrun.log").open("ab") as err:
        done = subprocess.run([watchrun_bin(), "run", "--once", "-c", "watch.yaml"],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=err,
                              stdin=subprocess.DEVNULL, timeout=DEADLINE_S, check=False)
    out = done.stdout.decode()
    assert done.returncode == 3, out  # before: exit 0, `self` passed on what it read of it
    assert REFUSED in out


def _kubelet(read: int, log: Path) -> None:
    """A container runtime's part: the runner's stderr, line by line, appended to a log file
    (CRI format: `<time> stderr F <line>`) until the runner ends."""
    with os.fdopen(read, "rb") as pipe, log.open("ab", buffering=0) as out:
        for line in pipe:
            out.write(b"2026-01-01T00:00:00.000000000Z stderr F " + line)


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_a_match_of_the_log_s_own_echo_is_recorded_and_not_echoed_again(
        tmp_path: Path, fmt: str, stopped: list[subprocess.Popen[bytes]]) -> None:
    """Through a pipe no device and inode tell it is the log: the watcher of the pod log
    follows it, and its match of the log's echo is recorded, said once, never echoed."""
    pod, app = tmp_path / "0.log", tmp_path / "app.log"
    pod.write_text("")
    app.write_text("")
    write_config(tmp_path, {"watchers": [
        {"id": "app", "path": "app.log", "pattern": PATTERN},
        {"id": "pod", "path": "0.log", "pattern": PATTERN}]})
    read, write = os.pipe()
    stopped.append(_start(tmp_path, write, "--log-format", fmt))
    os.close(write)
    threading.Thread(target=_kubelet, args=(read, pod), daemon=True).start()
    wait_for(lambda: "0.log" in pod.read_text() and "app.log" in pod.read_text(),
             "both watchers following")
    for n, text in enumerate(["ERROR app failure one", "ERROR app failure two"], 1):
        with app.open("a") as fh:
            fh.write(text + "\n")
        # the pod watcher records its match of the echo, after all it read before it
        wait_for(lambda t=text, k=n: len(_matches(tmp_path, "pod")) >= k
                 and t in str(_matches(tmp_path, "pod")[-1]["line"]), f"{text!r} matched")
    # before: each echo matched and echoed again (`[pod] match …[app] match …`), without end
    lines = [str(m["line"]) for m in _matches(tmp_path, "pod")]
    assert len(lines) == 2 and not [ln for ln in lines if "[pod] match" in ln
                                    or '"watcher":"pod"' in ln], lines
    for said in ("ERROR app failure one", "ERROR app failure two",
                 "is this watcher reading watchrun's own log?"):
        assert _lines(pod, said) == 1, (said, pod.read_text())
