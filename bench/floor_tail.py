"""The least a Python asyncio tailer pays per write: bench_tail.py's `--floor` competitor.

    python bench/floor_tail.py LOG OUT.jsonl

Follows LOG from its end with inotify on one event loop and, per wake-up: one `fstat`, one
`pread` of what was added, the matcher watchrun uses (`Matcher`, the same engine, pattern and
exclude), one `stat` of the path, and for the matching lines one JSON object each (`kind`,
`line`, `lineNo`, `ts`), appended with one `write`. It does nothing else: no rotation,
truncation or same-head checks, no checkpoints, no sanitizing, no status, no log, no seqs
that survive a restart. It is a measuring stick, not a tailer: what watchrun pays above it is
the price of those (docs/decisions.md, "Performance, issue #14", item 16).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

import orjson

from watchrun.inotify import INotify
from watchrun.match.matcher import Matcher

IN_MODIFY = 0x2


async def follow(log: str, out: str) -> None:
    matcher = Matcher("ERROR|FATAL", ["healthcheck"], case_sensitive=False)
    sink = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    ino = INotify()
    ino.add_watch(log, IN_MODIFY)
    fd = os.open(log, os.O_RDONLY)
    pos, line_no = os.fstat(fd).st_size, 1
    loop = asyncio.get_running_loop()
    woken: asyncio.Future[None] | None = None

    def readable() -> None:
        ino.read()
        if woken is not None and not woken.done():
            woken.set_result(None)

    loop.add_reader(ino.fileno(), readable)
    os.write(sink, b'{"kind":"start"}\n')
    while True:
        woken = loop.create_future()
        await woken
        held = os.fstat(fd).st_size
        data = os.pread(fd, max(held - pos, 64 * 1024), pos)
        data = data[: data.rfind(b"\n") + 1]
        if not data:
            continue
        os.stat(log)
        found, at = [], 0
        for start, end in matcher.find(data):
            line_no += data.count(b"\n", at, start)
            at = start
            line = data[start:end].decode("utf-8", "replace")
            found.append(orjson.dumps({"kind": "match", "line": line, "lineNo": line_no,
                                       "ts": time.time()}) + b"\n")  # fmt: skip
        line_no += data.count(b"\n", at)
        pos += len(data)
        if found:
            os.write(sink, b"".join(found))


def main() -> int:
    asyncio.run(follow(sys.argv[1], sys.argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
