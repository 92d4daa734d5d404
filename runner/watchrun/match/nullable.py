"""Whether a parsed regex matches the empty line, told from its parse tree in time linear in its
size, where Python's own `search(b"")` backtracks: `(?:|)` forty times before `\\b` tried 2^40
ways and `watchrun validate` never ended (found by a fixer, 2026-12-06).

The walk follows Python's semantics on an empty subject: a character never matches; `^`, `$`,
`\\A`, `\\Z` do; `\\b` and `\\B` do not (Python's `\\B` needs a character beside it). Groups
matter only through backreferences and `(?(1)…)`, so what the walk carries is the set of
groups that took part (each matched the empty string): a state. The states after each node
are a set, so forty empty alternatives make one state, not 2^40 paths.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["matches_empty"]

C: Any = importlib.import_module("re._constants")
_REPEATS = {C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT}

State = frozenset[int]
"""The groups that took part so far (all of them matched the empty string)."""

_NEVER_EMPTY = {C.LITERAL, C.NOT_LITERAL, C.IN, C.ANY, C.RANGE, C.CATEGORY}
_NO_BOUNDARY = {C.AT_BOUNDARY, C.AT_NON_BOUNDARY, C.AT_LOC_BOUNDARY, C.AT_LOC_NON_BOUNDARY,
                C.AT_UNI_BOUNDARY, C.AT_UNI_NON_BOUNDARY}


def matches_empty(tree: Any) -> bool:
    """True when the pattern parsed into `tree` finds a match in b"" (as `search` would)."""
    return bool(_seq(tree, {frozenset()}))


def _seq(items: Any, states: set[State]) -> set[State]:
    for op, av in items:
        if not states:
            break
        states = _node(op, av, states)
    return states


def _node(op: Any, av: Any, states: set[State]) -> set[State]:
    if op in _NEVER_EMPTY or op is C.FAILURE:
        return set()
    if op is C.AT:
        return set() if av in _NO_BOUNDARY else states
    if op is C.SUBPATTERN:
        group, _, _, body = av
        after = _seq(body, states)
        return after if group is None else {s | {group} for s in after}
    if op is C.BRANCH:
        return set().union(*(_seq(b, states) for b in av[1]))
    if op in _REPEATS:
        return _repeat(av[0], av[2], states)
    if op is C.ATOMIC_GROUP:
        return _seq(av, states)
    if op is C.ASSERT:  # (a lookahead or lookbehind: at the empty line's one place alike)
        return _seq(av[1], states)
    if op is C.ASSERT_NOT:
        return {s for s in states if not _seq(av[1], {s})}
    if op is C.GROUPREF:  # a group that took part matched b"": so does its reference
        return {s for s in states if av in s}
    if op is C.GROUPREF_EXISTS:
        group, yes, no = av
        return set().union(*(_seq(yes, {s}) if group in s else
                             ({s} if no is None else _seq(no, {s})) for s in states))
    raise ValueError(f"unknown regex node {op}")


def _repeat(least: int, body: Any, states: set[State]) -> set[State]:
    """`body` at least `least` times. Rounds only add groups, so the states settle within a
    few rounds; once settled, every later round, the `least`-th too, ends in the same ones."""
    out = set(states) if least == 0 else set()
    current = states
    for rounds in range(1, _ROUNDS + 1):
        after = _seq(body, current)
        if rounds >= least or after == current or rounds == _ROUNDS:
            out |= after
        if not after or after == current:
            break
        current = after
    return out


_ROUNDS = 64
"""Rounds of a repeat walked at most (a pattern holds fewer groups than this in practice);
past them the states reached last are taken as settled."""
