"""`watchrun mcp` end to end through the MCP SDK's own stdio client, with no runner live on the
output dir: the server runs the session's own supervisor. Every action of the `watch` tool,
validation before any side effect, the matches cursor, resource subscriptions, and the session's
end (stdin closed, or SIGTERM) stopping every watcher and process it started."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from inproc import inproc
from liverunner import DEADLINE_S, read_records, spawned_by, write_config
from mcp import Client as SdkClient
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated
from mcpclient import Client, alive, inproc_transport, mcp_inproc, mcp_session, until

from watchrun.mcp.calls import APPLIES


def run(body: Callable[[], Awaitable[None]]) -> None:
    anyio.run(body)


def append(path: Path, text: str) -> None:
    with path.open("a") as f:
        f.write(text)


async def count_is(client: Client, wid: str, n: int) -> None:
    async def reached() -> bool:
        return bool((await client.status(wid))["matchCount"] == n)
    await until(reached, f"{wid} to count {n} matches")


def test_the_tool_is_listed_and_bad_calls_are_refused_before_anything_happens(
        tmp_path: Path) -> None:
    """One fresh session (a server's start is ~0.7 s of CPU) for two facts of it: the tool is
    listed with the seed's parameters and annotations, and bad calls are refused before any
    side effect."""
    work = tmp_path / "work"
    work.mkdir()

    async def body() -> None:
        async with mcp_inproc(work) as c:
            tools = (await c.session.list_tools()).tools
            assert [t.name for t in tools] == ["watch"]
            tool = tools[0]
            props = tool.input_schema["properties"]
            seed = {"action", "path", "command", "cwd", "pattern", "exclude", "caseSensitive",
                    "label", "wake", "fromStart", "id", "lines", "all"}
            assert set(props) == seed | {"since"}
            assert tool.input_schema["required"] == ["action"]
            assert props["action"]["enum"] == ["add", "list", "status", "matches", "logs",
                                               "stop", "clear"]
            assert (props["lines"]["minimum"], props["lines"]["maximum"]) == (1, 2000)
            assert all(p.get("description") for p in props.values())
            assert set(APPLIES) == set(props["action"]["enum"])
            a = tool.annotations
            assert a is not None
            assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint,
                    a.open_world_hint) == (False, True, False, True)
            assert tool.output_schema is not None
            assert set(tool.output_schema["properties"]) >= {
                "action", "watch", "watches", "matches", "logs", "truncated", "stopped",
                "cleared", "error"}
            caps = c.session.server_capabilities
            assert caps is not None and caps.resources is not None
            assert caps.resources.subscribe and caps.resources.list_changed
            templates = (await c.session.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["watchrun://watchers/{id}/matches"]
            listed = await c.ok(action="list")
            assert (listed["runner"], listed["watches"]) == ("none", [])
            await bad_calls_are_refused(tmp_path, work, c)
    run(body)


def test_every_action_on_a_file_and_a_command_watcher(tmp_path: Path) -> None:
    app = tmp_path / "app.log"
    app.write_text("ERROR before the add: followed from the end, not matched\n")

    async def body() -> None:
        async with mcp_inproc(tmp_path) as c:
            added = await c.ok(action="add", path="app.log", pattern="ERROR",
                               exclude=["ignore"], label="the app")
            w1 = added["watch"]
            assert (added["runner"], w1["id"], w1["label"]) == ("session", "w1", "the app")
            assert w1["source"] == {"kind": "file", "path": str(app)}  # from the server's cwd
            assert (w1["pattern"], w1["exclude"], w1["status"], w1["origin"]) == \
                ("ERROR", ["ignore"], "running", "runtime")
            assert (w1["caseSensitive"], w1["fromStart"], w1["wake"]) == (False, False, False)
            text = (await c.call(action="add", command="printf 'ERROR one\\nINFO two\\n'; "
                                 "exec sleep 600", pattern="error")).content[0]
            assert isinstance(text, types.TextContent)
            assert text.text == f"w2 added: running `printf 'ERROR one\\nINFO two\\n'; exec " \
                f"sleep 600` in {tmp_path} for /error/"
            w2 = await c.status("w2")
            assert w2["source"] == {"kind": "command", "command": "printf 'ERROR one\\nINFO "
                                    "two\\n'; exec sleep 600", "cwd": str(tmp_path)}
            listed = await c.ok(action="list")
            assert [w["id"] for w in listed["watches"]] == ["w1", "w2"]
            assert listed["runner"] == "session"

            append(app, "ERROR a\nERROR ignore me\nINFO b\n")
            await count_is(c, "w1", 1)
            first = await c.ok(action="matches", id="w1")
            assert (first["matches"], first["count"], first["truncated"]) == ("ERROR a", 1, False)
            cursor = first["cursor"]
            append(app, "ERROR c\nERROR d\n")
            await count_is(c, "w1", 3)
            new = await c.ok(action="matches", id="w1", since=cursor)
            assert (new["matches"], new["count"], new["since"]) == ("ERROR c\nERROR d", 2, cursor)
            again = await c.ok(action="matches", id="w1", since=new["cursor"])
            assert (again["matches"], again["count"], again["cursor"]) == ("", 0, new["cursor"])
            page = await c.ok(action="matches", id="w1", since=cursor, lines=1)
            assert (page["matches"], page["truncated"]) == ("ERROR c", True)
            rest = await c.ok(action="matches", id="w1", since=page["cursor"])
            assert (rest["matches"], rest["truncated"]) == ("ERROR d", False)
            last2 = await c.ok(action="matches", id="w1", lines=2)
            assert (last2["matches"], last2["truncated"]) == ("ERROR c\nERROR d", True)

            async def logged() -> bool:
                return "INFO two" in (await c.ok(action="logs", id="w2"))["logs"]
            await until(logged, "w2's raw lines")
            w2 = await c.status("w2")
            pid = w2["pid"]
            assert isinstance(pid, int) and alive(pid) and w2["matchCount"] == 1
            stop = await c.ok(action="stop", id="w2")
            assert stop["stopped"] is True and stop["watch"]["status"] == "stopped"
            assert not alive(pid)
            again_stop = await c.call(action="stop", id="w2")
            assert not again_stop.is_error and again_stop.structured_content is not None
            assert again_stop.structured_content["stopped"] is False
            cleared = await c.ok(action="clear")
            assert cleared["cleared"] == 1 and [w["id"] for w in cleared["watches"]] == ["w1"]
            everything = await c.ok(action="clear", all=True)
            assert (everything["cleared"], everything["watches"]) == (1, [])
    run(body)


def validate_message(tmp_path: Path, watcher: dict[str, Any]) -> list[str]:
    """What `watchrun validate` says of this watcher in a config file."""
    folder = tmp_path / "validate"
    folder.mkdir(exist_ok=True)
    config = write_config(folder, {"watchers": [watcher]})
    p = inproc(Path.cwd(), "validate", "-c", str(config), "--format", "json")
    return [f"{d['path'].removeprefix('watchers[0]').lstrip('.')}: {d['message']}".lstrip(": ")
            for d in json.loads(p.stdout)["diagnostics"]]


def test_secrets_are_redacted_in_what_the_agent_is_sent(tmp_path: Path) -> None:
    """The MCP client is an agent, whose model most likely runs elsewhere: matched lines, the
    log tail and a command's text went out as written (without `output.redact`), an AWS key
    and a password among them. Redacted as an agent's prompt is, always; the JSONL keeps
    what the config says."""
    app = tmp_path / "app.log"
    app.write_text("")
    secret = "ERROR login AKIAIOSFODNN7EXAMPLE password=hunter2xyz"

    async def body() -> None:
        async with mcp_inproc(tmp_path) as c:
            await c.ok(action="add", path="app.log", pattern="ERROR")
            added = await c.ok(action="add", command="echo started; exec sleep 600 "
                               "# password=hunter2xyz", pattern="started")
            append(app, secret + "\n")
            await count_is(c, "w1", 1)
            shown = [await c.ok(action="matches", id="w1"), await c.ok(action="logs", id="w1"),
                     added, await c.ok(action="list")]
            text = (await c.call(action="matches", id="w1")).content[0]
            assert isinstance(text, types.TextContent)
            for doc in [*(json.dumps(d) for d in shown), text.text]:
                assert "AKIAIOSFODNN7EXAMPLE" not in doc and "hunter2xyz" not in doc, doc
            assert shown[0]["matches"].startswith("ERROR login [REDACTED:")
    anyio.run(body)
    recs = read_records(tmp_path / ".watchrun" / "watchers" / "w1.jsonl")
    assert [r["line"] for r in recs if r["kind"] == "match"] == [secret]


def test_a_secret_cut_at_max_line_bytes_leaves_no_head_in_matches(tmp_path: Path) -> None:
    """A matched line longer than maxLineBytes (64 KiB) keeps its head, which ends in a GitHub
    token's first 25 characters: the record (no `output.redact`) keeps them, the answer does
    not, and it says where the token was; so does the log tail, whose lines show at most 4096
    characters."""
    app = tmp_path / "app.log"
    app.write_text("")
    token = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"

    async def body() -> None:
        async with mcp_inproc(tmp_path) as c:
            await c.ok(action="add", path="app.log", pattern="ERROR")
            append(app, "ERROR " + "x" * (65536 - 6 - 1 - 25) + f" {token} tail\n"
                   + "INFO " + "y" * (4096 - 5 - 1 - 25) + f" {token} tail\n")
            await count_is(c, "w1", 1)
            shown = await c.ok(action="matches", id="w1")
            assert shown["matches"].endswith("xxx [REDACTED:github-token]"), shown["matches"][-80:]
            text = (await c.call(action="matches", id="w1")).content[0]
            assert isinstance(text, types.TextContent) and token[4:10] not in text.text

            async def tail_has_both() -> bool:
                return len((await c.ok(action="logs", id="w1"))["logs"].split("\n")) == 2
            await until(tail_has_both, "the two lines in the tail")
            logs = (await c.ok(action="logs", id="w1"))["logs"]
            assert logs.split("\n")[1].endswith(
                "yyy [REDACTED:github-token] [cut: longer than 4096 characters]"), logs[-90:]
            assert token[4:10] not in logs
    anyio.run(body)
    (rec,) = [r for r in read_records(tmp_path / ".watchrun" / "watchers" / "w1.jsonl")
              if r["kind"] == "match"]
    assert rec["truncated"] and rec["line"].endswith(token[:25])


async def bad_calls_are_refused(tmp_path: Path, work: Path, c: Client) -> None:
    """Bad calls in a session started in `work` are refused before anything happens."""
    bad_regex = await c.error(action="add", path="x.log", pattern="(")
    assert bad_regex.splitlines() == [
        "watch add: the watcher has 1 error; nothing was started",
        *(f"- {m}" for m in validate_message(tmp_path, {
            "id": "w1", "path": "x.log", "pattern": "("}))]
    assert "pattern: invalid regex \"(\": missing )" in bad_regex
    no_source = await c.error(action="add", pattern="ERROR")
    assert no_source.endswith("- needs a source: `path` (a file to follow) or `command` "
                              "(to run)")
    assert "- wake: no agent named `triage`; the config has no agents" in \
        await c.error(action="add", path="x.log", pattern="x", wake="triage")
    assert not (work / ".watchrun").exists()  # not even the session's runner started
    assert (await c.ok(action="list"))["runner"] == "none"
    for args, says in [
        ({"action": "watch"}, "action 'watch': `action` must be one of add, list"),
        ({}, "no action: `action` must be one of add, list"),
        ({"action": "add", "paht": "x"}, "unknown parameter `paht`; did you mean "
         "`path`?"),
        ({"action": "list", "pattern": "x"}, "`pattern` does not apply to list"),
        ({"action": "matches", "id": "w1", "lines": 0}, "lines: must be from 1 to 2000"),
        ({"action": "matches", "id": "w1", "since": "w2:0000000000000001"},
         "since: cursor 'w2:0000000000000001' is of watcher `w2`, not `w1`"),
        ({"action": "status"}, "status needs `id`"),
        ({"action": "status", "id": "nope"}, "no watcher 'nope' (known: none)"),
    ]:
        assert says in await c.error(**args), args
    await c.ok(action="add", path="x.log", pattern="x")  # now the session runs one
    before = sorted(p.name for p in (work / ".watchrun" / "watchers").iterdir())
    assert "invalid regex" in await c.error(action="add", path="y.log", pattern="(",
                                             id="y")
    assert "has both `path` and `command`" in await c.error(
        action="add", path="y.log", command="true", pattern="x")
    assert sorted(p.name for p in (work / ".watchrun" / "watchers").iterdir()) == before
    assert [w["id"] for w in (await c.ok(action="list"))["watches"]] == ["w1"]


@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")  # 2025 clients use it
def test_a_subscribed_watcher_sends_an_update_when_it_matches(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("")

    async def body() -> None:
        async with mcp_inproc(tmp_path) as c:
            await c.ok(action="add", path="app.log", pattern="ERROR")
            await until(lambda: _now(c.list_changed()), "resources/list_changed after add")
            uri = "watchrun://watchers/w1/matches"
            assert [str(r.uri) for r in (await c.session.list_resources()).resources] == [uri]
            await c.session.subscribe_resource(uri)
            read = json.loads(_text(await c.session.read_resource(uri)))
            assert (read["matches"], read["count"]) == ("", 0)
            append(log, "INFO nothing\nERROR disk full\n")
            await until(lambda: _now(c.updated(uri)), f"resources/updated for {uri}")
            now = json.loads(_text(await c.session.read_resource(uri)))
            assert now["matches"] == "ERROR disk full"
            append(log, "ERROR again\n")
            await until(lambda: _now(c.updated(uri) >= 2), "a second update")
            since = json.loads(_text(await c.session.read_resource(
                f"{uri}?since={now['cursor']}")))
            assert since["matches"] == "ERROR again"
            await c.session.unsubscribe_resource(uri)
            with pytest.raises(MCPError, match="no watcher 'nope'"):
                await c.session.read_resource("watchrun://watchers/nope/matches")
            with pytest.raises(MCPError, match="not a watchrun resource"):
                await c.session.read_resource("file:///etc/passwd")
            await c.ok(action="clear", all=True)
            await until(lambda: _now(c.list_changed() >= 2), "list_changed after clear")
            assert (await c.session.list_resources()).resources == []
    run(body)


def test_a_2026_client_listens_for_updates_instead(tmp_path: Path) -> None:
    """The 2026-07-28 protocol replaces resources/subscribe with subscriptions/listen: the SDK's
    `Client` negotiates it over the stdio wire (served in this process: `inproc_transport`) and
    gets the same updates on its listen stream."""
    log = tmp_path / "app.log"
    log.write_text("")

    async def body() -> None:
        with (tmp_path / "mcp.err").open("w") as err:
            async with SdkClient(inproc_transport(tmp_path, err=err),
                                 mode="2026-07-28") as client:
                added = await client.call_tool("watch", {"action": "add", "path": "app.log",
                                                         "pattern": "ERROR"})
                assert not added.is_error
                uri = "watchrun://watchers/w1/matches"
                async with client.listen(resource_subscriptions=[uri]) as sub:
                    assert sub.honored is not None
                    assert sub.honored.resource_subscriptions == [uri]
                    append(log, "ERROR over the new wire\n")
                    with anyio.fail_after(DEADLINE_S):
                        async for event in sub:
                            if event == ResourceUpdated(uri):
                                break
                read = await client.read_resource(uri)
                block = read.contents[0]
                assert isinstance(block, types.TextResourceContents)
                assert json.loads(block.text)["matches"] == "ERROR over the new wire"
    run(body)


async def _now(value: Any) -> Any:
    return value


def _text(result: types.ReadResourceResult) -> str:
    block = result.contents[0]
    assert isinstance(block, types.TextResourceContents)
    assert block.mime_type == "application/json"
    return block.text


def test_the_end_of_the_session_stops_its_commands(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    async def body() -> None:
        async with mcp_session(tmp_path) as c:
            await c.ok(action="add", command="exec sleep 600", pattern="x")
            await c.ok(action="add", command="sleep 600 & sleep 601; wait", pattern="x")
            seen["server"] = _server_of((await c.status("w1"))["pid"])

            async def all_started() -> list[int]:  # sleep 600; sh and its two sleeps
                found = spawned_by(seen["server"])
                return found if len(found) >= 4 else []
            seen["spawned"] = await until(all_started, "the commands and their children")
            seen["stderr"] = c.stderr_path
        # the client closed stdin and waited: everything the session started is gone
    run(body)
    assert not alive(seen["server"])
    assert not [p for p in seen["spawned"] if alive(p)]
    assert spawned_by(seen["server"]) == []
    for wid in ("w1", "w2"):
        stops = [r for r in read_records(tmp_path / ".watchrun" / "watchers" / f"{wid}.jsonl")
                 if r["kind"] == "stop"]
        assert [r["reason"] for r in stops] == ["shutdown"]
    assert "the MCP session ended: stopping its runner" in seen["stderr"].read_text()


def test_a_command_that_ignores_sigterm_is_killed_when_the_client_insists(
        tmp_path: Path) -> None:
    """The SDK's client closes stdin, waits 2 s, then sends SIGTERM: with stopTimeout 30 s a
    command that ignores TERM is still being waited for, and that SIGTERM (a second signal to
    the session's runner) kills what remains at once, with the watcher's stop recorded."""
    write_config(tmp_path, {"limits": {"stopTimeout": "30s"}})
    seen: dict[str, Any] = {}

    async def body() -> None:
        async with mcp_session(tmp_path) as c:
            await c.ok(action="add", command="trap '' TERM; echo up; exec sleep 600",
                       pattern="up")
            await count_is(c, "w1", 1)  # (its `up` comes after the trap: TERM is ignored now)
            seen["pid"] = (await c.status("w1"))["pid"]
            seen["stderr"] = c.stderr_path
    run(body)
    assert not alive(seen["pid"])
    assert "second signal: killing what remains now" in seen["stderr"].read_text()
    stops = [r for r in read_records(tmp_path / ".watchrun" / "watchers" / "w1.jsonl")
             if r["kind"] == "stop"]
    assert [r["reason"] for r in stops] == ["shutdown"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_signal_ends_the_session_as_closing_stdin_does(tmp_path: Path, sig: int) -> None:
    async def body() -> None:
        async with mcp_session(tmp_path) as c:
            await c.ok(action="add", command="exec sleep 600", pattern="x")
            pid = (await c.status("w1"))["pid"]
            server = _server_of(pid)
            os.kill(server, sig)  # stdin stays open: the server must end by itself

            async def gone() -> bool:
                return not alive(server) and not alive(pid)
            await until(gone, "the server and its command to end", timeout=15)
            assert "the MCP session ended" in c.stderr()
    run(body)
    stops = [r for r in read_records(tmp_path / ".watchrun" / "watchers" / "w1.jsonl")
             if r["kind"] == "stop"]
    assert [r["reason"] for r in stops] == ["shutdown"]


def _server_of(pid: int) -> int:
    """The pid of the runner that started process `pid` (here: the MCP server, whose session
    runs in it), from the WATCHRUN_SPAWN_ID=<runner pid>.… every child carries."""
    env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    spawn_id = next(e for e in env if e.startswith(b"WATCHRUN_SPAWN_ID="))
    return int(spawn_id.split(b"=", 1)[1].split(b".", 1)[0])


def test_a_second_session_uses_the_first_sessions_runner(tmp_path: Path) -> None:
    async def body() -> None:
        async with mcp_inproc(tmp_path) as second:  # (its runner's client: this process)
            async with mcp_session(tmp_path) as first:
                assert (await first.ok(action="add", command="exec sleep 600",
                                       pattern="x"))["runner"] == "session"
                added = await second.ok(action="add", command="exec sleep 601", pattern="x")
                assert (added["runner"], added["watch"]["id"]) == ("live", "w2")
                pid = (await second.status("w2"))["pid"]
                assert [w["id"] for w in (await second.ok(action="list"))["watches"]] == \
                    ["w1", "w2"]
            # the first session ended, and its runner with every watcher in it
            assert not alive(pid)
            after = await second.ok(action="list")  # (what the output dir says of them)
            assert after["runner"] == "none"
            assert [(w["id"], w["status"]) for w in after["watches"]] == [
                ("w1", "stopped"), ("w2", "stopped")]
            assert (await second.status("w2"))["status"] == "stopped"
    run(body)
