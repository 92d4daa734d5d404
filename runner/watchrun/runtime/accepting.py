"""Accept loops that outlast running out of descriptors (the control socket, `--metrics`).

Out of descriptors (EMFILE and the like), a spare one is freed to accept the waiting client and
close it at once (it gets EOF, not a hang until its own timeout), and it is logged at most once
per PRESSURE_LOG_S, never per attempt (asyncio's own accept loop reported each one as an
internal error: hundreds of log lines a second).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
import time
from collections.abc import Callable

__all__ = ["PRESSURE_LOG_S", "Acceptor"]

PRESSURE_LOG_S = 60.0
"""Running out of descriptors on accept is logged at most this often."""
_SHORT_OF = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


class Acceptor:
    """Accepts connections on listening sockets and hands each one (non-blocking) to a
    callback; `what` names the server in its warnings."""

    def __init__(self, what: str, warn: Callable[[str], None] | None) -> None:
        self.what, self.warn = what, warn
        self.refused = 0
        """Connections closed unserved for want of descriptors."""
        self._reserve = _spare_fd()
        self._logged_at = -PRESSURE_LOG_S

    async def serve(self, sock: socket.socket, handle: Callable[[socket.socket], None]) -> None:
        """Accept on `sock` until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(sock)
            except OSError as exc:
                short = exc.errno in _SHORT_OF
                if short:
                    self._short_of_fds(sock, exc)
                await asyncio.sleep(0.1 if short else 0.01)
                continue  # ECONNABORTED and the like: that client is gone
            handle(conn)

    def _short_of_fds(self, sock: socket.socket, exc: OSError) -> None:
        """Free the spare descriptor to accept and close the waiting client, take it again, and
        say so once per PRESSURE_LOG_S."""
        self.refused += 1
        if self._reserve >= 0:
            os.close(self._reserve)
            self._reserve = -1
        with contextlib.suppress(OSError):
            sock.accept()[0].close()
        self._reserve = _spare_fd()
        now = time.monotonic()
        if self.warn is not None and now - self._logged_at >= PRESSURE_LOG_S:
            self._logged_at = now
            self.warn(f"{self.what}: cannot accept a connection: {exc.strerror} ({self.refused} "
                      "closed unserved so far; the descriptor limit is reached)")

    def close(self) -> None:
        if self._reserve >= 0:
            os.close(self._reserve)
            self._reserve = -1


def _spare_fd() -> int:
    try:
        return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return -1
