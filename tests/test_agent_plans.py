"""Plans of agents with real mock-agent processes: the runner as the parent, independent agents
in parallel, dependents after with `{deps.X.answer}`, a dependent of a failed step skipped
(recorded with the reason), coalescing while a plan runs, and a stop in the middle."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from typing import Any

from test_agent_hub import Harness, config, deliveries, hub_test, spec, watcher
from test_agent_turn import of

from watchrun.agents.prompt import NO_ANSWER, render_prompt
from watchrun.config.plans import plan_order
from watchrun.events import MatchInfo


def ms(rec: dict[str, Any]) -> float:
    return datetime.fromisoformat(rec["ts"].replace("Z", "+00:00")).timestamp()


def hits(*lines: str, start: int = 1) -> list[MatchInfo]:
    return [MatchInfo(x, start + i, 0, f"/x.log:{start + i}", f"server:{start + i:016x}")
            for i, x in enumerate(lines)]


def review_fix(tmp_path: Path, review_prompt: str = "Review:\n{matches}") -> Any:
    return config(tmp_path, spec(tmp_path, "review", prompt=review_prompt),
                  spec(tmp_path, "fix", prompt="Fix what the review found:\n"
                       "{deps.review.answer}\n(from {label})", depends_on=("review",)))


def test_plan_order_adds_dependencies_and_orders_them() -> None:
    graph = {"review": (), "tests": ("review",), "lint": (), "fix": ("tests", "lint")}
    assert plan_order(["fix"], graph) == ("review", "tests", "lint", "fix")
    assert plan_order(["tests", "lint"], graph) == ("review", "tests", "lint")
    assert plan_order(["review", "lint"], graph) is None  # no dependency among them
    assert plan_order([], graph) is None


def test_deps_placeholders_outside_a_plan_say_so() -> None:
    text = render_prompt("a {deps.review.answer} b {deps.x.y.answer}", {}, {"review": "R {label}"})
    assert text == "a R {label} b " + NO_ANSWER.format(name="x.y")


def test_review_then_fix_passes_the_answer_on(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        h.hub.deliver(watcher(("review", "fix")), hits("ERROR disk full", "ERROR again"))
        await h.hub.idle()

    h = hub_test(tmp_path, review_fix(tmp_path), body, once=True)
    review, fix = h.records("review"), h.records("fix")
    (plan_r,), (plan_f,) = of(review, "plan"), of(fix, "plan")
    plan_id = "server:0000000000000001"
    assert plan_r["planId"] == plan_f["planId"] == plan_id
    assert (plan_r["decision"], plan_r["reason"]) == ("agents", "watcher server matched 2 lines")
    assert plan_r["steps"] == [
        {"id": "review", "role": "agent", "intent": "Review:", "depends_on": []},
        {"id": "fix", "role": "agent", "intent": "Fix what the review found:",
         "depends_on": ["review"]}]
    assert (plan_r["step"], plan_f["step"]) == ("review", "fix")
    assert plan_r["text"] == "ERROR disk full\nERROR again"
    for recs in (review, fix):
        (start,) = of(recs, "dispatch-start")
        assert (start["trigger"], start["planId"]) == ("plan", plan_id)
        (queued,) = deliveries(recs, "queued")
        (delivered,) = deliveries(recs, "delivered")
        assert queued["planId"] == delivered["planId"] == plan_id
        assert delivered["turnId"] == start["turnId"]
        assert of(recs, "dispatch-finished")[0]["status"] == "done"
    answer = of(review, "dispatch-finished")[0]["reply"]
    assert answer.startswith("Mock triage: read 3 prompt line(s); first: Review:")
    prompt = of(fix, "prompt")[0]["text"]
    assert prompt == f"Fix what the review found:\n{answer}\n(from API server)"
    assert ms(of(fix, "dispatch-start")[0]) >= ms(of(review, "dispatch-finished")[0])
    assert "plan server:0000000000000001: ok" in h.stream.getvalue()


def test_independent_agents_run_in_parallel_and_the_dependent_after(tmp_path: Path) -> None:
    slow = "[mock:slow=300] {matches}"
    cfg = config(tmp_path, spec(tmp_path, "a", prompt=slow), spec(tmp_path, "b", prompt=slow),
                 spec(tmp_path, "c", prompt="{deps.a.answer} | {deps.b.answer}",
                      depends_on=("a", "b")))

    async def body(h: Harness) -> None:
        h.hub.deliver(watcher(("c",)), hits("ERROR x"))  # a and b come with c
        await h.hub.idle()

    h = hub_test(tmp_path, cfg, body, once=True)
    a, b, c = (h.records(n) for n in "abc")
    a_start, a_end = ms(of(a, "dispatch-start")[0]), ms(of(a, "dispatch-finished")[0])
    b_start, b_end = ms(of(b, "dispatch-start")[0]), ms(of(b, "dispatch-finished")[0])
    assert a_start < b_end and b_start < a_end  # overlapping: in parallel
    assert ms(of(c, "dispatch-start")[0]) >= max(a_end, b_end)
    ra, rb = (of(x, "dispatch-finished")[0]["reply"] for x in (a, b))
    assert of(c, "prompt")[0]["text"] == f"{ra} | {rb}"


def test_a_failed_dependency_skips_its_dependent_with_the_reason(tmp_path: Path) -> None:
    cfg = config(tmp_path, spec(tmp_path, "review", prompt="[mock:fail] {matches}"),
                 spec(tmp_path, "lint"),
                 spec(tmp_path, "fix", prompt="{deps.review.answer}",
                      depends_on=("review", "lint")))

    async def body(h: Harness) -> None:
        h.hub.deliver(watcher(("review", "lint", "fix")), hits("ERROR x"))
        await h.hub.idle()

    h = hub_test(tmp_path, cfg, body, once=True)
    assert of(h.records("review"), "dispatch-finished")[0]["status"] == "failed"
    assert of(h.records("lint"), "dispatch-finished")[0]["status"] == "done"
    fix = h.records("fix")
    assert of(fix, "dispatch-start") == []
    (dropped,) = deliveries(fix, "dropped")
    assert dropped["reason"] == "dependency-failed"
    assert dropped["message"].startswith("skipped: review did not finish with an answer "
                                         "(failed: ")
    assert dropped["planId"] == "server:0000000000000001"
    assert "fix skipped" in h.stream.getvalue()


def test_matches_during_a_plan_wait_for_its_next_run(tmp_path: Path) -> None:
    cfg = review_fix(tmp_path, "[mock:slow=200] {matches}")

    async def body(h: Harness) -> None:
        h.hub.deliver(watcher(("review", "fix")), hits("ERROR 1"))
        await h.wait_for("dispatch-start", name="review")
        h.hub.deliver(watcher(("review", "fix")), hits("ERROR 2", start=2))
        h.hub.deliver(watcher(("review", "fix")), hits("ERROR 3", start=3))
        await h.hub.idle()

    h = hub_test(tmp_path, cfg, body, once=True)
    plans = of(h.records("review"), "plan")
    assert [p["planId"] for p in plans] == ["server:0000000000000001", "server:0000000000000002"]
    assert [p["count"] for p in plans] == [1, 2]
    assert len(of(h.records("fix"), "dispatch-finished")) == 2


def test_stopping_in_the_middle_records_every_step(tmp_path: Path) -> None:
    cfg = review_fix(tmp_path, "[mock:hang] {matches}")

    async def body(h: Harness) -> None:
        h.hub.deliver(watcher(("review", "fix")), hits("ERROR 1"))
        await h.wait_for("dispatch-start", name="review")

    h = hub_test(tmp_path, cfg, body)
    assert of(h.records("review"), "dispatch-finished")[0]["status"] == "cancelled"
    fix = h.records("fix")
    (dropped,) = deliveries(fix, "dropped")
    assert dropped["reason"] == "runner-stopped"
    assert of(fix, "dispatch-start") == []


def test_a_wake_without_dependencies_is_no_plan(tmp_path: Path) -> None:
    cfg = config(tmp_path, spec(tmp_path, "a"), spec(tmp_path, "b"))

    async def body(h: Harness) -> None:
        h.hub.deliver(watcher(("a", "b")), hits("ERROR x"))
        await h.hub.idle()

    h = hub_test(tmp_path, cfg, body, once=True)
    for name in "ab":
        recs = h.records(name)
        assert of(recs, "plan") == []
        assert of(recs, "dispatch-start")[0]["trigger"] == "wake"


def test_every_task_of_a_plan_ends_with_the_hub(tmp_path: Path) -> None:
    h = Harness(tmp_path, review_fix(tmp_path, "[mock:hang] {matches}"))

    async def go() -> list[asyncio.Task[Any]]:
        task = asyncio.create_task(h.hub.run())
        h.hub.deliver(watcher(("review", "fix")), hits("ERROR 1"))
        await h.wait_for("dispatch-start", name="review")
        await h.hub.shutdown()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    assert asyncio.run(go()) == []
