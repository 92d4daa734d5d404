"""Every byte a command prints reaches stdout, whatever its buffering, and a reader that goes
away ends it with 141 (docs/config.md, docs/cli.md exit statuses). An explorer's F10: with
`PYTHONUNBUFFERED=1` (common in container images) stdout was a TextIOWrapper straight on the
raw file, which drops what a short write left: `watchrun config … | head -c1` exited 0, not 141
(the write that the reader's end cut short was never followed by one that failed). A stdout
left non-blocking by whoever shares it lost all but the first 64 KiB silently (unbuffered) or
ended in a traceback (buffered, exit 120)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import termios
from pathlib import Path

import pytest
import yaml
from liverunner import wait_for, watchrun_bin

PIPE_BYTES = 65536
"""A pipe's default capacity on Linux; the output is several times that."""


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A config whose resolved form is about 280 KB."""
    folder = tmp_path_factory.mktemp("big")
    watchers = [{"id": f"w{i}", "path": f"w{i}.log", "pattern": "x", "label": "L" * 400}
                for i in range(500)]
    (folder / "watch.yaml").write_text(yaml.safe_dump({"limits": {"maxWatchers": 500},
                                                       "watchers": watchers}))
    return folder


def env_for(unbuffered: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return {**env, "PYTHONUNBUFFERED": "1"} if unbuffered else env


COMMANDS = [["config"], ["config", "--format", "toml"]]
"""Those that print their document in one write (buffered, a closed pipe was 141 already)."""


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_an_unbuffered_stdout_whose_reader_goes_away_ends_it_with_141(
        big: Path, argv: list[str]) -> None:
    r, w = os.pipe()
    with open(big / "err", "wb") as err:
        proc = subprocess.Popen([watchrun_bin(), *argv, "-c", "watch.yaml"], cwd=big,
                                stdout=w, stderr=err, stdin=subprocess.DEVNULL,
                                env=env_for(True))
    os.close(w)
    try:
        assert os.read(r, 1)  # it started writing (`| head -c1`)
    finally:
        os.close(r)  # the reader goes away with most of the output unread
    assert proc.wait(timeout=60) == 141, (big / "err").read_text()
    assert "Traceback" not in (big / "err").read_text()


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_a_non_blocking_stdout_that_fills_gets_every_byte(big: Path, argv: list[str],
                                                          unbuffered: bool) -> None:
    whole = subprocess.run([watchrun_bin(), *argv, "-c", "watch.yaml"], cwd=big,
                           capture_output=True, env=env_for(unbuffered), check=True).stdout
    assert len(whole) > 4 * PIPE_BYTES
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
    with open(big / "err", "wb") as err:
        proc = subprocess.Popen([watchrun_bin(), *argv, "-c", "watch.yaml"], cwd=big,
                                stdout=w, stderr=err, stdin=subprocess.DEVNULL,
                                env=env_for(unbuffered))
    os.close(w)
    got = bytearray()
    try:  # read only once the pipe is full: the writer has met a write that would block
        wait_for(lambda: waiting(r) >= PIPE_BYTES or proc.poll() is not None, "a full pipe")
        while chunk := os.read(r, PIPE_BYTES):
            got += chunk
    finally:
        os.close(r)
    assert proc.wait(timeout=60) == 0, (big / "err").read_text()
    assert bytes(got) == whole  # (before: the first 64 KiB, exit 0; or a traceback, exit 120)


def waiting(fd: int) -> int:
    """Bytes in the pipe not read yet."""
    return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), "little")
