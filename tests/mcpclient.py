"""Test helper: `watchrun mcp` as a real subprocess driven by the MCP SDK's own stdio client
(`stdio_client` + `ClientSession`), with condition waits that have deadlines."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from liverunner import DEADLINE_S, watchrun_bin
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


async def until(cond: Callable[[], Awaitable[Any]], what: str,
                timeout: float = DEADLINE_S) -> Any:
    """Await `cond()` until it returns something truthy; fail naming `what` after `timeout`."""
    end = time.monotonic() + timeout
    while True:
        value = await cond()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await anyio.sleep(0.02)


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2:].split()[0] != b"Z"


def server_env() -> dict[str, str]:
    """What `watchrun mcp` gets besides the SDK's default environment (which has no
    PYTHONPATH): the tree under test, as the runners the tests start get it, and forced polling
    when the suite runs with it."""
    keep = {k: os.environ[k] for k in ("PYTHONPATH", "WATCHRUN_FORCE_POLL") if os.environ.get(k)}
    return {"PYTHONDONTWRITEBYTECODE": "1", **keep}


class Client:
    """One MCP session with `watchrun mcp`: calls, and the notifications it received."""

    def __init__(self, session: ClientSession, stderr: Path) -> None:
        self.session = session
        self.stderr_path = stderr
        self.notes: list[Any] = []
        self.times: list[float] = []
        """When each of `notes` arrived (time.monotonic())."""

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    async def call(self, **arguments: Any) -> types.CallToolResult:
        result = await self.session.call_tool("watch", arguments)
        assert isinstance(result, types.CallToolResult)
        return result

    async def ok(self, **arguments: Any) -> dict[str, Any]:
        """The structured result of a call that must succeed (the SDK client has checked it
        against the tool's output schema)."""
        result = await self.call(**arguments)
        assert not result.is_error, result.content
        assert isinstance(result.structured_content, dict)
        return result.structured_content

    async def error(self, **arguments: Any) -> str:
        """The text of a call that must fail, as a tool error (isError), not a protocol one."""
        result = await self.call(**arguments)
        assert result.is_error, result.structured_content
        block = result.content[0]
        assert isinstance(block, types.TextContent)
        return block.text

    async def status(self, wid: str) -> dict[str, Any]:
        watch = (await self.ok(action="status", id=wid))["watch"]
        assert isinstance(watch, dict)
        return watch

    def updated(self, uri: str) -> int:
        return len(self.updated_at(uri))

    def updated_at(self, uri: str) -> list[float]:
        """When each `notifications/resources/updated` for `uri` arrived (time.monotonic())."""
        return [t for n, t in zip(self.notes, self.times, strict=True)
                if isinstance(n, types.ResourceUpdatedNotification) and n.params.uri == uri]

    def list_changed(self) -> int:
        return sum(isinstance(n, types.ResourceListChangedNotification) for n in self.notes)


@contextlib.asynccontextmanager
async def mcp_session(cwd: Path, *args: str) -> AsyncIterator[Client]:
    """`watchrun mcp ARGS` started in `cwd`; leaving the block closes its stdin (the session
    ends) and waits for it as the SDK does (then kills it)."""
    params = StdioServerParameters(command=watchrun_bin(), args=["mcp", *args], cwd=str(cwd),
                                   env=server_env())
    err_path = cwd / f"mcp-{time.monotonic_ns()}.err"
    with err_path.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            client: Client | None = None

            async def on_message(message: Any) -> None:
                if client is not None:
                    client.notes.append(message)
                    client.times.append(time.monotonic())

            async with ClientSession(read, write, message_handler=on_message) as session:
                client = Client(session, err_path)
                await session.initialize()
                yield client
