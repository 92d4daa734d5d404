"""Test helper: `watchrun mcp` driven by the MCP SDK's own client (`ClientSession`, or `Client`
over `inproc_transport`), with condition waits that have deadlines.

`mcp_session`: a real `watchrun mcp` process through the SDK's `stdio_client` (forked from a
server that has imported the SDK once: tests/forkedmcp.py), for what is about the server's
process (its stdin closing, signals, its stderr, what it leaves behind, the command line and
config discovery).

`mcp_inproc`: the same session served in this process (`watchrun.mcp.server.serve_session`, the
server's code after its stdio set-up) on two pipes, JSON lines each way as over stdio (the
server's own stdin reader and `stdio_server`; on this side what `stdio_client` does), with the
config `watchrun mcp ARGS` would load. For what the tool and resources do: a server process's
start is ~1.4 s of CPU, nearly all of it the SDK's import, paid here once per test process. The
runners it talks to stay real processes; the session's own runner runs in this process, as
tests/insupervisor.py's do.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import io
import os
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

import anyio
import forkedmcp
import forkserver
import mcp_types as types
from liverunner import DEADLINE_S, watchrun_bin
from mcp import ClientSession
from mcp.client._transport import TransportStreams
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.message import SessionMessage

from watchrun.cli.emit import log_diagnostic
from watchrun.cli.main import _find_config, parse
from watchrun.cli.parser import COMMANDS
from watchrun.config import load_config
from watchrun.config.model import Config, Limits, OutputSpec
from watchrun.config.validate import NOTHING_TO_RUN
from watchrun.mcp.server import serve_session
from watchrun.mcp.stdin import StdinLines
from watchrun.output.runlog import RunLog


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
    PYTHONPATH): the tree under test, as the runners the tests start get it, forced polling
    when the suite runs with it, and this process's interpreter settings (PYTHON*, the locale:
    what tests/forkserver.py's server started with, so the server is forked from it)."""
    keep = {k: os.environ[k] for k in ("PYTHONPATH", "WATCHRUN_FORCE_POLL") if os.environ.get(k)}
    return {**forkserver.startup_env(os.environ), **keep}


class Client:
    """One MCP session with `watchrun mcp`: calls, and the notifications it received."""

    def __init__(self, session: ClientSession, stderr: Path, pid: int | None) -> None:
        self.session = session
        self.pid = pid
        """The server's process (None: served in this process)."""
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
    """`watchrun mcp ARGS` started in `cwd` (forked from a server that has imported the SDK:
    tests/forkedmcp.py); leaving the block closes its stdin (the session ends) and waits for it
    as the SDK does (then kills it)."""
    forkedmcp.install()
    params = StdioServerParameters(command=watchrun_bin(), args=["mcp", *args], cwd=str(cwd),
                                   env=server_env())
    err_path = cwd / f"mcp-{time.monotonic_ns()}.err"
    before = len(forkedmcp.started)
    with err_path.open("w") as err:
        async with stdio_client(params, errlog=err) as streams, \
                _client(streams, err_path, forkedmcp.started[before]) as client:
            yield client


@contextlib.asynccontextmanager
async def mcp_inproc(cwd: Path, *args: str) -> AsyncIterator[Client]:
    """`mcp_session`, served in this process (`inproc_transport`): leaving the block closes the
    server's stdin, and waits until the session has ended and stopped what it started."""
    err_path = cwd / f"mcp-{time.monotonic_ns()}.err"
    with err_path.open("w") as err:
        async with inproc_transport(cwd, *args, err=err) as streams, \
                _client(streams, err_path, None) as client:
            yield client


@contextlib.asynccontextmanager
async def _client(streams: TransportStreams, err_path: Path,
                  pid: int | None) -> AsyncIterator[Client]:
    read, write = streams
    client: Client | None = None

    async def on_message(message: Any) -> None:
        if client is not None:
            client.notes.append(message)
            client.times.append(time.monotonic())

    async with ClientSession(read, write, message_handler=on_message) as session:
        client = Client(session, err_path, pid)
        await session.initialize()
        yield client


@contextlib.contextmanager
def _cwd(cwd: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(before)


def served_config(args: tuple[str, ...], log: RunLog, err: TextIO) -> Config:
    """The config `watchrun mcp ARGS` serves in the current directory, found and loaded as
    `cli/mcp_cmd.py` does, its warnings on `log`. Only a valid one: an invalid config, and
    what `mcp` says of the one it found, are tests/test_mcp_cli.py's (the command itself)."""
    ns = parse(["mcp", *args])
    with contextlib.redirect_stderr(err):  # ("using watch.yaml")
        assert _find_config(COMMANDS["mcp"], ns) is None
    root = ns.output_dir if ns.output_dir is not None else Path(".watchrun")
    if not ns.config:
        return Config(Limits(), OutputSpec(Path(os.path.abspath(root))))
    result = load_config([Path(p) for p in ns.config], output_dir=ns.output_dir, cache=True)
    assert result.config is not None, [d.format() for d in result.diagnostics]
    for d in result.diagnostics:
        if d.message != NOTHING_TO_RUN:
            log_diagnostic(log, d)
    return result.config


@contextlib.asynccontextmanager
async def inproc_transport(cwd: Path, *args: str, err: TextIO) -> AsyncIterator[TransportStreams]:
    """A Transport (as `stdio_client` is one) to `watchrun mcp ARGS` served in this process in
    `cwd` (the process's working directory meanwhile), its log on `err`: each message a JSON
    line, the server reading its pipe with its own stdin reader and answering through the SDK's
    `stdio_server`. Leaving it closes the server's stdin and waits for the session to end (a
    session that does not end within DEADLINE_S fails the test)."""
    with _cwd(cwd):
        ns = parse(["mcp", *args])
        log = RunLog(ns.log_format, stream=err)
        config = served_config(args, log, err)
        to_server_r, to_server_w = os.pipe()
        from_server_r, from_server_w = os.pipe()
        to_server = os.fdopen(to_server_w, "wb")
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        from_server = os.fdopen(from_server_r, "rb", buffering=0)
        pipe, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                               from_server)
        read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
        served = anyio.Event()

        async def server() -> None:
            try:
                await _serve_on(config, log, cwd, to_server_r, from_server_w)
            finally:
                served.set()

        async def stdout_reader() -> None:  # as stdio_client's: strict UTF-8, line by line
            decoder = codecs.getincrementaldecoder("utf-8")("strict")
            buffer = ""
            async with read_writer:
                while chunk := await reader.read(1 << 16):
                    got = (buffer + decoder.decode(chunk)).split("\n")
                    buffer = got.pop()
                    for line in got:
                        try:
                            message: SessionMessage | Exception = SessionMessage(
                                types.jsonrpc_message_adapter.validate_json(line, by_name=False))
                        except ValueError as exc:
                            message = exc
                        with contextlib.suppress(anyio.ClosedResourceError,
                                                 anyio.BrokenResourceError):
                            await read_writer.send(message)

        async def stdin_writer() -> None:
            try:
                async with write_reader:
                    async for message in write_reader:
                        data = message.message.model_dump_json(by_alias=True,
                                                               exclude_unset=True)
                        await anyio.to_thread.run_sync(_write, to_server,
                                                       (data + "\n").encode())
            finally:
                to_server.close()  # the server's stdin: EOF, the session ends

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(server)
                tg.start_soon(stdout_reader)
                tg.start_soon(stdin_writer)
                try:
                    yield read_stream, write_stream
                finally:
                    with anyio.CancelScope(shield=True):
                        read_stream.close()
                        write_stream.close()  # the writer sends what it has, then closes
                        with anyio.move_on_after(DEADLINE_S):
                            await served.wait()  # (then the reader ends at its EOF)
                    if not served.is_set():
                        tg.cancel_scope.cancel()
                        raise AssertionError(f"the session served in this process did not end "
                                             f"within {DEADLINE_S}s of its stdin's close")
        finally:
            pipe.close()
            to_server.close()


async def _serve_on(config: Config, log: RunLog, cwd: Path, stdin: int, stdout: int) -> None:
    """`serve_session` reading descriptor `stdin` and answering on `stdout` (both pipes, which
    it owns), as `watchrun mcp` does on its own; `stdout` is closed once it has ended (as the
    process's is when it exits)."""
    out = anyio.wrap_file(io.TextIOWrapper(os.fdopen(stdout, "wb"), encoding="utf-8"))
    try:
        await serve_session(config, log, str(cwd), None, await StdinLines.of_fd(stdin), out)
    finally:
        await out.aclose()


class ThreadServer:
    """`watchrun mcp ARGS` served in this process on a thread of its own (its own event loop),
    for a client that writes `stdin` and reads `stdout` with blocking calls (the raw client of
    tests/test_mcp_faults.py). Not for a session that starts its own runner: a runner takes
    signals, which only the main thread may."""

    def __init__(self, cwd: Path, *args: str, err: TextIO) -> None:
        with _cwd(cwd):
            log = RunLog(parse(["mcp", *args]).log_format, stream=err)
            config = served_config(args, log, err)
        to_server_r, to_server_w = os.pipe()
        from_server_r, from_server_w = os.pipe()
        self.stdin = os.fdopen(to_server_w, "wb")
        self.stdout = os.fdopen(from_server_r, "rb", buffering=0)
        self.failure: BaseException | None = None

        def run() -> None:
            try:
                asyncio.run(_serve_on(config, log, cwd, to_server_r, from_server_w))
            except BaseException as exc:
                self.failure = exc

        self.thread = threading.Thread(target=run, name="mcp-server", daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Close its stdin (the session ends) and wait for it to end; a session that does not
        end within DEADLINE_S, or one that failed, fails the test."""
        self.stdin.close()
        self.thread.join(DEADLINE_S)
        self.stdout.close()
        assert not self.thread.is_alive(), f"the session did not end within {DEADLINE_S}s"
        assert self.failure is None, repr(self.failure)


def _write(f: io.BufferedWriter, data: bytes) -> None:
    f.write(data)
    f.flush()
