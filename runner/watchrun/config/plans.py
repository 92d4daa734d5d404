"""Plans of agents (SPEC §3.3): `dependsOn` checks (unknown names, cycles, `{deps.X.answer}`)
and the plan a watcher's `wake` list makes: its agents, their dependencies, in order."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from watchrun.config.checks import Ctx, did_you_mean_agents
from watchrun.config.tree import CMap, KeyPath

__all__ = ["DEPS_PLACEHOLDER", "check_dependencies", "plan_order"]

DEPS_PLACEHOLDER = re.compile(r"\{deps\.([A-Za-z0-9][A-Za-z0-9_.-]{0,63})\.answer\}")
"""`{deps.NAME.answer}` in a prompt: NAME's answer in a plan."""
_DEPS_ANY = re.compile(r"\{deps\.[^{}]*\}")


def check_dependencies(ctx: Ctx, raw_agents: Sequence[Any]) -> dict[str, tuple[str, ...]]:
    """Report unknown names, cycles and `{deps.X.answer}` for an X not depended on; return
    each agent's known dependencies (the graph a plan is made from)."""
    report = ctx.report
    names = [a["name"] for a in raw_agents if isinstance(a, CMap) and isinstance(a.get("name"),
                                                                                  str)]
    graph: dict[str, tuple[str, ...]] = {}
    where: dict[tuple[str, str], KeyPath] = {}
    for i, a in enumerate(raw_agents):
        if not isinstance(a, CMap) or not isinstance(a.get("name"), str):
            continue
        raw = a.get("dependsOn")
        deps: list[Any] = raw if isinstance(raw, list) else []
        known: list[str] = []
        for j, dep in enumerate(deps):
            if not isinstance(dep, str):
                continue
            if dep not in names:
                report.error(("agents", i, "dependsOn", j),
                             f"no agent named `{dep}`{did_you_mean_agents(dep, names)}")
                continue
            known.append(dep)
            where[(a["name"], dep)] = ("agents", i, "dependsOn", j)
        graph[a["name"]] = tuple(known)
        _check_placeholders(ctx, ("agents", i, "prompt"), a.get("prompt"), a["name"], deps)
    for cycle in _cycles(graph):
        edge = (cycle[-2], cycle[-1])
        report.error(where[edge], "dependency cycle: " + " → ".join(cycle) + "; a plan runs "
                     "each agent after the agents it depends on, so a cycle can never start")
    return graph


def _check_placeholders(ctx: Ctx, p: KeyPath, prompt: Any, name: str, deps: list[Any]) -> None:
    if not isinstance(prompt, str):
        return
    for m in _DEPS_ANY.finditer(prompt):
        known = DEPS_PLACEHOLDER.fullmatch(m[0])
        if known is None:
            ctx.report.warning(p, f"{m[0]} is left as written: the placeholder of a dependency's "
                               "answer is {deps.NAME.answer}")
        elif known[1] not in deps:
            ctx.report.error(p, f"{m[0]} names `{known[1]}`, which `{name}` does not depend on; "
                             f"add it: dependsOn: [{known[1]}]")


def _cycles(graph: Mapping[str, tuple[str, ...]]) -> list[list[str]]:
    """Each cycle once, as a path that starts and ends at the same agent (`a → b → a`)."""
    found: list[list[str]] = []
    seen_sets: set[frozenset[str]] = set()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for dep in graph.get(node, ()):
            if state.get(dep) == 1:
                cycle = [*path[path.index(dep):], dep]
                key = frozenset(cycle)
                if key not in seen_sets:
                    seen_sets.add(key)
                    found.append(cycle)
            elif dep not in state:
                visit(dep)
        path.pop()
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node)
    return found


def plan_order(wake: Sequence[str], graph: Mapping[str, tuple[str, ...]]
               ) -> tuple[str, ...] | None:
    """The agents a wake of `wake` runs as a plan — the woken agents and, transitively, what
    they depend on — each after its dependencies (ties in config order); None when none of
    them depends on another (then each agent is woken on its own, as without plans)."""
    members: list[str] = []
    pending = list(wake)
    while pending:
        name = pending.pop(0)
        if name in members or name not in graph:
            continue
        members.append(name)
        pending.extend(graph[name])
    if not any(graph[m] for m in members):
        return None
    order: list[str] = []
    rank = {name: i for i, name in enumerate(graph)}
    while len(order) < len(members):
        ready = [m for m in members if m not in order and all(d in order for d in graph[m])]
        if not ready:
            return None  # a cycle: the config check reported it, no plan is built
        order.append(min(ready, key=rank.__getitem__))
    return tuple(order)
