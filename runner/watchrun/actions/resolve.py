"""Host names of webhooks looked up, each in a daemon thread of its own and a bounded number at
once (never in the loop's worker threads), and a socket connected to the first address that
takes the connection."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import socket
import threading
from typing import Any

__all__ = ["LOOKUPS_ALL_MAX", "LOOKUPS_MAX", "Address", "connect", "is_address", "lookup"]

LOOKUPS_MAX = 4
"""DNS lookups of one host running at once. `getaddrinfo` cannot be cancelled: a resolver that
never answers keeps its thread after the attempt timed out. So each lookup has a daemon thread
of its own, not one of the loop's worker threads (the runner's checkpoint saves, /proc scans
and snapshots need those), and past this many still running a firing to that host fails at
once (`connect`); other hosts are looked up still."""
LOOKUPS_ALL_MAX = 32
"""And of all hosts together."""
_lookups: dict[str, set[threading.Thread]] = {}
Address = tuple[int, int, int, tuple[Any, ...]]
"""(family, type, proto, socket address) of one address of a host."""


def is_address(host: str) -> bool:
    """An IP address, which asyncio connects to with no lookup."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


async def lookup(host: str, port: int) -> list[Address]:
    """`getaddrinfo` in a daemon thread of its own (see LOOKUPS_MAX): (family, type, proto,
    address) of each address. Cancelled, the thread is left to finish on its own."""
    for name, threads in list(_lookups.items()):
        threads.difference_update([t for t in threads if not t.is_alive()])
        if not threads:
            del _lookups[name]
    mine = _lookups.get(host, set())
    running = sum(len(threads) for threads in _lookups.values())
    if len(mine) >= LOOKUPS_MAX or running >= LOOKUPS_ALL_MAX:
        many = f"{len(mine)} DNS lookups of it" if len(mine) >= LOOKUPS_MAX else (
            f"{running} DNS lookups")
        raise OSError(errno.EAGAIN, f"not looked up: {many} still have no answer (is the "
                      "resolver down?)")
    loop = asyncio.get_running_loop()
    found: asyncio.Future[list[Address]] = loop.create_future()

    def settle(infos: list[Address], exc: BaseException | None) -> None:
        if found.done():
            return  # (the firing stopped waiting)
        if exc is not None:
            found.set_exception(exc)
        else:
            found.set_result(infos)

    def run() -> None:
        infos: list[Address] = []
        failed: BaseException | None = None
        try:
            infos = [(fam, kind, proto, addr) for fam, kind, proto, _, addr in
                     socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]
        except UnicodeError as exc:  # (IDNA: a label too long, say) no server was asked
            failed = OSError(errno.EINVAL, f"the name cannot be looked up ({exc})")
        except Exception as exc:  # (handed to the firing: gaierror, …)
            failed = exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(settle, infos, failed)

    thread = threading.Thread(target=run, name=f"watchrun-lookup:{host}", daemon=True)
    _lookups.setdefault(host, set()).add(thread)
    thread.start()
    return await found


async def connect(infos: list[Address]) -> socket.socket:
    """A socket connected to the first of the addresses that takes the connection."""
    loop = asyncio.get_running_loop()
    failed: OSError = OSError("the name has no address")
    for family, kind, proto, address in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            await loop.sock_connect(sock, address)
        except OSError as exc:
            sock.close()
            failed = exc
            continue
        except BaseException:
            sock.close()
            raise
        return sock
    raise failed
