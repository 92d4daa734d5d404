"""`watchrun mcp` when its client leaves or gives up during a call: a client that closed its
pipes while a `stop` ran made the server end with `internal error: ExceptionGroup(
BrokenPipeError)` (exit 3) and no `stop` record; a `stop` call cancelled by the client's timeout
wrote no `stop` record and left the watcher's JSONL open."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest
from liverunner import read_records, spawned_by, wait_for, write_config
from mcp.shared.exceptions import MCPError
from mcpclient import mcp_inproc, until
from test_mcp_faults import RawClient

DEAF = "trap 'echo >> termed' TERM; echo up; while :; do sleep 0.1; done"
"""A command that ignores SIGTERM (and says it got one, in `termed`): its stop takes the
config's whole stopTimeout."""


def call(rid: int, **arguments: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {
        "name": "watch", "arguments": arguments}}).encode() + b"\n"


def holders(path: Path) -> list[int]:
    """The processes that have `path` open."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            links = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:
            continue
        if str(path) in links:
            found.append(int(entry.name))
    return found


def stops(jsonl: Path) -> list[str]:
    return [r["reason"] for r in read_records(jsonl) if r["kind"] == "stop"]


@pytest.mark.parametrize("closes", ["both", "stdout"])
def test_a_client_that_leaves_during_a_stop_ends_the_session_cleanly(
        tmp_path: Path, closes: str) -> None:
    write_config(tmp_path, {"limits": {"stopTimeout": "2s"}, "watchers": []})
    client = RawClient(tmp_path, "-c", str(tmp_path / "watch.yaml"))
    try:
        client.send(call(1, action="add", command=DEAF, pattern="up"))
        assert client.reply(1)["result"]["structuredContent"]["watch"]["id"] == "w1"
        jsonl = tmp_path / ".watchrun" / "watchers" / "w1.jsonl"
        # "up" is said after the trap is set: a SIGTERM before it would end the shell at once
        wait_for(lambda: any(r["kind"] == "match" for r in read_records(jsonl)),
                 "the command to have set its trap (its `up` matched)")
        client.send(call(2, action="stop", id="w1"))
        wait_for((tmp_path / "termed").exists, "the stop of w1 to begin (it takes stopTimeout)")
        assert client.proc.stdout is not None and client.proc.stdin is not None
        client.proc.stdout.close()  # the client is gone (mid-call): its answer cannot be sent
        if closes == "both":
            client.proc.stdin.close()
        rc = client.proc.wait(30)
        err = Path(client.err.name).read_text()
        assert rc == 0, err
        assert "internal error" not in err and "Traceback" not in err, err
        assert stops(jsonl) == ["requested"], err
        assert spawned_by(client.proc.pid) == []
    finally:
        client.close()


def test_a_stop_call_the_client_gives_up_on_still_stops_and_records_it(tmp_path: Path) -> None:
    write_config(tmp_path, {"limits": {"stopTimeout": "2s"}, "watchers": []})
    jsonl = tmp_path / ".watchrun" / "watchers" / "w1.jsonl"

    async def body() -> None:
        async with mcp_inproc(tmp_path) as c:
            await c.ok(action="add", command=DEAF, pattern="x")
            with pytest.raises(MCPError):  # its timeout: the SDK sends notifications/cancelled
                await c.session.call_tool("watch", {"action": "stop", "id": "w1"},
                                          read_timeout_seconds=0.3)
            await anyio.to_thread.run_sync(
                lambda: wait_for(lambda: stops(jsonl), "w1's stop record", 15))
            assert stops(jsonl) == ["requested"]
            await anyio.to_thread.run_sync(
                lambda: wait_for(lambda: not holders(jsonl), "w1's JSONL to be closed", 15))


            async def stopped() -> bool:  # (the list may say so a moment after the record)
                return (await c.status("w1"))["status"] == "stopped"

            await until(stopped, "w1 to be listed stopped", 15)
    anyio.run(body)
