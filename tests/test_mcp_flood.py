"""`watchrun mcp` subscribed to a flooding command watcher of a live runner whose JSONL rotates
every MiB: updates keep coming after the rotations, about one per MIN_GAP_S and never closer, a
`resources/read` of the busy watcher is answered at once, and the server's memory stays bounded
(it does not read every record to decide whether to send an update)."""

from __future__ import annotations

import contextlib
import itertools
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest
from liverunner import LiveRunner, wait_for, write_config
from mcpclient import Client, mcp_session, until

from watchrun.mcp.reads import read_matches
from watchrun.mcp.resources import MIN_GAP_S, uri_of
from watchrun.output.backward import last_records

FLOOD = "while :; do echo ERROR flood; done"
MAX_BYTES = 1 << 20
"""Rotations every MiB: at the least, 64 KiB, the runner's rotations slow the flood down."""
RSS_LIMIT_KB = 200 << 10

pytestmark = pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")


def rss_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(x for x in status.splitlines() if x.startswith("VmRSS:")).split()[1])


def flooded(tmp_path: Path, body: Callable[[Client, Path], Awaitable[None]],
            max_bytes: int = MAX_BYTES) -> None:
    """`body(client, the flood's JSONL)` in an MCP session beside a live runner whose watcher
    `flood` prints ERROR lines as fast as it can, its resource subscribed (and, with a small
    `max_bytes`, rotated twice)."""
    config = write_config(tmp_path, {
        "output": {"maxBytes": max_bytes, "keep": 2},
        "watchers": [{"id": "flood", "command": FLOOD, "pattern": "ERROR"}]})
    jsonl = tmp_path / ".watchrun" / "watchers" / "flood.jsonl"
    runner = LiveRunner(config)
    try:
        runner.wait_running()

        async def session() -> None:
            async with mcp_session(tmp_path, "-c", str(config)) as c:
                await c.session.subscribe_resource(uri_of("flood"))
                inodes: set[int] = set()

                async def rotated() -> bool:  # the live file was replaced twice at least
                    with contextlib.suppress(FileNotFoundError):  # (mid-rotation)
                        inodes.add(jsonl.stat().st_ino)
                    return len(inodes) >= 3 or max_bytes > MAX_BYTES
                await until(rotated, "the flood's JSONL to rotate", timeout=10)
                await body(c, jsonl)
        anyio.run(session)
    finally:
        assert runner.stop() == 0


def test_updates_keep_coming_after_rotation_one_per_gap(tmp_path: Path) -> None:
    async def body(c: Client, jsonl: Path) -> None:
        uri, since = uri_of("flood"), time.monotonic()

        async def updated() -> bool:
            return len([t for t in c.updated_at(uri) if t > since]) >= 8
        await until(updated, "updates after the rotations", timeout=6)
        sent = c.updated_at(uri)
        gaps = [b - a for a, b in itertools.pairwise(sent)]
        # coalesced under the flood: the server sends them MIN_GAP_S apart at least
        # (test_mcp_inprocess.py); here they are seen with a loaded box's jitter
        assert (sent[-1] - sent[0]) / len(gaps) >= MIN_GAP_S * 0.95, gaps
        assert min(gaps) >= MIN_GAP_S * 0.5, gaps
    flooded(tmp_path, body)


def test_the_subscribed_flood_is_read_at_once_and_the_server_stays_small(
        tmp_path: Path) -> None:
    """With the default output.maxBytes (64 MiB): the server used to read and parse all the
    records of the live file, growing ~150 MB/s, and left a `resources/read` unanswered."""
    async def body(c: Client, jsonl: Path) -> None:
        pid, uri = c.pid, uri_of("flood")
        assert pid is not None
        peak = rss_kb(pid)

        async def written(n: int) -> None:  # records stream by while the server is watched
            first = await until(lambda: _seq(jsonl), "the flood's first records")

            async def enough() -> bool:
                nonlocal peak
                peak = max(peak, rss_kb(pid))
                assert peak < RSS_LIMIT_KB, f"watchrun mcp holds {peak} kB"
                return await _seq(jsonl) > first + n
            await until(enough, f"{n} more records of the flood", timeout=10)
        await written(300_000)
        asked = time.monotonic()
        with anyio.fail_after(5):
            read = await c.session.read_resource(uri)
        assert time.monotonic() - asked < 5 and read.contents
        await written(300_000)
    flooded(tmp_path, body, 64 << 20)


async def _seq(jsonl: Path) -> int:
    """The seq of the newest record (0 for none yet, or mid-rotation)."""
    with contextlib.suppress(FileNotFoundError):
        newest = last_records(jsonl, 1)
        return int(newest[0]["seq"]) if newest else 0
    return 0


WRITER = """
import sys
head = b'{"schema":1,"seq":%d,"kind":"match","line":"E"}\\n'
with open(sys.argv[1], "ab", buffering=0) as f:
    for start in range(1, int(sys.argv[2]), 2000):
        f.write(b"".join(head % s for s in range(start, start + 2000)))
"""
"""Appends match records in batches, in another process: faster than a reader parses them."""


def test_the_last_matches_are_read_while_the_stream_outruns_the_reader(tmp_path: Path) -> None:
    """`matches` (and the resource) without `since` read the newest seq, then the last matches
    up to it: the records appended meanwhile are passed over in the same pass. They used to be
    read again with a bigger count, which chased a stream written faster than it is parsed
    and did not return until the writing stopped."""
    path = tmp_path / "watchers" / "w1.jsonl"
    path.parent.mkdir()
    path.touch()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path), "1500000"])
    try:
        wait_for(lambda: path.stat().st_size > 1 << 20, "the first records")
        while writer.poll() is None:  # (each call is a chance for records to come between)
            asked = time.monotonic()
            page = read_matches(tmp_path, "w1", 10, None)
            assert time.monotonic() - asked < 2, "matches chased the stream"
            assert len(page.lines) == 10 and page.truncated
    finally:
        writer.kill()
        writer.wait()
