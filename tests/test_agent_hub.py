"""AgentHub with real mock-agent processes: wake, coalescing, maxTurns, send, stop, reload."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from msgspec.structs import replace
from test_agent_turn import MOCK, alive, check_records, of, until

from watchrun.agents.history import read_history
from watchrun.agents.hub import AgentHub
from watchrun.clock import SystemClock
from watchrun.config.model import AgentSpec, Config, Limits, OutputSpec, WatcherSpec
from watchrun.events import MatchInfo
from watchrun.output.outdir import OutputLayout, prepare_output_dir
from watchrun.output.runlog import RunLog
from watchrun.output.sink import JsonlSink
from watchrun.process.spawn import Spawner

DEADLINE_S = 20.0


def spec(tmp_path: Path, name: str = "triage", **kw: Any) -> AgentSpec:
    kw.setdefault("prompt", "{matches}")
    return AgentSpec(name=name, provider="mock", command=MOCK, cwd=tmp_path, **kw)


def watcher(wake: tuple[str, ...] = ("triage",), wid: str = "server") -> WatcherSpec:
    return WatcherSpec(id=wid, label="API server", pattern="ERROR", path=Path("/x.log"),
                       wake=wake)


def config(tmp_path: Path, *agents: AgentSpec, limits: Limits | None = None) -> Config:
    return Config(limits or Limits(), OutputSpec(dir=tmp_path / "out"), agents=agents)


def m(line: str, n: int = 1) -> list[MatchInfo]:
    return [MatchInfo(line, n, 0, f"/x.log:{n}")]


class Harness:
    """A running hub (run() as a task) plus the paths and log it writes."""

    def __init__(self, tmp_path: Path, cfg: Config, *, once: bool = False,
                 clock: Any = None) -> None:
        self.layout: OutputLayout = prepare_output_dir(tmp_path / "out")
        self.stream = io.StringIO()
        self.hub = asyncio.run(AgentHub.open(cfg, self.layout, RunLog(stream=self.stream),
                                             clock or SystemClock(), Spawner(), once=once))
        self.task: asyncio.Task[None] | None = None

    def path(self, name: str = "triage") -> Path:
        return self.layout.jsonl("agent", name)

    def records(self, name: str = "triage") -> list[dict[str, Any]]:
        return check_records(self.path(name))

    def count(self, kind: str, name: str = "triage") -> int:
        path = self.path(name)
        return path.read_text().count(f'"kind":"{kind}"') if path.exists() else 0

    async def wait_for(self, kind: str, n: int = 1, name: str = "triage") -> None:
        await until(lambda: self.count(kind, name) >= n, f"{n} {kind} record(s) of {name}")


def hub_test(tmp_path: Path, cfg: Config, body: Callable[[Harness], Awaitable[None]],
             **kw: Any) -> Harness:
    h = Harness(tmp_path, cfg, **kw)

    async def go() -> None:
        h.task = asyncio.create_task(h.hub.run())
        try:
            await asyncio.wait_for(body(h), DEADLINE_S)
        finally:
            await h.hub.shutdown()
            h.task.cancel()
            await asyncio.gather(h.task, return_exceptions=True)

    asyncio.run(go())
    return h


def deliveries(recs: list[dict[str, Any]], state: str) -> list[dict[str, Any]]:
    return [r for r in of(recs, "delivery") if r["deliveryState"] == state]


def test_wake_runs_a_turn_with_the_matched_line_as_one_argument(tmp_path: Path) -> None:
    line = 'ERROR "; rm -rf / # --flag'

    async def body(h: Harness) -> None:
        h.hub.deliver(watcher(), m(line))
        await h.hub.idle()

    h = hub_test(tmp_path, config(tmp_path, spec(tmp_path)), body, once=True)
    recs = h.records()
    assert recs[0]["kind"] == "status" and recs[0]["status"] == "idle"
    (queued,) = deliveries(recs, "queued")
    (delivered,) = deliveries(recs, "delivered")
    (start,) = of(recs, "dispatch-start")
    assert queued["deliveryId"] == f"d-{queued['seq']}" == delivered["deliveryId"]
    assert (queued["watcher"], queued["label"], queued["count"], queued["lines"]) == (
        "server", "API server", 1, [line])
    assert delivered["turnId"] == start["turnId"] and start["trigger"] == "wake"
    assert start["deliveries"] == [queued["deliveryId"]]
    assert of(recs, "prompt")[0]["text"] == line
    (fin,) = of(recs, "dispatch-finished")
    assert fin["status"] == "done"
    assert fin["reply"] == f"Mock triage: read 1 prompt line(s); first: {line}\nDONE"
    assert "started (wake" in h.stream.getvalue()


def test_a_burst_during_a_turn_is_one_bounded_delivery(tmp_path: Path) -> None:
    limits = Limits(max_matches=50, match_lines=20)

    async def body(h: Harness) -> None:
        h.hub.deliver(watcher(), m("first [mock:slow=300]"))
        await h.wait_for("dispatch-start")
        for i in range(999):
            h.hub.deliver(watcher(), m(f"burst {i}", i + 2))
        snap = h.hub.snapshot()[0]
        assert (snap["status"], snap["pending"], snap["pendingMatches"]) == ("running", 1, 999)
        await h.hub.idle()

    h = hub_test(tmp_path, config(tmp_path, spec(tmp_path), limits=limits), body, once=True)
    recs = h.records()
    q1, q2, *recount = deliveries(recs, "queued")
    assert (q2["count"], q2["lines"], q2["overflow"]) == (1, ["burst 0"], 0)
    # a turn that outlasts UPDATE_S (a loaded host) re-records the grown count once
    assert [(r["deliveryId"], r["count"]) for r in recount] in ([], [(q2["deliveryId"], 999)])
    d1, d2 = deliveries(recs, "delivered")
    assert d1["deliveryId"] == q1["deliveryId"] and d2["deliveryId"] == q2["deliveryId"]
    assert (d2["count"], d2["overflow"]) == (999, 949)
    assert d2["lines"] == [f"burst {i}" for i in range(20)]
    t1, t2 = of(recs, "dispatch-start")
    assert d2["turnId"] == t2["turnId"] != t1["turnId"]
    prompt = of(recs, "prompt")[1]["text"]
    assert prompt == "\n".join([f"burst {i}" for i in range(20)] + ["… and 979 more"])
    assert [f["status"] for f in of(recs, "dispatch-finished")] == ["done", "done"]
    assert "read 21 prompt line(s); first: burst 0" in of(recs, "dispatch-finished")[1]["reply"]


def test_max_turns_refusal_drops_and_records(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        h.hub.deliver(watcher(), m("first [mock:slow=200]"))
        await h.wait_for("dispatch-start")
        h.hub.deliver(watcher(), m("second"))
        h.hub.deliver(watcher(), m("third"))
        await h.hub.idle()

    h = hub_test(tmp_path, config(tmp_path, spec(tmp_path, max_turns=1)), body, once=True)
    recs = h.records()
    assert len(of(recs, "dispatch-start")) == 1
    (dropped,) = deliveries(recs, "dropped")
    assert (dropped["reason"], dropped["count"], dropped["lines"]) == (
        "max-turns", 2, ["second", "third"])
    assert "wake turn refused: maxTurns reached (1 turns" in h.stream.getvalue()


def test_max_turns_counts_the_turns_before_a_restart(tmp_path: Path) -> None:
    """A runner that restarts (a crash loop, a deploy) gave each agent a fresh hour: with
    `maxTurns: 2`, two turns, a restart, and two more ran. The turns its records show in the
    last hour count; older ones do not."""
    cfg = config(tmp_path, spec(tmp_path, max_turns=2))
    path = prepare_output_dir(tmp_path / "out").jsonl("agent", "triage")
    start = time.time()

    class Then:
        at = start - 7200.0

        def now(self) -> float:
            return self.at

        def monotonic(self) -> float:
            return time.monotonic()

    then = Then()
    with JsonlSink(path, "triage", max_bytes=1 << 30, keep=1, clock=then) as sink:
        for i, age in enumerate((7200.0, 600.0), 1):  # two hours ago (out), ten minutes ago
            then.at = start - age
            sink.write("dispatch-start", {"turnId": f"turn-{i}", "trigger": "wake",
                                          "deliveries": [], "command": ["x"], "pid": 1,
                                          "pty": False, "provider": "mock"})
            sink.write("dispatch-finished", {
                "turnId": f"turn-{i}", "status": "done", "completed": True, "usage": {
                    "input": 0, "cached": 0, "output": 0, "complete": True}, "tokens": 0,
                "durationMs": 1, "exitCode": 0, "signal": None, "reply": ""})

    async def body(h: Harness) -> None:
        h.hub.deliver(watcher(), m("first"))
        await h.wait_for("dispatch-finished", 3)  # (the one turn left this hour)
        h.hub.deliver(watcher(), m("second"))
        await h.hub.idle()

    h = hub_test(tmp_path, cfg, body, once=True)
    recs = h.records()
    assert len(of(recs, "dispatch-start")) == 3
    (dropped,) = deliveries(recs, "dropped")
    assert (dropped["reason"], dropped["lines"]) == ("max-turns", ["second"])


def test_a_running_turns_tokens_count_in_the_snapshot(tmp_path: Path) -> None:
    """`agent list` showed TOKENS 0 for the whole of a running turn, though its `usage`
    records were written: a long turn's spend was invisible until it ended."""
    seen: list[dict[str, Any]] = []

    async def body(h: Harness) -> None:
        h.hub.deliver(watcher(), m("first [mock:slow=400]"))
        await h.wait_for("usage")
        (snap,) = h.hub.snapshot()
        seen.append(snap)
        await h.hub.idle()
        seen.extend(h.hub.snapshot())

    h = hub_test(tmp_path, config(tmp_path, spec(tmp_path)), body, once=True)
    during, after = seen
    usage = of(h.records(), "usage")
    assert during["status"] == "running" and during["tokens"] > 0, during
    assert during["tokens"] <= after["tokens"] == of(h.records(), "dispatch-finished")[0][
        "tokens"], (during, after, usage)


def test_send_queues_a_manual_turn(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        assert h.hub.send("triage", "check the deploy {label}")["ok"] is True
        reply = h.hub.send("nope", "x")
        assert reply["ok"] is False and reply["error"]["code"] == "unknown_agent"
        assert "triage" in reply["error"]["message"]
        await h.hub.idle()

    h = hub_test(tmp_path, config(tmp_path, spec(tmp_path)), body, once=True)
    recs = h.records()
    (start,) = of(recs, "dispatch-start")
    assert start["trigger"] == "send"
    assert of(recs, "prompt")[0]["text"] == "check the deploy {label}"
    assert deliveries(recs, "delivered")[0]["source"] == "send"


def test_with_output_redact_a_sent_prompt_is_recorded_redacted(tmp_path: Path) -> None:
    """The agent always gets a redacted prompt; with `output.redact` the `send` delivery's own
    records (which hold its text, as match records hold lines) are redacted too."""
    secret = "password=hunter2secret key AKIAIOSFODNN7EXAMPLE"

    async def body(h: Harness) -> None:
        assert h.hub.send("triage", f"sent {secret}")["ok"] is True
        await h.hub.idle()

    cfg = config(tmp_path, spec(tmp_path))
    cfg = replace(cfg, output=replace(cfg.output, redact=True))
    h = hub_test(tmp_path, cfg, body, once=True)
    assert "hunter2" not in h.path().read_text() and "AKIAIOSFODNN7EXAMPLE" not in \
        h.path().read_text()
    queued, delivered = deliveries(h.records(), "queued")[0], deliveries(h.records(), "delivered")
    assert queued["lines"] == ["sent password=[REDACTED:password] key "
                               "[REDACTED:aws-access-key-id]"]
    assert queued["redacted"] == {"password": 1, "aws-access-key-id": 1}
    assert delivered[0]["lines"] == queued["lines"]


def test_a_sent_prompt_reaches_the_agent_redacted(tmp_path: Path) -> None:
    """Every turn's prompt is redacted where turns start, a `send` turn's too (without
    `output.redact` its delivery records keep the text as it was sent)."""
    async def body(h: Harness) -> None:
        assert h.hub.send("triage", "try password=hunter2secret")["ok"] is True
        await h.hub.idle()

    h = hub_test(tmp_path, config(tmp_path, spec(tmp_path)), body, once=True)
    (prompt,) = of(h.records(), "prompt")
    assert prompt["text"] == "try password=[REDACTED:password]"
    assert prompt["redacted"] == {"password": 1}
    assert deliveries(h.records(), "queued")[0]["lines"] == ["try password=hunter2secret"]


def test_stop_agent_cancels_the_running_turn(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        assert await h.hub.stop_agent("triage") is False
        h.hub.deliver(watcher(), m("[mock:hang]"))
        await h.wait_for("session")
        assert await h.hub.stop_agent("triage") is True
        await h.hub.idle()

    h = hub_test(tmp_path, config(tmp_path, spec(tmp_path)), body, once=True)
    recs = h.records()
    assert (of(recs, "stopped")[0]["reason"], of(recs, "stopped")[0]["by"]) == ("aborted",
                                                                              "request")
    assert of(recs, "dispatch-finished")[0]["status"] == "cancelled"
    assert not alive(of(recs, "dispatch-start")[0]["pid"])


def test_shutdown_aborts_the_turn_and_drops_what_waits(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        h.hub.deliver(watcher(), m("[mock:hang]"))
        await h.wait_for("session")
        h.hub.deliver(watcher(), m("later"))

    h = hub_test(tmp_path, config(tmp_path, spec(tmp_path)), body)
    recs = h.records()
    (stopped,) = of(recs, "stopped")
    assert (stopped["reason"], stopped["message"], stopped["by"]) == (
        "aborted", "the runner is stopping", "runner-stopping")
    assert of(recs, "dispatch-finished")[0]["status"] == "cancelled"
    (dropped,) = deliveries(recs, "dropped")
    assert (dropped["reason"], dropped["lines"]) == ("runner-stopped", ["later"])
    assert not alive(of(recs, "dispatch-start")[0]["pid"])


def test_reload_restarts_changed_keeps_their_queue_removes_and_adds(tmp_path: Path) -> None:
    old = config(tmp_path, spec(tmp_path), spec(tmp_path, "gone"))
    new = config(tmp_path, spec(tmp_path, prompt="NEW {matches}"), spec(tmp_path, "fresh"))

    async def body(h: Harness) -> None:
        h.hub.deliver(watcher(), m("[mock:hang]"))
        await h.wait_for("session")
        h.hub.deliver(watcher(), m("kept"))
        await h.hub.reload(new)
        h.hub.deliver(watcher(("fresh",)), m("to fresh"))
        await h.hub.idle()
        assert [s["name"] for s in h.hub.snapshot()] == ["triage", "fresh"]

    h = hub_test(tmp_path, old, body, once=True)
    recs = h.records()
    assert (of(recs, "stopped")[0]["message"], of(recs, "stopped")[0]["by"]) == (
        "the agent's config changed", "reload-changed")
    assert [f["status"] for f in of(recs, "dispatch-finished")] == ["cancelled", "done"]
    assert of(recs, "prompt")[1]["text"] == "NEW kept"
    gone = h.records("gone")
    assert gone[-1]["kind"] == "status" and gone[-1]["status"] == "disabled"
    assert of(h.records("fresh"), "dispatch-finished")[0]["status"] == "done"


def test_snapshot_and_history_survive_a_restart(tmp_path: Path) -> None:
    cfg = config(tmp_path, spec(tmp_path))

    async def body(h: Harness) -> None:
        h.hub.deliver(watcher(), m("one"))
        await h.hub.idle()

    h = hub_test(tmp_path, cfg, body, once=True)
    fin = of(h.records(), "dispatch-finished")[0]
    h2 = Harness(tmp_path, cfg)
    (snap,) = h2.hub.snapshot()
    assert (snap["name"], snap["provider"], snap["status"], snap["turns"]) == (
        "triage", "mock", "idle", 1)
    assert snap["tokens"] == fin["tokens"] > 0 and snap["lastReply"] == fin["reply"]
    asyncio.run(h2.hub.shutdown())
    session = of(h.records(), "session")[0]["sessionId"]
    total = [u for u in of(h.records(), "usage") if "total" in u][-1]["total"]

    baseline = asyncio.run(read_history(h.path())).tracker.baseline(f"claude:{session}")
    assert baseline is not None and baseline.counts() == total


def test_a_turn_left_open_by_a_crash_is_closed(tmp_path: Path) -> None:
    layout = prepare_output_dir(tmp_path / "out")
    with JsonlSink(layout.jsonl("agent", "triage"), "triage", max_bytes=1 << 30, keep=1,
                   clock=SystemClock()) as sink:
        sink.write("dispatch-start", {"turnId": "turn-1", "trigger": "wake", "pid": 1})
    h = Harness(tmp_path, config(tmp_path, spec(tmp_path)))
    asyncio.run(h.hub.shutdown())
    fin = of(h.records(), "dispatch-finished")[0]
    assert (fin["turnId"], fin["status"], fin["error"]["code"]) == (
        "turn-1", "cancelled", "runner-restarted")


class ShiftedClock(SystemClock):
    """Wall time moved so that the next minute starts `lead` seconds from now."""

    def __init__(self, lead: float) -> None:
        now = time.time()
        self.shift = (60 - now % 60) - lead

    def now(self) -> float:
        return time.time() + self.shift


def test_schedule_starts_a_turn_with_the_plain_prompt(tmp_path: Path) -> None:
    agent = spec(tmp_path, schedule="* * * * *", prompt="cron {label} {count} {matches}|")

    async def body(h: Harness) -> None:
        await h.wait_for("dispatch-finished")

    h = hub_test(tmp_path, config(tmp_path, agent), body, clock=ShiftedClock(0.5))
    recs = h.records()
    (start,) = of(recs, "dispatch-start")
    assert start["trigger"] == "schedule" and start["deliveries"] == []
    assert of(recs, "prompt")[0]["text"] == "cron schedule 0 |"


def test_once_mode_runs_no_schedule(tmp_path: Path) -> None:
    agent = spec(tmp_path, schedule="* * * * *")

    async def body(h: Harness) -> None:  # the slow turn spans the minute boundary
        h.hub.deliver(watcher(), m("x [mock:slow=300]"))
        await h.hub.idle()

    h = hub_test(tmp_path, config(tmp_path, agent), body, once=True, clock=ShiftedClock(0.2))
    assert [s["trigger"] for s in of(h.records(), "dispatch-start")] == ["wake"]
