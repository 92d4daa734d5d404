"""The MCP server: the `watch` tool, the matches resources and their subscriptions on the SDK's
low-level `Server`, served over stdio on one event loop with this session's runner. The session
ends when stdin closes (or on SIGTERM/SIGINT), and then so does every watcher it added."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections import Counter
from datetime import UTC, datetime
from typing import Any, cast

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourcesListChanged,
    ResourceUpdated,
)
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from watchrun import __version__
from watchrun.config.model import Config
from watchrun.match.sanitize import edge_json
from watchrun.mcp import schema
from watchrun.mcp.calls import Failed
from watchrun.mcp.ending import until_ended
from watchrun.mcp.owed import Owed
from watchrun.mcp.resources import TEMPLATE, Followers, Full, parse_uri, uri_of
from watchrun.mcp.runners import NoAnswer, Runners
from watchrun.mcp.stdin import StdinLines
from watchrun.mcp.stdout import StdoutLines
from watchrun.mcp.text import render
from watchrun.mcp.tool import Tool
from watchrun.output.runlog import RunLog
from watchrun.runtime.identity import SESSION
from watchrun.runtime.signals import handle_signals

__all__ = ["build_server", "serve", "serve_session"]

INSTRUCTIONS = (
    "watchrun watches files and commands for log patterns. Use the `watch` tool: `add` a "
    "watcher, then read `matches` with `since` set to the cursor of the previous result to see "
    "only what is new. Subscribe to watchrun://watchers/{id}/matches to be told of new matches."
)
RESOURCE_NOT_FOUND = -32002
"""The MCP specification's error code for an unknown resource."""
HANDSHAKE, LISTEN = "handshake", "listen"
"""The two kinds of subscriber: `resources/subscribe` on a 2025 connection, and the
`subscriptions/listen` streams of a 2026-07-28 one (one subscriber for all of them: each event
goes to the bus once, which hands it to every stream that asked for its URI)."""

TOOL = types.Tool(
    name=schema.NAME, title=schema.TITLE, description=schema.DESCRIPTION,
    input_schema=schema.INPUT_SCHEMA, output_schema=schema.OUTPUT_SCHEMA,
    annotations=types.ToolAnnotations.model_validate(schema.ANNOTATIONS),
)


def build_server(tool: Tool, followers: Followers, log: RunLog) -> Server[Any]:
    """The low-level Server with the tool and resource handlers."""
    bus = InMemorySubscriptionBus()
    streams = ListenHandler(bus)
    listening: Counter[str] = Counter()

    async def publish(uri: str) -> None:
        await bus.publish(ResourceUpdated(uri))

    async def known() -> set[str]:
        """The ids of the watchers whose resources can be followed (those `status` knows); the
        followers of others end (cleared: they record nothing more)."""
        try:
            ids = await tool.known()
        except (Failed, NoAnswer) as exc:
            raise MCPError(types.INTERNAL_ERROR, f"cannot tell which watchers there are: {exc}"
                           ) from None
        followers.keep(ids)
        return ids

    async def follow(uris: set[str], key: object, send: Any) -> None:
        """Follow `uris` (all or none: Full is refused before any is followed)."""
        try:
            followers.room(uris)
        except Full as exc:
            raise MCPError(types.INTERNAL_ERROR, str(exc)) from None
        for uri in uris:
            await followers.subscribe(uri, key, send)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[TOOL])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name != schema.NAME:
            return _error_result(f"unknown tool {params.name!r}: this server has `watch`")
        try:
            details, changed = await tool.call(params.arguments or {})
        except Exception as exc:  # a bug: the caller gets an error result, the server goes on
            log.error(f"watch call failed: {exc!r}", event="mcp-error")
            return _error_result(f"internal error: {exc!r}")
        if changed:
            with contextlib.suppress(Exception):  # the client may be gone already
                if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    await bus.publish(ResourcesListChanged())
                else:
                    await ctx.session.send_resource_list_changed()
            if details.get("action") == "clear":  # (the cleared ones are followed no more)
                with contextlib.suppress(MCPError):
                    await known()
        if details.get("action") not in schema.ACTIONS:  # no WatchDetails without an action
            return _error_result(str(details.get("error")))
        text = render(details, datetime.now(UTC))
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content=details, is_error="error" in details)

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        details, _ = await tool.call({"action": "list"})
        return types.ListResourcesResult(resources=[
            types.Resource(uri=uri_of(w["id"]), name=f"{w['id']} matches",
                           title=f"{w['label']}: matches", mime_type="application/json",
                           description=f"New matches of watcher {w['id']} ({w['label']}); "
                           "`?since=CURSOR` for those after a cursor")
            for w in details.get("watches", [])])

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[types.ResourceTemplate(
            uri_template=TEMPLATE, name="matches", title="A watcher's matches",
            mime_type="application/json", description="The matches of a watcher as the "
            "`watch` tool's `matches` returns them (`?since=CURSOR`: only those after it)")])

    async def read_resource(ctx: Any,
                            params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        wid, since = _parse(params.uri)
        call: dict[str, Any] = {"action": "matches", "id": wid}
        if since is not None:
            call["since"] = since
        details, _ = await tool.call(call)
        if "error" in details:
            raise MCPError(RESOURCE_NOT_FOUND, str(details["error"]))
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=params.uri, mime_type="application/json", text=edge_json(details))])

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        """Only to a watcher `status` knows (one cleared records nothing more; one that never
        was would cost a follower for nothing): another is refused as `resources/read` is."""
        wid, _ = _parse(params.uri)
        if wid not in await known():
            raise MCPError(RESOURCE_NOT_FOUND, f"cannot subscribe to {params.uri}: "
                           f"{await tool.unknown(wid)}", {"uri": params.uri})
        await follow({params.uri}, HANDSHAKE, ctx.session.send_resource_updated)
        return types.EmptyResult()

    async def unsubscribe(ctx: Any,
                          params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        followers.unsubscribe(params.uri, HANDSHAKE)
        return types.EmptyResult()

    async def listen(ctx: Any, params: types.SubscriptionsListenRequestParams
                     ) -> types.SubscriptionsListenResult:
        """A 2026-07-28 subscription stream: the SDK's handler serves it; the watchers `status`
        knows whose URIs it names are followed while it is open (another URI is honored and
        never fires, as the SDK honors one of a resource that does not exist)."""
        ids, uris = await known(), set()
        for uri in params.notifications.resource_subscriptions or []:
            with contextlib.suppress(ValueError):
                if parse_uri(uri)[0] in ids:
                    uris.add(uri)
        for uri in uris:
            listening[uri] += 1
        try:
            await follow(uris, LISTEN, publish)
            return await streams(ctx, params)
        finally:
            for uri in uris:
                listening[uri] -= 1
                if not listening[uri]:
                    del listening[uri]
                    followers.unsubscribe(uri, LISTEN)

    return Server("watchrun", version=__version__, instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool,
                  on_list_resources=list_resources, on_list_resource_templates=list_templates,
                  on_read_resource=read_resource, on_subscribe_resource=subscribe,
                  on_unsubscribe_resource=unsubscribe, on_subscriptions_listen=listen)


def _parse(uri: str) -> tuple[str, str | None]:
    try:
        return parse_uri(uri)
    except ValueError as exc:
        raise MCPError(types.INVALID_PARAMS, str(exc)) from None


def _error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                is_error=True)


async def serve(config: Config, log: RunLog, cwd: str, broken: str | None = None) -> None:
    """Serve one MCP session on stdin/stdout; return when it has ended and everything it
    started has stopped. `broken`: the config is invalid, and every call answers that."""
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a client gone: EPIPE, and we clean up
    lines = await StdinLines.open()
    await serve_session(config, log, cwd, broken, lines, await StdoutLines.open(), signals=True)


async def serve_session(config: Config, log: RunLog, cwd: str, broken: str | None,
                        lines: StdinLines | None,
                        stdout: anyio.AsyncFile[str] | StdoutLines | None = None, *,
                        signals: bool = False) -> None:
    """`serve`'s session: the client's messages from `lines` (None: the SDK reads stdin), the
    answers to `stdout` (an async text file; None: the process's stdout), SIGTERM and SIGINT
    ending it when `signals`. (A test serves one on pipes in its own process.)"""
    loop = asyncio.get_running_loop()
    SESSION.set(True)  # (a runner started within is the session's: its `status` says so)

    def end() -> None:
        """A signal (or the session's runner ended by one): the client's messages end, as at
        stdin's end; a second signal ends the session at once (EOF for the SDK's reader)."""
        if lines is None:
            return
        if lines.ending:
            lines.close()
        else:
            log.info("the MCP session ends: its client's messages are read no further, and the "
                     "answers owed go out first (a second SIGTERM or SIGINT ends it at once)",
                     event="session-ending")
            lines.end()

    async with asyncio.TaskGroup() as tg:
        runners = Runners(config, log, tg, on_end=end)
        followers = Followers(config.output.dir, config.limits.poll_ms, log)
        tg.create_task(followers.run(), name="resource-followers")
        server = build_server(Tool(config, runners, cwd, broken), followers, log)
        handled = (signal.SIGTERM, signal.SIGINT) if signals else ()
        restore = handle_signals(loop, dict.fromkeys(handled, end))
        async def session() -> None:
            async with stdio_server(stdin=cast(Any, lines), stdout=cast(Any, stdout)) as (
                    read, write):
                answers: Any = write
                if lines is not None:
                    # what the SDK would drop is answered there; and no more is read while
                    # MAX_OWED answers are not taken (a client that reads none costs that many)
                    owed = Owed(lambda text: log.info(text, event="client-behind"))
                    lines.answer_to(write, owed)
                    answers = owed.counting(write)
                options = server.create_initialization_options(
                    NotificationOptions(resources_changed=True))
                await server.run(read, answers, options)

        try:
            await until_ended(session(), lines, stdout, log)
        except* (BrokenPipeError, ConnectionResetError):  # (writing an answer)
            if not (isinstance(stdout, StdoutLines) and stdout.aborted):  # (not cut here)
                log.info("the MCP client is gone (its end of stdout is closed): the session "
                         "ends", event="client-gone")
        finally:
            # Signals stay handled until everything stopped: the session's runner handles them
            # while it runs (a second SIGTERM kills what remains), else `end` does (nothing).
            await runners.close()
            followers.close()
            restore()
