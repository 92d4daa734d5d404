"""A watcher forgotten for good (`clear`) costs a live runner no memory afterwards."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from pathlib import Path

from insupervisor import Running

from watchrun.runtime.client import request

LINE = 900 * 1024  # bytes of each matched line (under the maxLineBytes below)


def test_watchers_added_stopped_and_cleared_leave_no_memory_behind(tmp_path: Path) -> None:
    """(explore-soak S1) Each watcher that ever stopped kept its first matched lines (a once
    run's verdict evidence) for the runner's life: an MCP session's `w1, w2, …`, a script that
    adds and clears one per job, the DaemonSet's pods forgotten by a reload. Here five lines of
    900 KiB per watcher: 4.4 MiB each kept, cleared or not. Measured as the Python heap the
    runner holds (tracemalloc): its RSS also follows the C allocator's pools."""
    (tmp_path / "base.log").write_text("")
    long_log = tmp_path / "long.log"
    long_log.write_bytes(b"".join(b"ERROR " + bytes([97 + i]) * LINE + b"\n" for i in range(5)))
    config = {"limits": {"maxLineBytes": "1MiB", "maxMatches": 5, "maxLogLines": 5},
              "watchers": [{"id": "base", "path": "base.log", "pattern": "ERROR"}]}

    async def main() -> int:
        async with Running(tmp_path, config) as r:
            async def control(payload: dict[str, object]) -> None:
                reply = await asyncio.to_thread(request, r.layout.control_socket, payload)
                assert reply.get("ok"), reply

            async def cycle(wid: str) -> None:
                await control({"cmd": "add", "watcher": {
                    "id": wid, "path": str(long_log), "pattern": "ERROR", "fromStart": True}})
                async with asyncio.timeout(30):
                    while len([x for x in r.records(wid) if x["kind"] == "match"]) < 5:
                        await asyncio.sleep(0.02)
                await control({"cmd": "stop", "id": wid})
                await control({"cmd": "clear", "ids": [wid]})

            await cycle("warm")  # (what the first of them makes once: caches, the board's row)
            gc.collect()
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                for n in range(4):
                    await cycle(f"job{n}")
                gc.collect()
                return tracemalloc.get_traced_memory()[0] - before
            finally:
                tracemalloc.stop()

    grown = asyncio.run(main())
    assert grown < 2 << 20, f"4 forgotten watchers left {grown / (1 << 20):.1f} MiB behind"
