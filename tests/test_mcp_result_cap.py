"""A `watch` result's size is capped: 2000 matched lines of 64 KiB made one 262 MB message. A
result holds at most 1 MiB of lines; those left out are counted (`omitted`) and said, and
paging with `since` still returns every match once, in order."""

from __future__ import annotations

from pathlib import Path

import anyio
import mcp_types as types
from liverunner import write_config
from mcpclient import mcp_inproc, until

MAX_RESULT_BYTES = 1 << 20
"""The cap (`watchrun.mcp.schema.MAX_RESULT_BYTES`, as the README says it)."""

N, WIDTH = 40, 60_000
"""40 matched lines of about 60 KB: 2.4 MB, over twice the cap."""


def big(n: int) -> str:
    return f"ERROR {n:02d} " + "x" * WIDTH


def test_a_result_holds_at_most_1_mib_of_lines_and_says_what_it_left_out(
        tmp_path: Path) -> None:
    write_config(tmp_path, {"watchers": []})
    app = tmp_path / "app.log"
    app.write_text("")

    async def body() -> None:
        async with mcp_inproc(tmp_path) as c:
            await c.ok(action="add", path="app.log", pattern="ERROR")
            start = (await c.ok(action="matches", id="w1"))["cursor"]
            with app.open("a") as f:
                f.writelines(big(n) + "\n" for n in range(N))

            async def counted() -> bool:
                return bool((await c.status("w1"))["matchCount"] == N)
            await until(counted, f"w1 to count {N} matches")

            result = await c.call(action="matches", id="w1", lines=N)
            assert len(result.model_dump_json()) < 4 * MAX_RESULT_BYTES
            last = result.structured_content
            assert last is not None
            shown = last["matches"].split("\n")
            assert last["count"] == len(shown) < N and last["omitted"] == N - len(shown)
            assert last["truncated"] is True
            assert len(last["matches"].encode()) <= MAX_RESULT_BYTES
            assert shown == [big(n) for n in range(N - len(shown), N)]  # the newest
            text = result.content[0]
            assert isinstance(text, types.TextContent)
            assert f"({N - len(shown)} more matches left out: a result holds at most 1 MiB " \
                "of lines; " in text.text

            seen: list[str] = []
            cursor, pages = start, 0
            while len(seen) < N:
                page = await c.ok(action="matches", id="w1", since=cursor, lines=N)
                assert page["count"] > 0 and len(page["matches"].encode()) <= MAX_RESULT_BYTES
                seen += page["matches"].split("\n")
                assert page.get("omitted", 0) == N - len(seen)
                cursor, pages = page["cursor"], pages + 1
            assert seen == [big(n) for n in range(N)] and pages >= 3
            assert (await c.ok(action="matches", id="w1", since=cursor))["count"] == 0

            # a raw line is kept 4096 characters long in the tail: 400 of them are 1.6 MB
            with app.open("a") as f:
                f.writelines(f"INFO {n:03d} " + "y" * 5000 + "\n" for n in range(400))

            async def tailed() -> bool:
                tail = (await c.ok(action="logs", id="w1", lines=1))["logs"]
                return tail.startswith("INFO 399 ")
            await until(tailed, "the last line in w1's tail")
            logs = await c.ok(action="logs", id="w1", lines=400)
            tail = logs["logs"].split("\n")
            assert logs["omitted"] == 400 - len(tail) > 0 and logs["truncated"] is True
            assert tail[-1].startswith("INFO 399 ") and tail[0].startswith(
                f"INFO {400 - len(tail):03d} ")
            assert len(logs["logs"].encode()) <= MAX_RESULT_BYTES
    anyio.run(body)
