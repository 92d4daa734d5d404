"""A runner's stop does not wait on control-socket clients that go at their own pace: one
connected and silent, and one that sent `list` and reads none of its reply (larger than the
socket takes), held a SIGTERMed `stopTimeout: 0s` runner past its 10 s deadline (the socket's
close waited 30 s for them), and it exited 3 blaming "a file system that does not answer?"."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from liverunner import DEADLINE_S, LiveRunner, write_config

PATTERN = "|".join(f"lit{i:05d}" for i in range(1800))
"""16 KiB: 20 watchers of it make a `list` reply of about 340 KB, more than an AF_UNIX socket
takes before its reader reads."""


def test_a_silent_client_and_one_that_reads_no_reply_do_not_hold_the_stop(
        tmp_path: Path) -> None:
    (tmp_path / "app.log").write_text("")
    config = write_config(tmp_path, {"limits": {"stopTimeout": "0s"}, "watchers": [
        {"id": f"w{i}", "path": "app.log", "pattern": PATTERN} for i in range(20)]})
    runner = LiveRunner(config)
    clients = [socket.socket(socket.AF_UNIX) for _ in range(2)]
    try:
        runner.wait_running()
        silent, unread = clients
        silent.connect(str(runner.out / "control.sock"))  # (accepted first: the loop's order)
        unread.connect(str(runner.out / "control.sock"))
        unread.sendall(b'{"cmd": "list"}\n')
        unread.settimeout(DEADLINE_S)
        assert unread.recv(1, socket.MSG_PEEK) == b"{"  # its reply is going out, not taken
        began = time.monotonic()
        status = runner.stop()
        took = time.monotonic() - began
    finally:
        runner.close()
        for client in clients:
            client.close()
    err = runner.stderr()
    assert "did not end within" not in err, err
    assert status == 0, err
    assert took < 5, f"the stop took {took:.1f} s: it waited for the clients"
