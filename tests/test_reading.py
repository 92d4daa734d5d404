"""How a file generation is read: a drain's first read asks for what the file holds (a tailed
file's few KiB allocate no read-size buffer), a backlog is read `read_size` at a time, and only a
backlog makes the C heap keep its pages for the read buffers (`sources.reading`)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from watchrun.events import Chunk
from watchrun.sources import generation, reading
from watchrun.sources.generation import Generation
from watchrun.sources.reading import FIRST_READ, first_read


@pytest.mark.parametrize(("size", "pos", "limit", "want"), [
    (10, 0, 1 << 20, FIRST_READ),  # a small file: at least FIRST_READ (it may have grown)
    (3 << 20, 0, 1 << 20, 1 << 20),  # a backlog: the read size
    (3 << 20, (3 << 20) - 200_000, 1 << 20, 200_000),  # what is left of it
    (3 << 20, 3 << 20, 1 << 20, FIRST_READ),  # read to its end
    (10, 0, 4096, 4096),  # never more than the read size
])  # fmt: skip
def test_the_first_read_asks_for_what_the_file_holds(tmp_path: Path, size: int, pos: int,
                                                     limit: int, want: int) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * size)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert first_read(fd, pos, limit) == want
    finally:
        os.close(fd)


class Lines:
    """A SourceContext that keeps the chunks."""

    def __init__(self) -> None:
        self.chunks: list[Chunk] = []

    async def chunk(self, chunk: Chunk) -> None:
        self.chunks.append(chunk)

    async def event(self, kind: str, **fields: Any) -> None:
        raise AssertionError(f"no {kind} record expected")


def _drain(path: Path, read_size: int) -> list[Chunk]:
    fd = os.open(path, os.O_RDONLY)
    try:
        gen = Generation(fd, os.fstat(fd), 0, 1, 1024, path=str(path))
        ctx = Lines()
        asyncio.run(gen.drain(ctx, str(path), read_size, None, lambda: None))
        return ctx.chunks
    finally:
        os.close(fd)


@pytest.mark.parametrize(("lines", "read_size", "backlog"), [
    (10, 1 << 20, False),  # a tailed file's few lines: one read of what is there
    (200_000, 1 << 20, True),  # 2.4 MB: reads of START_READ (no match counted to grow them
])  # by: `Lines` is no pipeline), the heap kept
def test_only_a_backlog_keeps_the_heap_and_every_line_is_read_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: int, read_size: int,
        backlog: bool) -> None:
    held: list[bool] = []
    monkeypatch.setattr(generation, "hold_heap", lambda: held.append(True))
    path = tmp_path / "app.log"
    path.write_bytes(b"".join(b"%011d\n" % i for i in range(lines)))
    chunks = _drain(path, read_size)
    assert bool(held) == backlog
    assert b"".join(c.data for c in chunks) == path.read_bytes()
    assert [c.offset for c in chunks[1:]] == [c.end for c in chunks[:-1]]
    assert len(chunks) == -(-path.stat().st_size // min(read_size, reading.START_READ))


def test_holding_the_heap_is_done_once_and_is_harmless(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "_heap_held", False)
    reading.hold_heap()
    reading.hold_heap()
    assert reading._heap_held
    assert bytes(8 << 20)[-1] == 0  # malloc still serves big and small buffers
