"""The settle after a provider's final result: counted from its last protocol event, never
held open by other output (a background process printing on)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from liverunner import alive
from test_agent_faults import records, seamed_agent_run, write_config
from test_agent_turn import agent, of

from watchrun.agents.providers.usage import UsageTracker
from watchrun.agents.recorder import Recorder
from watchrun.agents.turn_output import TurnOutput
from watchrun.config.model import Limits
from watchrun.match.framing import LineFramer
from watchrun.output.runlog import RunLog
from watchrun.output.sink import JsonlSink

CHATTY_AFTER_RESULT = """\
import json, sys, time
print(json.dumps({"type": "system", "subtype": "init", "session_id": "s"}), flush=True)
print(json.dumps({"type": "result", "subtype": "success", "is_error": False,
                  "result": "answer", "session_id": "s"}), flush=True)
end = time.monotonic() + 30
while time.monotonic() < end:  # a background process it started prints on, never silent
    print("bg: still alive", flush=True)
    print("bg: on stderr", file=sys.stderr, flush=True)
    time.sleep(0.05)
"""


def test_output_after_the_final_result_does_not_hold_the_turn_open(tmp_path: Path) -> None:
    """A process that printed its final `result` and then kept printing lines that are no
    event of its protocol (a background shell's `bg: still alive`, on stdout and stderr) was
    never silent, so the settle after the result never ran out: the turn waited for its
    deadline and failed (forever without one). Those lines no longer count: the turn is
    stopped FINAL_SETTLE_S after the result (`completion`), done as the result said, and what
    was printed meanwhile is recorded."""
    (tmp_path / "agent.py").write_text(CHATTY_AFTER_RESULT)
    cfg = write_config(tmp_path, {"command": [sys.executable, "agent.py", "{prompt}"],
                                  "deadline": "8s"})
    run, _ = seamed_agent_run(tmp_path, cfg, "import watchrun.agents.turn as turn\n"
                              "turn.FINAL_SETTLE_S = 0.5  # (5 s in the runner)\n")
    recs = records(tmp_path)
    (fin,) = of(recs, "dispatch-finished")
    assert (fin["status"], fin["completed"], fin.get("stopReason")) == (
        "done", True, "completion"), fin
    assert "error" not in fin
    assert (run.returncode, run.stdout) == (0, "answer\n"), run.stderr
    (stopped,) = of(recs, "stopped")
    assert stopped == {**stopped, "reason": "completion", "message": (
        "the provider gave its final result and then no event of its protocol for 0.5 s, "
        "without exiting")}
    (completed,) = of(recs, "completed")
    after = [r for r in recs if r["seq"] > completed["seq"]]
    assert [r["text"] for r in of(after, "output")][:1] == ["bg: still alive"]
    assert [r["text"] for r in of(after, "stderr")][:1] == ["bg: on stderr"]
    assert not alive(recs[0]["pid"])


class ManualClock:
    """Monotonic time set by the test."""

    def __init__(self) -> None:
        self.t = 0.0

    def monotonic(self) -> float:
        return self.t

    def now(self) -> float:
        return 1_800_000_000.0 + self.t


RESULT_OK = ('{"type":"result","subtype":"success","is_error":false,"result":"first",'
             '"session_id":"s"}')
RESULT_FAILED = ('{"type":"result","subtype":"error_during_execution","is_error":true,'
                 '"session_id":"s"}')

# (stream, line, final_at after it, completed_ok after it), one line a second from t = 1
AFTER_THE_RESULT = [
    ("stdout", '{"type":"system","subtype":"init","session_id":"s"}', None, None),
    ("stdout", "bg: before the result", None, None),
    ("stdout", RESULT_OK, 3.0, True),  # the final result: the settle counts from here
    ("stdout", "bg: still alive", 3.0, True),  # `output`: not the provider's
    ("stderr", "bg: on stderr", 3.0, True),  # `stderr`: not the provider's
    ("stdout", '{"level":"info","msg":"x"}', 3.0, True),  # `raw` unknown-event
    ("stdout", "{oops", 3.0, True),  # `raw` unparseable
    ("stdout", "   ", 3.0, True),  # blank
    ("stdout", '{"type":"user","message":{"content":[]}}', 9.0, True),  # an event, no record
    ("stdout", '{"type":"assistant","message":{"id":"m2","content":[{"type":"text",'
               '"text":"more"}]}}', 10.0, True),  # an event: the provider is at work again
    ("stdout", "bg: still alive", 10.0, True),
    ("stdout", RESULT_FAILED, 12.0, False),  # a later final result replaces the first
    ("stdout", "bg: still alive", 12.0, False),
]


def test_the_settle_counts_from_the_last_protocol_event_at_or_after_the_final_result(
        tmp_path: Path) -> None:
    """`final_at` (the turn stops FINAL_SETTLE_S after it) is when the final result came, moved
    on by each later line the adapter reads as an event of its provider's protocol, never by
    `output`, `raw`, blank or stderr lines."""
    clock = ManualClock()
    sink = JsonlSink(tmp_path / "t.jsonl", "t", max_bytes=1 << 30, keep=1, clock=clock)
    out = TurnOutput(agent(tmp_path, provider="claude"), Limits(),
                     Recorder(sink, RunLog(quiet=True), "t"), clock, UsageTracker(),
                     1.0, asyncio.Event(), lambda *_: None)
    seen: list[tuple[str, float | None, bool | None]] = []

    async def go() -> None:
        for n, (stream, line, _, _) in enumerate(AFTER_THE_RESULT, 1):
            clock.t = float(n)
            chunk = LineFramer(1 << 20).feed(line.encode() + b"\n")
            assert chunk is not None
            if stream == "stdout":
                await out._chunk(chunk)
            else:
                out._stderr_lines(chunk)
            seen.append((line, out.final_at, out.tally.completed_ok))
        await out.out.flush()

    asyncio.run(go())
    assert seen == [(line, at, ok) for _, line, at, ok in AFTER_THE_RESULT]
