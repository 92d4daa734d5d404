"""`add` without an `id` gets the next free w1, w2, …: concurrent adds of one session collided
on the same generated id (one was refused "id in use", and that refusal masked the
`limits.maxWatchers` one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

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


class _OthersAdding:
    """A live runner whose other clients (sessions started at the same moment) took w1 to w4 by
    adds still under way: `list` does not show them, `add` refuses them `exists`."""

    kind = "live"

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def request(self, req: dict[str, Any]) -> dict[str, Any]:
        if req["cmd"] == "list":
            return {"ok": True, "watchers": []}
        wid = req["watcher"]["id"]
        self.asked.append(wid)
        if wid in ("w1", "w2", "w3", "w4"):
            return {"ok": False, "error": {"code": "exists", "message": (
                f"watcher id `{wid}` is in use by a runtime watcher; pick another id, or "
                f"`watchrun restart {wid}`")}}
        return {"ok": True, "watcher": {"id": wid, "status": "running"}}


class _Runners:
    def __init__(self, runner: _OthersAdding) -> None:
        self.runner = runner
        self.added: dict[str, Any] = {}

    async def current(self) -> _OthersAdding:
        return self.runner

    async def for_add(self) -> _OthersAdding:
        return self.runner


def test_an_id_other_sessions_took_meanwhile_is_passed_by_not_chosen_again(
        tmp_path: Path) -> None:
    """Sessions started together, each adding without an `id`: a retry chose the same id again
    (the others' adds under way are not listed yet), three times, and the model was told to pick
    an id "or `watchrun restart w13`", another session's watcher. The ids refused are passed by."""
    from watchrun.config.model import Config, Limits, OutputSpec
    from watchrun.mcp.tool import Tool

    config = Config(Limits(), OutputSpec(tmp_path / "out"))
    runner = _OthersAdding()
    tool = Tool(config, cast(Any, _Runners(runner)), str(tmp_path))
    details, _ = anyio.run(tool.call, {"action": "add", "path": "app.log", "pattern": "E"})
    assert details["watch"]["id"] == "w5" and runner.asked == ["w1", "w2", "w3", "w4", "w5"]
