"""Test helper: a file that opens but cannot be read (fanotify denies every read of it, as an
on-access scanner does), and how many reads it denied."""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

_CLASS_CONTENT, _CLOEXEC, _MARK_ADD, _ACCESS_PERM, _DENY = 0x4, 0x1, 0x1, 0x20000, 0x2
_EVENT = struct.Struct("IBBHQii")  # event_len, vers, reserved, metadata_len, mask, fd, pid
_ANSWER = struct.Struct("iI")  # fd, response


class ReadDenied:
    """Every read of the file it was made for fails (EPERM); `denied` counts them."""

    def __init__(self, path: Path) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = int(libc.fanotify_init(_CLASS_CONTENT | _CLOEXEC, os.O_RDONLY))
        if self.fd < 0:
            pytest.skip(f"no fanotify permission events here: {os.strerror(ctypes.get_errno())}")
        if libc.fanotify_mark(self.fd, _MARK_ADD, ctypes.c_uint64(_ACCESS_PERM), -100,
                              os.fsencode(path)) != 0:
            os.close(self.fd)
            pytest.skip(f"fanotify cannot mark {path}: {os.strerror(ctypes.get_errno())}")
        self.denied = 0
        self._stop, self._done = os.pipe()
        self._thread = threading.Thread(target=self._answer, daemon=True)
        self._thread.start()

    def _answer(self) -> None:
        while self._stop not in select.select([self.fd, self._stop], [], [])[0]:
            data = os.read(self.fd, 4096)
            for at in range(0, len(data), _EVENT.size):
                fd = _EVENT.unpack_from(data, at)[5]
                os.write(self.fd, _ANSWER.pack(fd, _DENY))
                os.close(fd)
                self.denied += 1

    def close(self) -> None:
        """Reads are allowed again (one waiting for an answer then: the kernel allows it)."""
        os.write(self._done, b"x")
        self._thread.join(timeout=10)
        for fd in (self.fd, self._stop, self._done):
            os.close(fd)


@contextlib.contextmanager
def read_denied(path: Path) -> Iterator[ReadDenied]:
    """While it is held, `path` (an existing file) opens, but every read of it fails (EPERM);
    the test is skipped unless this process may use fanotify (root, a kernel with permission
    events)."""
    if os.geteuid() != 0:
        pytest.skip("fanotify needs root")
    denied = ReadDenied(path)
    try:
        yield denied
    finally:
        denied.close()
