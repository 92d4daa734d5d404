"""Literals of a pattern: the required ones (every matching line contains one of them: the
stdlib prefilter engine finds them with `bytes.find` before any regex runs), and the exact
ones (a line matches exactly when it contains one of them: no regex is needed at all)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from watchrun.match.regex import REPEATS, ZERO_WIDTH, Analysis, C, scope_folds
from watchrun.match.simd import finder, lower_ascii
from watchrun.match.translate import byte_set

__all__ = ["LIMIT", "candidate_lines", "exact_literals", "required_literals"]

LIMIT = 16
"""Most strings in a required-literal set (each costs one `bytes.find` pass per chunk)."""

_NL = 10
Strings = frozenset[bytes]


def required_literals(analysis: Analysis) -> frozenset[bytes] | None:
    """Strings of which every line matching the pattern contains at least one (lower-cased when
    any part of the pattern folds case: search them in `data.lower()`); an empty set means no
    line can match; None when no useful set (every string >= 2 bytes, at most LIMIT) exists."""
    lower = analysis.folds_somewhere
    best = _required(analysis.tree, analysis.caseless, lower)
    if best is None or (best and min(map(len, best)) < 2):
        return None
    return best


def exact_literals(analysis: Analysis) -> frozenset[bytes] | None:
    """Strings such that a line matches the pattern exactly when it contains one of them
    (lower-cased when the pattern ignores case: search them in `line.lower()`), or None when the
    pattern is not such a set: it has an anchor or a boundary, an unbounded or large repeat, a
    class of more than 4 bytes, case folding in part of it only, or can match the empty line.
    `ERROR|FATAL` is {b"error", b"fatal"} ignoring case; `^ERROR` is None."""
    if any(op in ZERO_WIDTH or (op is C.SUBPATTERN and (av[1] | av[2]) & re.IGNORECASE)
           for op, av in _nodes(analysis.tree)):
        return None
    strings = _exact_seq(analysis.tree, analysis.caseless, analysis.caseless)
    if strings is None or b"" in strings:
        return None
    return strings


def candidate_lines(analyses: Sequence[Analysis]
                    ) -> Callable[[bytes], list[tuple[int, int]]] | None:
    """A finder of the lines of a chunk that may match one of `analyses`: those that contain one
    of its required literals, as (start, end) with `end` at the line's b"\\n", in order. Linear
    in the chunk, no regex of the pattern: `simd.finder` (in `simd.lower_ascii(data)` where a
    pattern folds case): StringZilla's SIMD search and table lowering on a big chunk, ~8x and
    ~1.5x `bytes.find` and `bytes.lower`, and 2x faster end to end than RE2's own literal search
    (docs/decisions.md). None when one of them has no useful literal set (or can match an empty
    line): then any line may match."""
    needles: list[tuple[bytes, bool]] = []
    for analysis in analyses:
        literals = required_literals(analysis)
        if literals is None or analysis.empty_line:
            return None
        needles += [(x, analysis.folds_somewhere) for x in sorted(literals)]
    several = len(needles) > 1

    def lines(data: bytes) -> list[tuple[int, int]]:
        found: dict[int, int] = {}
        low = None
        find, rfind, n = data.find, data.rfind, len(data)
        for needle, fold in needles:
            if fold:
                low = low if low is not None else lower_ascii(data)
            search = finder(low if fold and low is not None else data)
            i = search(needle, 0)
            while i >= 0:
                end = find(b"\n", i)
                end = n if end < 0 else end
                found[rfind(b"\n", 0, i) + 1] = end
                i = search(needle, end + 1)
        starts = sorted(found) if several else found
        return [(s, found[s]) for s in starts]

    return lines


def _nodes(tree: Any) -> Any:
    for op, av in tree.data:
        yield op, av
        if op is C.SUBPATTERN:
            yield from _nodes(av[3])
        elif op is C.BRANCH:
            for alt in av[1]:
                yield from _nodes(alt)
        elif op in REPEATS:
            yield from _nodes(av[2])


def _product(left: Strings, right: Strings) -> Strings | None:
    if len(left) * len(right) > LIMIT:
        return None
    return frozenset(a + b for a in left for b in right)


def _exact(op: Any, av: Any, fold: bool, lower: bool) -> Strings | None:
    """The finite set of strings this node matches, if small."""
    if op is C.LITERAL:
        if av == _NL:
            return frozenset()
        return frozenset({bytes((av,)).lower() if lower else bytes((av,))})
    if op is C.IN:
        members = byte_set(tuple(av), fold)
        strings = frozenset(bytes((b,)).lower() if lower else bytes((b,)) for b in members)
        return strings if len(strings) <= 4 else None
    if op in ZERO_WIDTH:
        return frozenset({b""})
    if op is C.SUBPATTERN:
        return _exact_seq(av[3], scope_folds(fold, av), lower)
    if op is C.BRANCH:
        alts = [_exact_seq(alt, fold, lower) for alt in av[1]]
        if any(a is None for a in alts):
            return None
        union = frozenset().union(*[a for a in alts if a is not None])
        return union if len(union) <= LIMIT else None
    if op in REPEATS and av[1] <= 3 and av[1] != C.MAXREPEAT:
        sub = _exact_seq(av[2], fold, lower)
        if sub is None:
            return None
        total: Strings = frozenset({b""}) if av[0] == 0 else frozenset()
        power: Strings | None = frozenset({b""})
        for count in range(1, av[1] + 1):
            power = _product(power, sub) if power is not None else None
            if power is None:
                return None
            if count >= av[0]:
                total = total | power
        return total if len(total) <= LIMIT else None
    return None


def _exact_seq(tree: Any, fold: bool, lower: bool) -> Strings | None:
    run = _Concat()
    for op, av in tree.data:
        sub = _exact(op, av, fold, lower)
        if sub is None or not run.add(sub):
            return None
    return run.strings()


class _Concat:
    """The strings a run of exact parts matches, in order. A part of one string is kept aside
    and joined once: a long literal was joined byte by byte, in time quadratic in its length
    (a 300 KB pattern took 45 s of `validate`)."""

    def __init__(self) -> None:
        self._out: Strings = frozenset({b""})
        self._single: list[bytes] = []

    def add(self, part: Strings) -> bool:
        """Append `part`; False (nothing appended) when there would be over LIMIT strings."""
        if len(part) == 1:
            self._single.extend(part)
            return True
        joined = _product(self.strings(), part)
        if joined is None:
            return False
        self._out = joined
        return True

    def strings(self) -> Strings:
        if self._single:
            tail = b"".join(self._single)
            self._out, self._single = frozenset(a + tail for a in self._out), []
        return self._out


def _required(tree: Any, fold: bool, lower: bool) -> Strings | None:
    candidates: list[Strings] = []
    run = _Concat()
    for op, av in tree.data:
        exact = _exact(op, av, fold, lower)
        if exact is not None:
            if not run.add(exact):
                candidates.append(run.strings())
                run = _Concat()
                run.add(exact)
            continue
        candidates.append(run.strings())
        run = _Concat()
        inner = _required_node(op, av, fold, lower)
        if inner is not None:
            candidates.append(inner)
    candidates.append(run.strings())
    return _best(candidates)


def _required_node(op: Any, av: Any, fold: bool, lower: bool) -> Strings | None:
    if op is C.SUBPATTERN:
        return _required(av[3], scope_folds(fold, av), lower)
    if op is C.ATOMIC_GROUP:
        return _required(av, fold, lower)
    if op in REPEATS and av[0] >= 1:
        return _required(av[2], fold, lower)
    if op is C.BRANCH:
        union: set[bytes] = set()
        for alt in av[1]:
            sub = _required(alt, fold, lower)
            if sub is None:
                return None
            union |= sub
        return frozenset(union) if len(union) <= LIMIT else None
    return None


def _best(candidates: list[Strings]) -> Strings | None:
    if any(not c for c in candidates):
        return frozenset()  # a required part can never match
    useful = [c for c in candidates if b"" not in c]
    if not useful:
        return None
    return max(useful, key=lambda c: (min(map(len, c)), -len(c)))
