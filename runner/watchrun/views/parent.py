"""The transcript's parent mode (seed 004, `mode: parent`): a plan of agents as one turn whose
parent is the runner, rebuilt from the agents' JSONL alone (`plan` records, deliveries and
turns carrying the same `planId`); `agent transcript NAME` with plan turns, and the run-level
`watchrun transcript` over every agent.

A plan turn: `run_id` is the planId; `user.text` what the plan answered (the matched lines);
`parent` {kind "agents", reason "watcher X matched N lines", reply "", plan [{id, role,
intent, depends_on}]}; `agents[]` one entry per agent that ran (its intent and depends_on
filled); `skipped[]` {id, reason, message} for steps that never ran (a dependency failed,
maxTurns, the runner stopped); `reply` {text, source "synth"}: the answer of the plan's final
agent (several final agents: each answer under `## name`); `outcome` null while a step is open,
then "ok", else the first failing step's outcome in plan order ("failed", a stop reason,
"cancelled", or a skipped step's reason); `error` {error, hint, stopped} the first failing
step's why (also when another final agent answered), or that the plan ended without an answer.
Other turns in parent mode get a decision of one agent (reason from their trigger) and
`reply.source` "agent".
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from msgspec import Struct, field

from watchrun.views.agent_window import delivery_state
from watchrun.views.transcript import (
    INTERRUPTED,
    INTERRUPTED_HINT,
    Turn,
    build_transcript,
    epoch,
    title,
    turns_of,
)

__all__ = ["AgentStream", "build_agent_transcript", "build_run_transcript"]

_REASONS = {"schedule": "the agent's schedule", "send": "a prompt sent with `agent send`",
            "manual": "`watchrun agent run`"}


class AgentStream(Struct):
    """One agent's records, as the views know the agent."""

    name: str
    provider: str
    records: Iterable[dict[str, Any]]
    workspace: str | None = None
    gone: bool = False
    """Nobody holds the agent's lock: its open turns and waiting steps are interrupted."""


class _Member(Struct):
    provider: str
    gone: bool = False
    turn: Turn | None = None
    delivery: dict[str, Any] | None = None
    """Its plan delivery's last record (queued, delivered or dropped)."""


class _Plan(Struct):
    plan_id: str
    record: dict[str, Any]
    members: dict[str, _Member] = field(default_factory=dict)

    def member(self, stream: AgentStream) -> _Member:
        return self.members.setdefault(stream.name, _Member(stream.provider, stream.gone))

    def steps(self) -> list[dict[str, Any]]:
        steps = self.record.get("steps")
        return [s for s in steps if isinstance(s, dict) and isinstance(s.get("id"), str)] \
            if isinstance(steps, list) else []

    def to_dict(self) -> dict[str, Any]:
        steps = self.steps()
        agents, skipped, outcomes, problems = [], [], [], []
        for s in steps:
            m = self.members.get(s["id"])
            if m is not None and m.turn is not None:
                t = m.turn.to_dict(s["id"], m.provider, intent=s.get("intent"),
                                   depends_on=list(s.get("depends_on") or []))
                agents.append((t["agents"][0], t))
                outcomes.append(t["outcome"])
                if t.get("error"):
                    problems.append((t["error"]["error"], t["error"]["hint"],
                                     t["error"]["stopped"]))
                continue
            d = (m.delivery if m is not None else None) or {}
            if delivery_state(d) == "dropped":
                reason = str(d.get("reason") or "dropped")
                message = str(d.get("message") or f"{s['id']} did not run ({reason})")
                skipped.append({"id": s["id"], "reason": reason, "message": message})
                outcomes.append("skipped" if reason == "dependency-failed" else reason)
                problems.append((f"{s['id']} did not run: {message}", None, None))
            elif m is not None and m.gone:  # waiting, but its runner is gone
                skipped.append({"id": s["id"], "reason": "interrupted",
                                "message": f"{s['id']} did not run: {INTERRUPTED}"})
                outcomes.append("interrupted")
                problems.append((f"{s['id']} did not run: {INTERRUPTED}",
                                 INTERRUPTED_HINT, None))
            else:
                outcomes.append(None)  # waiting for its turn
        finished = all(o is not None for o in outcomes)
        outcome = None if not finished else next((o for o in outcomes if o != "ok"), "ok")
        reply = self._synth(steps, {e["id"]: (e, t) for e, t in agents}) if finished else None
        tokens = sum(e["tokens"] for e, _ in agents)
        ends = [t["ts"] + e["wall_seconds"] for e, t in agents
                if t["ts"] is not None and e["wall_seconds"] is not None]
        start = epoch(self.record.get("ts"))
        wall = round(max(0.0, max(ends) - start), 3) if finished and ends and start is not None \
            else None
        turn: dict[str, Any] = {
            "run_id": self.plan_id, "ts": start, "user": {"text": str(self.record.get("text")
                                                                    or "")},
            "parent": {"kind": "agents", "reason": str(self.record.get("reason") or ""),
                       "reply": "", "plan": [{"id": s["id"], "role": str(s.get("role")
                                                                           or "agent"),
                                              "intent": s.get("intent"),
                                              "depends_on": list(s.get("depends_on") or [])}
                                             for s in steps]},
            "agents": [e for e, _ in agents], "skipped": skipped,
            "reply": {"text": reply, "source": "synth"} if reply else None,
            "outcome": outcome, "tokens": tokens, "wall_seconds": wall,
        }
        if finished and (outcome != "ok" or not reply):
            error, hint, stopped = problems[0] if problems else (
                "the plan ended without an answer", None, None)
            turn["error"] = {"error": error, "hint": hint, "stopped": stopped}
        turn["trigger"] = "wake"
        turn["deliveries"] = [f"{s['id']}:{m.delivery['deliveryId']}" for s in steps
                              if (m := self.members.get(s["id"])) is not None
                              and m.delivery is not None and m.delivery.get("deliveryId")]
        return turn

    @staticmethod
    def _synth(steps: list[dict[str, Any]],
               ran: dict[str, tuple[dict[str, Any], dict[str, Any]]]) -> str | None:
        """The final agents' answers: the steps no other step depends on."""
        needed = {d for s in steps for d in s.get("depends_on") or []}
        finals = [s["id"] for s in steps if s["id"] not in needed]
        answers = [(n, ran[n][0]["answer"]) for n in finals
                   if n in ran and ran[n][0]["status"] == "done" and ran[n][0]["answer"]]
        if len(answers) == 1:
            return str(answers[0][1])
        return "\n\n".join(f"## {n}\n{a}" for n, a in answers) or None


def _tap(records: Iterable[dict[str, Any]], into: list[dict[str, Any]]
         ) -> Iterator[dict[str, Any]]:
    """Pass records on, keeping the plan records and plan deliveries aside."""
    for r in records:
        kind = r.get("kind")
        if kind == "plan" or (kind == "delivery" and isinstance(r.get("planId"), str)):
            into.append(r)
        yield r


def _scan(stream: AgentStream, plans: dict[str, _Plan], only: set[str] | None
          ) -> list[Turn]:
    """Add one agent's part of each plan to `plans` (only those in `only`, when given); return
    its other turns."""
    side: list[dict[str, Any]] = []
    turns = turns_of(_tap(stream.records, side), gone=stream.gone)
    for r in side:
        plan_id = r.get("planId")
        if not isinstance(plan_id, str) or (only is not None and plan_id not in only):
            continue
        if r["kind"] == "plan":
            plan = plans.setdefault(plan_id, _Plan(plan_id, r))
            if (epoch(r.get("ts")) or 0.0) < (epoch(plan.record.get("ts")) or 0.0):
                plan.record = r  # the plan started when its first record was written
            plan.member(stream)
        elif plan_id in plans:
            plans[plan_id].member(stream).delivery = r
    plain = []
    for t in turns.values():
        if t.plan is not None and t.plan in plans:
            plans[t.plan].member(stream).turn = t
        else:  # not a plan's, or its plan record was rotated away
            plain.append(t)
    return plain


def _single(t: Turn, name: str, provider: str) -> dict[str, Any]:
    """A turn of one agent, in parent mode: the runner's decision relays it to that agent."""
    turn = t.to_dict(name, provider)
    if t.woken:
        reason = "; ".join(f"watcher {w} matched {n} line{'s' if n != 1 else ''}"
                           for w, n in t.woken.items())
    else:
        reason = _REASONS.get(str(t.trigger), str(t.trigger or "a turn"))
    turn["parent"] = {"kind": "agents", "reason": reason, "reply": "",
                      "plan": [{"id": name, "role": "agent", "intent": None, "depends_on": []}]}
    return turn


def build_agent_transcript(own: AgentStream, others: Iterable[AgentStream]
                           ) -> dict[str, Any]:
    """`agent transcript NAME`: seed 004 in mode `agent`, or in mode `parent` when the agent
    took part in plans (their turns then show every agent of the plan, read from `others`)."""
    own_records = list(own.records)
    plan_ids = {r["planId"] for r in own_records
                if r.get("kind") == "plan" and isinstance(r.get("planId"), str)}
    if not plan_ids:
        return build_transcript(own_records, own.name, own.provider, workspace=own.workspace,
                                gone=own.gone)
    plans: dict[str, _Plan] = {}
    plain = _scan(AgentStream(own.name, own.provider, own_records, gone=own.gone), plans,
                  plan_ids)
    for other in others:
        if other.name != own.name:
            _scan(other, plans, plan_ids)
    turns = [_single(t, own.name, own.provider) for t in plain]
    turns += [p.to_dict() for p in plans.values()]
    return _document(own.name, own.name, own.provider, own.workspace, turns)


def build_run_transcript(streams: Iterable[AgentStream], workspace: str | None,
                         removed: Iterable[AgentStream] = ()) -> dict[str, Any]:
    """`watchrun transcript`: every agent's turns, each plan as one turn, oldest first.
    `removed`: streams of agents no longer configured, read for their steps of these plans
    only (a step dropped when a reload removed its agent)."""
    plans: dict[str, _Plan] = {}
    turns = []
    for stream in streams:
        turns += [_single(t, stream.name, stream.provider) for t in _scan(stream, plans, None)]
    for gone in removed:
        _scan(gone, plans, set(plans))
    turns += [p.to_dict() for p in plans.values()]
    return _document("run", None, None, workspace, turns)


def _document(session: str, bundle: str | None, provider: str | None, workspace: str | None,
              turns: list[dict[str, Any]]) -> dict[str, Any]:
    turns.sort(key=lambda t: (t["ts"] is None, t["ts"] or 0.0))
    return {"session_id": session, "mode": "parent", "bundle": bundle, "user_id": None,
            "title": title(turns[0]["user"]["text"]) if turns else None,
            "workspace": workspace, "provider": provider, "turns": turns}
