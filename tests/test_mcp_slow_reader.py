"""`watchrun mcp` and a client that sends requests faster than it reads the answers: the server
built every answer and held it until the client read it (~2.5 MB for each `matches` of 2000
lines of 500 bytes: 60 pipelined took 148 MB), in the process that runs the session's own
runner. It now reads no more of the client's messages while MAX_OWED (8) answers are not taken,
and every answer still arrives once the client reads (not in the order asked: requests are
served at once, each answered when it is done)."""

from __future__ import annotations

import json
import os
import select
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from liverunner import DEADLINE_S, read_records, wait_for, write_config
from mcp.shared.exceptions import MCPError
from mcpclient import mcp_inproc
from test_mcp_client_gone import DEAF, call
from test_mcp_faults import RawClient

from watchrun.mcp.owed import MAX_OWED

PIPELINED = 60
LINES = 1000
GROWTH_MB = 45
"""What 60 pipelined answers may add to the server's peak memory (8 of them held: ~20 MB;
all of them: ~70 MB). (100 answers of 2000 lines took the test 16 s of a loaded suite and, once,
longer than its 30 s to read: the same bound at a third of the bytes.)"""


def memory_mb(pid: int, field: str) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(x for x in status.splitlines() if x.startswith(f"{field}:")).split()[1]) / 1024


def messages(client: RawClient, count: int) -> list[dict[str, Any]]:
    """The next `count` messages the server sends, in the order it sends them."""
    out: list[dict[str, Any]] = []
    end = time.monotonic() + DEADLINE_S
    while len(out) < count:
        while b"\n" in client.buf and len(out) < count:
            line, client.buf = client.buf.split(b"\n", 1)
            out.append(json.loads(line))
        left = end - time.monotonic()
        assert left > 0, f"{len(out)} of {count} messages within {DEADLINE_S}s"
        if len(out) < count and select.select([client.stdout], [], [], left)[0]:
            data = os.read(client.stdout.fileno(), 1 << 20)
            assert data, "the server closed stdout"
            client.buf += data
    return out


def test_a_client_that_asks_and_does_not_read_holds_a_bounded_number_of_answers(
        tmp_path: Path) -> None:
    config = write_config(tmp_path, {"watchers": []})
    log = tmp_path / "big.log"
    log.write_text("")
    client = RawClient(tmp_path, "-c", str(config))
    err = Path(client.err.name)
    try:
        added = client.ask(json.loads(call(1, action="add", id="big", path=str(log),
                                           pattern="E")))
        assert added["result"]["isError"] is False, added
        with log.open("a") as f:
            f.write("".join(f"E{i:06d} {'x' * 490}\n" for i in range(LINES)))

        def recorded() -> bool:
            status = client.ask(json.loads(call(2, action="status", id="big")))
            return bool(status["result"]["structuredContent"]["watch"]["matchCount"] >= LINES)
        wait_for(recorded, f"the {LINES} matches to be recorded")
        client.ask(json.loads(call(3, action="matches", id="big", lines=LINES)))
        pid = client.proc.pid
        before = memory_mb(pid, "VmRSS")
        for k in range(PIPELINED):  # sent, none of the answers read
            client.send(call(100 + k, action="matches", id="big", lines=LINES))
        wait_for(lambda: b"answers it has not taken" in err.read_bytes()
                 or memory_mb(pid, "VmRSS") > before + GROWTH_MB,
                 "the server to hold back the client's requests (or grow past the bound)")
        got = messages(client, PIPELINED)  # now read: every answer comes, whole
        grew = memory_mb(pid, "VmHWM") - before
    finally:
        client.close()
    assert grew < GROWTH_MB, f"the server's peak memory grew {grew:.0f} MB"
    assert sorted(m["id"] for m in got) == list(range(100, 100 + PIPELINED))
    for m in got:
        result = m["result"]["structuredContent"]
        assert result["matches"].count("\n") == LINES - 1, str(m)[:300]
    assert client.proc.returncode == 0, err.read_text()[-2000:]


def test_calls_the_client_gave_up_on_do_not_hold_up_its_next_ones(tmp_path: Path) -> None:
    """A request the client cancels (its timeout: `notifications/cancelled`) is never answered;
    counted as owed for good, MAX_OWED of them would leave room for no other call. Each `stop`
    here waits for a command that ignores SIGTERM (5 s): once MAX_OWED were given up, a `list`
    is still answered at once, while that stop is under way."""
    write_config(tmp_path, {"limits": {"stopTimeout": "5s"}, "watchers": []})
    jsonl = tmp_path / ".watchrun" / "watchers" / "w1.jsonl"

    async def body() -> None:
        async with mcp_inproc(tmp_path) as c:
            await c.ok(action="add", command=DEAF, pattern="up")
            await anyio.to_thread.run_sync(lambda: wait_for(
                lambda: any(r["kind"] == "match" for r in read_records(jsonl)),
                "the command to have set its trap (its `up` matched)"))
            for _ in range(MAX_OWED):
                with pytest.raises(MCPError):
                    await c.session.call_tool("watch", {"action": "stop", "id": "w1"},
                                              read_timeout_seconds=0.2)
            listed = await c.ok(action="list")  # (before: once the stop had ended)
            assert [w["state"] for w in listed["watches"]] == ["stopping"], listed
    anyio.run(body)


def test_the_readme_gives_the_bound() -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    assert f"while {MAX_OWED} requests'" in " ".join(readme.split())
