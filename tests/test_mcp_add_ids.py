"""`add` without an `id` gets the next free w1, w2, …: concurrent adds of one session collided
on the same generated id (one was refused "id in use", and that refusal masked the
`limits.maxWatchers` one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
from liverunner import write_config
from mcpclient import mcp_session


def test_concurrent_adds_get_distinct_ids_and_the_limit_is_said(tmp_path: Path) -> None:
    write_config(tmp_path, {"limits": {"maxWatchers": 3}, "watchers": []})
    (tmp_path / "app.log").write_text("")
    results: list[Any] = []

    async def body() -> None:
        async with mcp_session(tmp_path, "-c", str(tmp_path / "watch.yaml")) as c:
            async def add(n: int) -> None:
                results.append(await c.call(action="add", path="app.log", pattern=f"E{n}"))
            async with anyio.create_task_group() as tg:
                for n in range(8):
                    tg.start_soon(add, n)
            added = sorted(r.structured_content["watch"]["id"] for r in results
                           if not r.is_error)
            refused = [r.content[0].text for r in results if r.is_error]
            assert len(added) == len(set(added)) == 3, refused
            assert len(refused) == 5 and all(
                "limits.maxWatchers is 3" in text for text in refused), refused
            listed = await c.ok(action="list")
            assert sorted(w["id"] for w in listed["watches"]) == added
    anyio.run(body)
