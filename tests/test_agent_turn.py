"""TurnRunner with real processes: the mock agent, real signals, real pseudo-terminals."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.procs import fd_holder
from liverunner import alive
from msgspec.structs import replace
from recordcheck import validate_records

from watchrun.agents.providers.usage import UsageTracker
from watchrun.agents.recorder import Recorder
from watchrun.agents.turn import TurnResult, TurnRunner
from watchrun.clock import SystemClock
from watchrun.config.model import AgentSpec, Limits
from watchrun.output.runlog import RunLog
from watchrun.output.sink import JsonlSink
from watchrun.process.spawn import Spawner

MOCK = (sys.executable, "-m", "watchrun.agents.mock_agent", "{prompt}")
DEADLINE_S = 20.0
def check_records(path: Path) -> list[dict[str, Any]]:
    """Every record, validated against the record schema."""
    return validate_records(path)


def agent(tmp_path: Path, **kw: Any) -> AgentSpec:
    kw.setdefault("command", MOCK)
    return AgentSpec(name="t", provider=kw.pop("provider", "mock"), prompt="{matches}",
                     cwd=tmp_path, **kw)


def run_turn(tmp_path: Path, prompt: str, limits: Limits | None = None,
             settle_s: float = DEADLINE_S, abort_after: str | None = None,
             **kw: Any) -> tuple[TurnResult, list[dict[str, Any]]]:
    """One turn; `abort_after`: call abort() once a record of that kind was written. The mock's
    reply ends in the `until` marker and its last lines (a colour line, the `result` with the
    usage totals) follow it: the settle is long unless a test is about it, so a mock slowed by a
    loaded machine is not stopped before them (it exits by itself right after)."""
    spec = agent(tmp_path, **kw)
    path = tmp_path / "t.jsonl"

    async def go() -> TurnResult:
        sink = JsonlSink(path, "t", max_bytes=1 << 30, keep=1, clock=SystemClock())
        rec = Recorder(sink, RunLog(quiet=True), "t")
        runner = TurnRunner(spec, limits or Limits(), rec, Spawner(), SystemClock(),
                            UsageTracker(), settle_s=settle_s)
        task = asyncio.ensure_future(runner.run(prompt, trigger="manual"))
        if abort_after is not None:
            await until(lambda: kinds_in(path, abort_after), f"a {abort_after} record")
            runner.abort("test abort", "request")
        try:
            return await asyncio.wait_for(task, DEADLINE_S)
        finally:
            await rec.close()

    result = asyncio.run(go())
    return result, check_records(path)


async def until(cond: Any, what: str) -> None:
    end = time.monotonic() + DEADLINE_S
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def kinds_in(path: Path, kind: str) -> bool:
    return path.exists() and f'"kind":"{kind}"' in path.read_text()


def of(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in records if r["kind"] == kind]


def finished(records: list[dict[str, Any]]) -> dict[str, Any]:
    (fin,) = of(records, "dispatch-finished")
    return fin


def group_members(pgid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                out.append(int(name))
    return out


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def test_completed_turn(tmp_path: Path) -> None:
    result, recs = run_turn(tmp_path, "ERROR disk full\n[mock:tool]")
    assert [r["kind"] for r in recs[:3]] == ["dispatch-start", "prompt", "status"]
    start = recs[0]
    assert start["turnId"] == f"turn-{start['seq']}" == result.turn_id
    assert start["command"] == list(MOCK) and start["trigger"] == "manual"
    assert start["pty"] is False and isinstance(start["pid"], int)
    assert recs[1]["text"] == "ERROR disk full\n[mock:tool]"
    assert all(r["turnId"] == result.turn_id for r in recs[:-1])
    reply = "Mock triage: read 1 prompt line(s); first: ERROR disk full\nDONE"
    assert [t["text"] for t in of(recs, "text")] == [reply]
    assert of(recs, "tool")[0]["name"] == "Bash"
    fin = finished(recs)
    usage = [u for u in of(recs, "usage")]
    assert fin["usage"]["input"] == sum(u["input"] for u in usage) > 0
    assert fin["tokens"] == fin["usage"]["input"] + fin["usage"]["output"]
    # the per-message snapshots are provisional; Claude's result total makes the sum exact
    assert [u["complete"] for u in usage] == [False, False, True]
    assert fin["usage"]["complete"] is True
    assert (fin["status"], fin["completed"], fin["exitCode"], fin["reply"]) == (
        "done", True, 0, reply)
    assert "error" not in fin and "stopped" not in [r["kind"] for r in recs]
    assert recs[-1]["kind"] == "status" and recs[-1]["status"] == "idle"
    assert (result.status, result.reply) == ("done", reply)


def test_failing_turn(tmp_path: Path) -> None:
    result, recs = run_turn(tmp_path, "x [mock:fail]")
    fin = finished(recs)
    assert (fin["status"], fin["completed"], fin["exitCode"]) == ("failed", False, 1)
    assert fin["error"]["message"]
    assert result.status == "failed" and result.exit_code == 1


def test_deadline_stops_the_process_group(tmp_path: Path) -> None:
    _, recs = run_turn(tmp_path, "[mock:hang]", deadline_ms=400)
    (stopped,) = of(recs, "stopped")
    assert stopped["reason"] == "deadline" and "400 ms" in stopped["message"]
    fin = finished(recs)
    assert (fin["status"], fin["exitCode"], fin["signal"]) == ("failed", None, "SIGTERM")
    assert fin["error"]["code"] == "deadline" and fin["durationMs"] >= 400
    assert [r["status"] for r in of(recs, "status")] == ["running", "stopping", "idle"]
    pid = recs[0]["pid"]
    assert not alive(pid) and group_members(pid) == []
    assert of(recs, "session"), "output written before the stop is recorded"


def test_idle_timeout(tmp_path: Path) -> None:
    _, recs = run_turn(tmp_path, "[mock:hang]", idle_timeout_ms=300)
    (stopped,) = of(recs, "stopped")
    assert stopped["reason"] == "idle-timeout"
    assert finished(recs)["status"] == "failed"


def test_completion_marker_stops_after_the_settle(tmp_path: Path) -> None:
    script = "echo working; echo 'all DONE here'; exec sleep 1000"
    _, recs = run_turn(tmp_path, "p", provider="generic", command=("sh", "-c", script),
                       until="output:DONE", settle_s=0.2)
    (stopped,) = of(recs, "stopped")
    assert stopped["reason"] == "completion"
    fin = finished(recs)
    assert (fin["status"], fin["completed"]) == ("done", True)
    assert fin["reply"] == "working\nall DONE here"
    assert not alive(recs[0]["pid"])


def test_completion_marker_when_the_process_exits_during_the_settle(tmp_path: Path) -> None:
    _, recs = run_turn(tmp_path, "hi", until="event:completed", settle_s=5)
    assert of(recs, "stopped") == []
    assert finished(recs)["status"] == "done"


@pytest.mark.parametrize("size", [10_000, 300_000])  # cut inside one read; still pending
def test_oversized_line_is_previewed_and_stops_the_turn(tmp_path: Path, size: int) -> None:
    limits = Limits(max_event_bytes=4096)
    _, recs = run_turn(tmp_path, f"[mock:oversized={size}]", limits=limits)
    (raw,) = of(recs, "raw")
    assert raw["reason"] == "oversized-event" and raw["truncated"] is True
    assert len(raw["value"]) == 2000 and raw["value"].startswith('{"type": "assistant"')
    assert raw["bytes"] > 4096
    (stopped,) = of(recs, "stopped")
    assert stopped["reason"] == "oversized-event" and "4096" in stopped["message"]
    fin = finished(recs)
    assert fin["status"] == "failed" and fin["error"]["code"] == "oversized-event"
    assert of(recs, "completed") == [], "nothing after the oversized line is parsed"


@pytest.mark.parametrize("size", [100_000, 300_000])  # (past maxEventBytes too)
def test_a_generic_agents_long_line_is_cut_text_and_the_turn_goes_on(tmp_path: Path,
                                                                      size: int) -> None:
    """A generic agent has no protocol: a line longer than limits.maxEventBytes ended its turn
    as "a protocol line longer than …" (failed, the rest unread), where a command watcher's
    long line is only cut. It is text cut at maxLineBytes (`truncated`, `omittedBytes` the
    bytes left out), and the turn reads on to its end."""
    limits = Limits(max_event_bytes=200_000, max_line_bytes=16_384)
    script = f"printf 'start\\n'; head -c {size} /dev/zero | tr '\\0' x; printf '\\nend\\n'"
    _, recs = run_turn(tmp_path, "p", provider="generic", command=("sh", "-c", script),
                       limits=limits)
    texts = of(recs, "text")
    assert [t["text"][:5] for t in texts] == ["start", "xxxxx", "end"]
    cut = texts[1]
    assert (len(cut["text"]), cut["truncated"], cut["omittedBytes"]) == (
        16_384, True, size - 16_384)
    assert of(recs, "stopped") == [] and finished(recs)["status"] == "done"


def test_sigterm_ignoring_tree_is_killed_after_stop_timeout(tmp_path: Path) -> None:
    limits = Limits(stop_timeout_ms=300)
    result, recs = run_turn(tmp_path, "[mock:hang][mock:ignore-term][mock:fork]",
                            limits=limits, deadline_ms=300)
    forked = [r["text"] for r in of(recs, "stderr") if "forked pid" in r["text"]]
    assert forked, "the mock reported its setsid child"
    child = int(forked[0].rsplit(" ", 1)[1])
    fin = finished(recs)
    assert (fin["signal"], result.stop_reason) == ("SIGKILL", "deadline")
    assert fin["durationMs"] >= 600, "SIGKILL only after the stopTimeout grace"
    assert not alive(recs[0]["pid"]) and not alive(child)
    assert group_members(recs[0]["pid"]) == []



def test_processes_left_running_after_the_exit_are_stopped_and_recorded(tmp_path: Path) -> None:
    """The agent exits after its answer and leaves a child of its own session running: the
    child was stopped with the turn and nothing said so. Now an `error{left-running}` does."""
    _, recs = run_turn(tmp_path, "hi [mock:fork]")
    forked = [r["text"] for r in of(recs, "stderr") if "forked pid" in r["text"]]
    child = int(forked[0].rsplit(" ", 1)[1])
    (err,) = of(recs, "error")
    assert (err["code"], err["count"]) == ("left-running", 1)
    assert err["message"] == ("the agent exited but 1 process it started kept running; "
                              "stopped it (0 needed SIGKILL)")
    assert finished(recs)["status"] == "done" and not alive(child)


def test_output_held_open_by_a_process_out_of_reach_is_recorded_unread(tmp_path: Path) -> None:
    """The agent hands its stdout to a process that is none of the turn's (here the test's
    own listener, over a unix socket) and exits: the turn ends, and the output it stopped
    reading is recorded (`output-held-open`, `unread`), not dropped unsaid."""
    with fd_holder(DEADLINE_S) as (address, held):
        script = ("import socket, sys; s = socket.socket(socket.AF_UNIX); "
                  f"s.connect({address!r}); socket.send_fds(s, [b'x'], [1]); "
                  "s.recv(1); print('hi')")
        _, recs = run_turn(tmp_path, "p", provider="generic",
                           command=(sys.executable, "-c", script))
    assert len(held) == 1, "the listener held the agent's stdout"
    (err,) = of(recs, "error")
    assert (err["code"], err["unread"]) == ("output-held-open", True)
    assert err["message"] == ("output still open 2s after every process of the turn "
                              "was stopped; stopped reading it")
    fin = finished(recs)
    assert (fin["status"], fin["reply"]) == ("done", "hi")


def test_pty_colour_is_sanitized(tmp_path: Path) -> None:
    _, recs = run_turn(tmp_path, "look [mock:color]", pty=True)
    assert recs[0]["pty"] is True
    outputs = [r["text"] for r in of(recs, "output")]
    assert outputs == ["● mock agent starting", "mock: answer ready"]
    assert finished(recs)["status"] == "done"
    texts = [s for r in recs for s in strings({k: v for k, v in r.items() if k != "raw"})]
    assert not [s for s in texts if "\x1b" in s or "\r" in s]
    raws = [r["raw"] for r in of(recs, "output")]  # as the terminal printed it, CR included
    assert raws[0] == "\x1b[1;32m●\x1b[0m \x1b[36mmock agent\x1b[0m starting\r"
    assert len(raws) == 2 and not [r for r in recs if "raw" in r and r["kind"] != "output"]
    assert of(recs, "stderr") == [], "a pty merges stderr into the output"


def test_stderr_lines_become_records(tmp_path: Path) -> None:
    _, recs = run_turn(tmp_path, "x [mock:stderr]")
    assert [r["text"] for r in of(recs, "stderr")] == ["mock: a diagnostic line on stderr"]
    assert finished(recs)["status"] == "done"


def test_prompt_is_one_argv_element(tmp_path: Path) -> None:
    line = 'ERROR x"; rm -rf / # --flag $(id) `id` {label}'
    _, recs = run_turn(tmp_path, line)
    assert finished(recs)["reply"] == f"Mock triage: read 1 prompt line(s); first: {line}\nDONE"


def test_the_agent_gets_the_prompt_cleaned(tmp_path: Path) -> None:
    """`agent run --prompt` text reaches the agent's argv cleaned, as the record shows it."""
    line = "look \x1b]52;c;ZWNobw==\x07at\x9d \x1b[31mthis\x1b[0m"
    argv_file = tmp_path / "argv.txt"
    script = "import sys, pathlib; pathlib.Path(sys.argv[1]).write_text(sys.argv[2])"
    _, recs = run_turn(tmp_path, line, provider="generic",
                       command=(sys.executable, "-c", script, str(argv_file), "{prompt}"))
    assert argv_file.read_text() == "look at this" == of(recs, "prompt")[0]["text"]


def test_prompt_goes_to_stdin_without_a_placeholder(tmp_path: Path) -> None:
    _, recs = run_turn(tmp_path, "one\ntwo", provider="generic", command=("cat",))
    fin = finished(recs)
    assert (fin["status"], fin["reply"], fin["completed"]) == ("done", "one\ntwo", True)
    assert fin["usage"]["complete"] is False and fin["tokens"] == 0


def test_generic_nonzero_exit_fails(tmp_path: Path) -> None:
    _, recs = run_turn(tmp_path, "p", provider="generic", command=("sh", "-c", "echo hi; exit 3"))
    fin = finished(recs)
    assert (fin["status"], fin["exitCode"], fin["error"]["code"]) == ("failed", 3, "exit")


def test_missing_command_is_an_error_then_a_failed_turn(tmp_path: Path) -> None:
    result, recs = run_turn(tmp_path, "p", command=("/nonexistent/agent-cli", "{prompt}"))
    (err,) = of(recs, "error")
    assert err["code"] == "ENOENT" and "/nonexistent/agent-cli" in err["message"]
    assert recs[0]["kind"] == "dispatch-start" and recs[0]["pid"] is None
    fin = finished(recs)
    assert (fin["status"], fin["exitCode"], fin["error"]["code"]) == ("failed", None, "ENOENT")
    assert result.status == "failed"


def test_abort_cancels_the_turn(tmp_path: Path) -> None:
    _, recs = run_turn(tmp_path, "[mock:hang]", abort_after="session")
    (stopped,) = of(recs, "stopped")
    assert (stopped["reason"], stopped["message"]) == ("aborted", "test abort")
    fin = finished(recs)
    assert (fin["status"], fin["error"]["code"]) == ("cancelled", "aborted")
    assert not alive(recs[0]["pid"])


def test_cancelled_task_still_records_and_kills(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    spec = agent(tmp_path)

    async def go() -> None:
        sink = JsonlSink(path, "t", max_bytes=1 << 30, keep=1, clock=SystemClock())
        rec = Recorder(sink, RunLog(quiet=True), "t")
        runner = TurnRunner(spec, Limits(), rec, Spawner(), SystemClock())
        task = asyncio.ensure_future(runner.run("[mock:hang]", trigger="manual"))
        await until(lambda: kinds_in(path, "session"), "the init line")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await rec.close()

    asyncio.run(go())
    recs = check_records(path)
    assert of(recs, "stopped")[0]["reason"] == "aborted"
    assert finished(recs)["status"] == "cancelled"
    assert not alive(recs[0]["pid"])


def test_reply_is_clipped_and_marked(tmp_path: Path) -> None:
    script = "head -c 70000 /dev/zero | tr '\\0' 'a'; echo"
    _, recs = run_turn(tmp_path, "p", provider="generic", command=("sh", "-c", script),
                       limits=replace(Limits(), max_line_bytes=100_000))
    fin = finished(recs)
    assert len(fin["reply"]) == 64 * 1024 and fin["replyTruncated"] is True
    assert re.fullmatch("a+", fin["reply"])


def test_prompt_record_is_clipped_to_256_kib_and_marked(tmp_path: Path) -> None:
    """records.md: a prompt record is clipped to 256 KiB (`truncated: true`); the agent still
    gets the whole prompt (the reply is the byte count it read)."""
    prompt = "p" * (300 * 1024)
    _, recs = run_turn(tmp_path, prompt, provider="generic", command=("sh", "-c", "wc -c"),
                       limits=replace(Limits(), max_line_bytes=1 << 20))
    (rec,) = of(recs, "prompt")
    assert len(rec["text"]) == 256 * 1024 and rec["truncated"] is True
    assert finished(recs)["reply"].strip() == str(len(prompt))


BLOCKS = 20_000
"""Text blocks in one Claude `assistant` line (~0.7 MB): a record each."""


def blocks_line(n: int) -> str:
    """One Claude `assistant` line of `n` text blocks `b0`, `b1`, …"""
    content = [{"type": "text", "text": f"b{i}"} for i in range(n)]
    return json.dumps({"type": "assistant", "session_id": "s", "message": {
        "id": "m1", "content": content, "usage": {"input_tokens": 7, "output_tokens": 3}}})


def turn_printing(tmp_path: Path, line: str, at_each_turn: Callable[[JsonlSink], None],
                  ) -> tuple[TurnResult, list[dict[str, Any]]]:
    """A Claude turn whose agent prints `line` then its result, with `at_each_turn` called at
    every turn of the loop meanwhile: its result and the records written (`t.jsonl`)."""
    (tmp_path / "line.json").write_text(line + "\n")
    (tmp_path / "agent.py").write_text(
        "import json, sys\n"
        "sys.stdout.write(open('line.json').read())\n"
        "print(json.dumps({'type': 'result', 'subtype': 'success', 'is_error': False,"
        " 'result': 'done', 'session_id': 's',"
        " 'usage': {'input_tokens': 7, 'output_tokens': 3}}))\n")
    spec = agent(tmp_path, provider="claude", command=(sys.executable, "agent.py", "{prompt}"))
    path = tmp_path / "t.jsonl"

    async def go() -> TurnResult:
        sink = JsonlSink(path, "t", max_bytes=1 << 30, keep=1, clock=SystemClock())
        rec = Recorder(sink, RunLog(quiet=True), "t")

        async def look() -> None:
            while True:
                at_each_turn(sink)
                await asyncio.sleep(0)

        watching = asyncio.create_task(look())
        try:
            runner = TurnRunner(spec, Limits(), rec, Spawner(), SystemClock(), UsageTracker())
            return await asyncio.wait_for(runner.run("hi", trigger="manual"), DEADLINE_S)
        finally:
            watching.cancel()
            await rec.close()

    result = asyncio.run(go())
    return result, [json.loads(x) for x in path.read_text().splitlines()]  # (unchecked: the
    # schema costs ~0.2 ms a record)


def test_a_line_of_many_blocks_is_written_a_slice_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One protocol line of 400 000 content blocks (~10 MB) became 400 000 records written in
    one go, holding the loop ~19 s (the stall guard's `loop-stalled`). They are written
    `SLICE_RECORDS` at a time, the loop let run between (a task that runs at every turn of the
    loop sees the stream grow by a slice at most, where it saw 20 000 records come at once),
    and none is dropped (Claude's `--output-format json` prints a whole session as one line),
    even where the agent exits before they are written: its end waits for them, not DRAIN_S
    only."""
    from watchrun.agents import turn
    from watchrun.agents.turn_output import SLICE_RECORDS

    monkeypatch.setattr(turn, "DRAIN_S", 0.05)  # (2 s: the records would all be in by then)
    seen: list[int] = []  # the stream's next seq, at every turn of the loop
    result, recs = turn_printing(tmp_path, blocks_line(BLOCKS),
                                 lambda sink: seen.append(sink.next_seq))
    most = max(b - a for a, b in itertools.pairwise(seen))
    assert most <= SLICE_RECORDS + 10, f"{most} records written between two turns of the loop"
    assert [r["text"] for r in of(recs, "text")] == [f"b{i}" for i in range(BLOCKS)] + ["done"]
    assert not of(recs, "error")
    assert (result.status, result.usage.complete) == ("done", True)


LONG_BLOCKS = 100_000
"""Text blocks in one Claude `assistant` line (~3.5 MB, past PARSE_OFF_LOOP_BYTES)."""


def test_a_long_line_is_parsed_off_the_loop(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The adapter's parse of one long protocol line ran on the loop: a line of 400 000 blocks
    (15 MB) held it ~2 s, and every watcher with it. It is parsed in a worker thread: the loop
    runs while it is parsed, held only for the JSON decode (a fraction of the parse: compared
    to that parse itself, timed as it ran, so that a loaded host slows both alike)."""
    from watchrun.agents.turn_output import PARSE_OFF_LOOP_BYTES, TurnOutput

    line = blocks_line(LONG_BLOCKS)
    assert len(line) > PARSE_OFF_LOOP_BYTES
    parses: list[float] = []  # how long each long line's parse took, where it ran
    plain = TurnOutput._parse

    def timed(self: TurnOutput, data: bytes) -> list[Any]:
        began = time.perf_counter()
        try:
            return plain(self, data)
        finally:
            if len(data) > PARSE_OFF_LOOP_BYTES:
                parses.append(time.perf_counter() - began)

    monkeypatch.setattr(TurnOutput, "_parse", timed)
    turns: list[float] = []  # when the loop came round, at every turn of it
    result, recs = turn_printing(tmp_path, line, lambda _: turns.append(time.perf_counter()))
    (parse_s,) = parses  # what the loop waited for, before
    worst = max(b - a for a, b in itertools.pairwise(turns))
    assert worst < parse_s / 2, (
        f"the loop was held {worst:.3f}s while the line was parsed ({parse_s:.3f}s of parse)")
    assert len(of(recs, "text")) == LONG_BLOCKS + 1 and not of(recs, "error")
    assert (result.status, result.usage.complete) == ("done", True)


def test_a_turn_cancelled_while_a_long_line_is_parsed_waits_for_the_thread(
        tmp_path: Path) -> None:
    """A cancel (a deadline, a stop) while a worker thread parses a long line returns once the
    thread is done with the adapter, never while it still uses it (the turn's end calls the
    adapter's `finish` next)."""
    import threading

    from watchrun.agents.turn_output import PARSE_OFF_LOOP_BYTES, TurnOutput
    from watchrun.match.framing import LineFramer

    in_parse, go_on, done = threading.Event(), threading.Event(), threading.Event()
    sink = JsonlSink(tmp_path / "t.jsonl", "t", max_bytes=1 << 30, keep=1, clock=SystemClock())
    out = TurnOutput(agent(tmp_path, provider="claude"), Limits(),
                     Recorder(sink, RunLog(quiet=True), "t"), SystemClock(), UsageTracker(),
                     1.0, asyncio.Event(), lambda *_: None)

    def parse(line: str) -> list[Any]:
        in_parse.set()
        go_on.wait(DEADLINE_S)
        done.set()
        return []

    out.adapter.parse = parse  # type: ignore[method-assign]
    chunk = LineFramer(1 << 30).feed(b"x" * PARSE_OFF_LOOP_BYTES + b"\n")
    assert chunk is not None

    async def go() -> bool:
        reading = asyncio.create_task(out._chunk(chunk))
        while not in_parse.is_set():
            await asyncio.sleep(0.001)
        reading.cancel()
        for _ in range(20):  # (a cancel that did not wait would be through in one or two)
            await asyncio.sleep(0)
        assert not reading.done(), "the cancel returned while the thread still parsed"
        go_on.set()
        with pytest.raises(asyncio.CancelledError):
            await reading
        return done.is_set()

    assert asyncio.run(go())
    sink.close()
