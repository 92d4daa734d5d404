"""What `watch` refusals say: the advice for a pattern only Python `re` can run named a watcher
that was not the one being added (the id it was checked under) and a parameter, `backtracking`,
the tool refuses; `status` of a cleared watcher said `no watcher 'w1' (known: w1)`."""

from __future__ import annotations

from pathlib import Path

import anyio
from liverunner import write_config
from mcpclient import mcp_inproc

from watchrun.mcp.calls import APPLIES


def test_backtracking_advice_is_what_the_tool_and_a_config_can_do(tmp_path: Path) -> None:
    write_config(tmp_path, {"watchers": []})
    assert "backtracking" not in APPLIES["add"]

    async def body() -> None:
        async with mcp_inproc(tmp_path) as c:
            await c.ok(action="add", path="app.log", pattern="ERROR")  # w1, another watcher
            for given in ({}, {"id": "mine"}):
                text = await c.error(action="add", path="app.log", pattern="a(?=b)", **given)
                assert text.startswith("watch add: the watcher has 1 error; nothing was "
                                       "started\n- pattern: \"a(?=b)\" uses lookahead"), text
                assert "`w1`" not in text and "on watcher" not in text, text
                assert "Set `backtracking" not in text, text
                assert text.endswith("Rewrite the pattern without it (RE2 syntax); to run it "
                                     "as it is (in an isolated worker process with a 250 ms "
                                     "budget per line), add the watcher in a config file with "
                                     "`backtracking: true`, which the `watch` tool does not "
                                     "take"), text
            assert [w["id"] for w in (await c.ok(action="list"))["watches"]] == ["w1"]
    anyio.run(body)


def test_status_of_a_cleared_watcher_says_it_was_cleared(tmp_path: Path) -> None:
    write_config(tmp_path, {"watchers": []})

    async def body() -> None:
        async with mcp_inproc(tmp_path) as c:
            await c.ok(action="add", path="app.log", pattern="ERROR")
            await c.ok(action="add", path="app.log", pattern="WARN")
            await c.ok(action="stop", id="w1")
            assert (await c.ok(action="clear"))["cleared"] == 1
            text = await c.error(action="status", id="w1")
            assert text == "watch status: no watcher 'w1' (known: w2): w1 was cleared; its " \
                "records are kept, and `matches` and `logs` still read them"
            assert (await c.ok(action="matches", id="w1"))["count"] == 0  # as it says
            assert await c.error(action="status", id="w9") == "watch status: no watcher " \
                "'w9' (known: w2; cleared, their records kept for `matches` and `logs`: w1)"
    anyio.run(body)
