"""systemd's notify protocol (READY, RELOADING, STOPPING, STATUS, WATCHDOG) over NOTIFY_SOCKET."""

from __future__ import annotations

import asyncio
import os
import socket
import time


class SdNotify:
    """Sends notifications when NOTIFY_SOCKET is set; a no-op otherwise."""

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        env = environ if environ is not None else dict(os.environ)
        self.address = env.get("NOTIFY_SOCKET") or None
        usec = env.get("WATCHDOG_USEC")
        pid = env.get("WATCHDOG_PID")
        ok_pid = pid is None or pid == str(os.getpid())
        self.watchdog_s = int(usec) / 1e6 if usec and usec.isdigit() and ok_pid else None
        self._sock: socket.socket | None = None
        self.dropped = 0
        """Notifications not sent because the receiver was not reading (non-blocking send)."""

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, *lines: str) -> None:
        if self.address is None:
            return
        addr = self.address
        if addr.startswith("@"):
            addr = "\0" + addr[1:]
        try:
            if self._sock is None:
                self._sock = socket.socket(
                    socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK)
            self._sock.sendto("\n".join(lines).encode(), addr)
        except BlockingIOError:
            self.dropped += 1  # the reader's queue is full: never block the loop on it
        except OSError:
            pass  # systemd went away; nothing useful to do

    def ready(self, status: str) -> None:
        self.send("READY=1", f"STATUS={status}")

    def reloading(self) -> None:
        usec = int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6)
        self.send("RELOADING=1", f"MONOTONIC_USEC={usec}")

    def stopping(self) -> None:
        self.send("STOPPING=1")

    def status(self, text: str) -> None:
        self.send(f"STATUS={text}")

    def watchdog(self) -> None:
        self.send("WATCHDOG=1")

    async def keep_pinging(self, every_s: float) -> None:
        """WATCHDOG=1 every `every_s`, from the loop itself: a stalled loop stops the pings."""
        while True:
            self.watchdog()
            await asyncio.sleep(every_s)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
