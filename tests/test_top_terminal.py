"""`watchrun top` and its terminal: the colour rules of docs/cli.md ("Output for people": an
empty NO_COLOR is unset; TERM=dumb draws no full screen), and a SIGTERM or SIGHUP that ends
it giving the terminal back (the explorer's C and D)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import signal
import struct
import subprocess
import termios
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from liverunner import DEADLINE_S, wait_for, watchrun_bin

from watchrun.tui.app import TopApp
from watchrun.tui.feed import Feed

RESTORED = (b"\x1b[?1049l", b"\x1b[?1000l", b"\x1b[?1006l", b"\x1b[?25h")
"""What Textual writes when it gives the terminal back: the alternate screen left, mouse
reporting off, the cursor shown."""


class Top:
    """`watchrun top` in a pseudo-terminal of 30x120, all it writes kept."""

    def __init__(self, proc: subprocess.Popen[bytes], master: int) -> None:
        self.proc, self.master = proc, master
        self.seen = bytearray()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        with contextlib.suppress(OSError):  # (EIO once the terminal's last user is gone)
            while chunk := os.read(self.master, 65536):
                self.seen.extend(chunk)

    def shows(self, text: str) -> bool:
        return text.encode() in re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", bytes(self.seen))


@contextlib.contextmanager
def top(root: Path, **env: str) -> Iterator[Top]:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    proc = subprocess.Popen([watchrun_bin(), "top", "--output-dir", str(root)], stdin=slave,
                            stdout=slave, stderr=slave, start_new_session=True,
                            env={**os.environ, "TERM": "xterm-256color", **env})
    os.close(slave)
    try:
        yield Top(proc, master)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        with contextlib.suppress(OSError):
            os.close(master)


@pytest.mark.parametrize(("value", "monochrome"), [("", False), ("1", True)])
def test_an_empty_no_color_is_unset(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                    value: str, monochrome: bool) -> None:
    monkeypatch.setenv("NO_COLOR", value)
    assert TopApp(Feed(tmp_path)).no_color is monochrome


def test_term_dumb_is_refused_with_exit_2(tmp_path: Path) -> None:
    with top(tmp_path, TERM="dumb") as screen:
        assert screen.proc.wait(DEADLINE_S) == 2
        wait_for(lambda: screen.shows("watchrun: error: `watchrun top` needs a terminal that "
                                      "draws a full screen, not TERM=dumb; `watchrun list` "
                                      "prints the same rows"), "the error")
        assert b"\x1b[?1049h" not in screen.seen  # no alternate screen was entered


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_ends_the_screen_and_gives_the_terminal_back(
        tmp_path: Path, sig: signal.Signals) -> None:
    with top(tmp_path) as screen:
        wait_for(lambda: screen.shows("no watchers or agents have run"), "the screen")
        screen.proc.send_signal(sig)
        assert screen.proc.wait(DEADLINE_S) == 0
        wait_for(lambda: all(seq in screen.seen for seq in RESTORED), "the terminal restored")
