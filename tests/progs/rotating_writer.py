"""Test program: append numbered lines to a log at about 20k lines/s and rotate it on SIGUSR1.

Usage: rotating_writer.py LOG MODE GENLOG, MODE one of rename, copytruncate, recreate, symlink.
Each line is `<9-digit number> xxx…\\n` (50 bytes). After each rotation (and at the start) one
JSON line `{"inode": …, "first": …}` is appended to GENLOG: the file now written and the number
of its first line. SIGTERM: stop after the current batch and print the last line number.
copytruncate is done by the writer itself (copy, then truncate, between two lines), so no line
is lost in the copy/truncate race."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time

log, mode, genlog = sys.argv[1], sys.argv[2], sys.argv[3]
rotations, stop = [0], [False]
signal.signal(signal.SIGUSR1, lambda *_: rotations.__setitem__(0, rotations[0] + 1))
signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
n, done, gen = 0, 0, 0
directory = os.path.dirname(log)


def target() -> str:
    return os.path.join(directory, f"gen-{gen:04d}.log") if mode == "symlink" else log


def open_log() -> int:
    fd = os.open(target(), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    if mode == "symlink":
        tmp = log + ".tmp"
        os.symlink(os.path.basename(target()), tmp)
        os.replace(tmp, log)
    with open(genlog, "a") as g:
        g.write(json.dumps({"inode": os.fstat(fd).st_ino, "first": n + 1}) + "\n")
    return fd


fd = open_log()
start = time.monotonic()
while not stop[0]:
    if done < rotations[0]:
        done += 1
        gen += 1
        if mode == "rename":
            os.rename(log, f"{log}.{gen}")
        elif mode == "recreate":
            os.unlink(log)
        if mode == "copytruncate":
            shutil.copyfile(log, f"{log}.{gen}")
            os.ftruncate(fd, 0)
            with open(genlog, "a") as g:
                g.write(json.dumps({"inode": os.fstat(fd).st_ino, "first": n + 1}) + "\n")
        else:
            os.close(fd)
            fd = open_log()
    os.write(fd, b"".join(b"%09d %s\n" % (i, b"x" * 39) for i in range(n + 1, n + 101)))
    n += 100
    time.sleep(max(0.0, start + n / 20_000 - time.monotonic()))  # about 20k lines/s
print(n, flush=True)
