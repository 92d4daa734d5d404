"""What every matching engine is built from: the scan types, the shared compiled form, the
per-line exclude test, the search loop over a chunk, the lines of hit positions, RE2's
compilation and the per-line path for a set of literals (engines.py and hs_engine.py)."""

from __future__ import annotations

import contextlib
import functools
import itertools
import operator
import re
from collections.abc import Callable, Hashable
from typing import Any, Protocol

from msgspec import Struct

from watchrun.match.literals import exact_literals, required_literals
from watchrun.match.optional import re2, re2_installed
from watchrun.match.regex import Analysis, Unsupported
from watchrun.match.simd import count_of, lower_ascii
from watchrun.match.translate import translate

Lines = list[tuple[int, int]]
Scan = Callable[[bytes], Lines]
Reject = Callable[[bytes], bool]


class Store(Hashable, Protocol):
    """Compiled hyperscan databases kept between runs (the runner's is on disk): loading one
    is ~0.1 ms and touches none of the compiler, whose pages cost ~3.5 MiB of resident memory
    and 1-5 ms per pattern. A database that does not load (another hyperscan, another CPU, a
    damaged file) is compiled again."""

    def load(self, key: str) -> bytes | None: ...
    def save(self, key: str, data: bytes) -> None: ...


class Compiled(Struct, frozen=True):
    """One compiled pattern with its excludes, shared by every watcher that has them."""

    engine: str
    scan: Scan
    """The matching lines of a chunk (excludes applied)."""
    dense: Scan | None
    """The same for a chunk where most lines match, when a per-line path is cheaper: the
    pattern is a set of literals, found with `in` on each line."""
    every: Callable[[bytes], bool] | None = None
    """Whether every line of a chunk matches, answered without a loop per line in Python (the
    pattern being a set of literals): a flood of matches needs no spans."""


def all_lines(data: bytes) -> Lines:
    out, pos, n = [], 0, len(data)
    while pos < n:
        end = data.find(b"\n", pos)
        end = n if end < 0 else end
        out.append((pos, end))
        pos = end + 1
    return out


def rejecter(excludes: list[Analysis]) -> tuple[Reject | None, bool]:
    """A per-line exclude test and whether it runs in linear time. Each exclude is tried on a
    line only when one of its required literals is in it; a set of literals needs no regex."""
    tests: list[tuple[tuple[bytes, ...] | None, bool, Any, bool]] = []
    linear = True
    for x in excludes:
        exact = exact_literals(x)
        if exact is not None:
            if exact:  # (an empty set never matches)
                tests.append((tuple(sorted(exact)), x.caseless, None, False))
            continue
        search: Any = None
        if re2_installed() and not x.python_only:
            with contextlib.suppress(Unsupported):
                search = re2_regex(x).search
        if search is None:  # only Python re runs it: a backtracking search, never on the loop
            linear, search = False, x.reference.search
        needles = required_literals(x)
        if needles is not None and not needles:
            continue
        tests.append((tuple(sorted(needles)) if needles else None, x.folds_somewhere, search,
                      x.empty_line))
    if not tests:
        return None, True

    def reject(line: bytes) -> bool:
        low = None
        for needles, fold, search, empty in tests:
            if not line:
                if empty:
                    return True
                continue
            if needles is not None:
                if fold:
                    low = low if low is not None else line.lower()
                    hay = low
                else:
                    hay = line
                if not any(n in hay for n in needles):
                    continue
                if search is None:
                    return True
            if search(line) is not None:
                return True
        return False

    return reject, linear


def filtered(scan: Scan, reject: Reject | None) -> Scan:
    if reject is None:
        return scan
    return lambda data: [(s, e) for s, e in scan(data) if not reject(data[s:e])]


def search_loop(search: Callable[[bytes, int], Any], empty_ok: bool) -> Scan:
    """Lines hit by a translated regex: one search per matching line, from the next line."""

    def scan(data: bytes) -> Lines:
        out: Lines = []
        n = len(data)
        last = n - 1 if data.endswith(b"\n") else n  # the last position inside a line
        pos = 0
        while pos <= last:
            match = search(data, pos)
            if match is None:
                break
            start = match.start()
            if start > last:
                break
            line_start = data.rfind(b"\n", pos, start) + 1 or pos
            end = data.find(b"\n", start)
            end = n if end < 0 else end
            if line_start < end or empty_ok:
                out.append((line_start, end))
            pos = end + 1
        return out

    return scan


def re_scan(analysis: Analysis) -> Scan:
    try:
        flags = re.MULTILINE | (re.IGNORECASE if analysis.caseless else 0)
        regex = re.compile(translate(analysis, "py"), flags)
    except (Unsupported, re.error):  # not expected: fall back to the reference, line by line
        ref = analysis.reference.search
        return lambda data: [(s, e) for s, e in all_lines(data) if ref(data[s:e]) is not None]
    return search_loop(regex.search, analysis.empty_line)


def re2_options() -> Any:
    options = re2().Options()
    options.encoding = options.Encoding.LATIN1  # one character per byte, like re on bytes
    options.case_sensitive = True  # folding is spelled out by the translation
    options.never_capture = True
    options.log_errors = False
    options.max_mem = 64 << 20
    return options


def re2_regex(analysis: Analysis) -> Any:
    module = re2()
    if module is None:
        raise Unsupported("google-re2 is not installed")
    try:
        return module.compile(b"(?m)" + translate(analysis, "re2"), re2_options())
    except module.error as exc:
        why = exc.args[0] if exc.args else exc
        why = why.decode(errors="replace") if isinstance(why, bytes) else str(why)
        raise Unsupported(f"re2: {why}") from None


def lines_at(data: bytes, ends: list[int], empty_ok: bool) -> Lines:
    """The lines holding the match ends `ends` (sorted), each once."""
    out: Lines = []
    n = len(data)
    last = n - 1 if data.endswith(b"\n") else n  # past it: the empty piece after the last line
    rfind, find = data.rfind, data.find
    line_end = -1
    for to in ends:
        if to <= line_end:
            continue  # the line of the previous hit
        if to > last:
            break
        line_start = rfind(b"\n", 0, to) + 1
        line_end = find(b"\n", to)
        if line_end < 0:
            line_end = n
        if line_start < line_end or empty_ok:
            out.append((line_start, line_end))
    return out


def _counted(needles: tuple[bytes, ...], fold: bool) -> Callable[[bytes], bool | None] | None:
    """Whether every line holds one of `needles`, told by counting in C with no object per
    line (~13x faster than an `in` per line on a flood): it does when the needles occur as
    many times as there are lines and no line holds two of them; None when a line holds two
    (then it cannot tell). Only for needles that cannot overlap, so that each occurrence is
    counted once: None when they can."""
    if not re2_installed() or _can_overlap(needles):
        return None
    alt = b"|".join(b"".join(b"\\x%02x" % c for c in x) for x in needles)
    two_source = b"(?:%b)[^\\n]*(?:%b)" % (alt, alt)

    @functools.cache
    def two_search() -> Callable[[bytes], Any] | None:  # compiled at the first flood
        module = re2()  # (None: installed but not importable; then it cannot tell)
        return None if module is None else module.compile(two_source, re2_options()).search

    def counted(data: bytes) -> bool | None:
        two = two_search()
        if two is None or not data.endswith(b"\n"):
            return None
        hay = lower_ascii(data) if fold else data
        if sum(count_of(hay, x) for x in needles) != count_of(hay, b"\n"):
            return None if two(hay) is not None else False
        return True if two(hay) is None else None

    return counted


def _can_overlap(needles: tuple[bytes, ...]) -> bool:
    """Whether two occurrences of `needles` can share bytes (one inside another, or the end of
    one the start of another, itself included)."""
    return any(a != b and a in b for a in needles for b in needles) or any(
        a[-k:] == b[:k] for a in needles for b in needles for k in range(1, min(len(a), len(b))))


def dense(analysis: Analysis, reject: Reject | None
           ) -> tuple[Scan | None, Callable[[bytes], bool] | None]:
    """For a pattern that is a set of literals: the scan of a chunk where most lines match
    (each line tested with `in`, in C), and the test that every line matches."""
    exact = exact_literals(analysis)
    if not exact:
        return None, None
    needles, fold = tuple(sorted(exact)), analysis.caseless

    def has(data: bytes) -> tuple[list[bytes], Any]:
        lines = (data.lower() if fold else data).split(b"\n")
        if data.endswith(b"\n"):
            lines.pop()
        found = map(bytes.__contains__, lines, itertools.repeat(needles[0]))
        for needle in needles[1:]:
            found = map(operator.or_, found, map(bytes.__contains__, lines,
                                                 itertools.repeat(needle)))
        return lines, found

    def scan(data: bytes) -> Lines:
        lines, found = has(data)
        hits = list(itertools.compress(range(len(lines)), found))
        sizes = list(map(len, lines))
        starts = list(map(operator.add, itertools.accumulate(sizes, initial=0), range(len(lines))))
        if len(hits) == len(lines):  # all of them: the spans without a loop per line
            out = list(zip(starts, map(operator.add, starts, sizes), strict=True))
        else:
            out = [(starts[i], starts[i] + sizes[i]) for i in hits]
        if reject is not None:
            out = [(s, e) for s, e in out if not reject(data[s:e])]
        return out

    counted = _counted(needles, fold) if reject is None else None

    def every(data: bytes) -> bool:
        told = counted(data) if counted is not None else None
        if told is not None:
            return told
        lines, found = has(data)
        if not all(found):
            return False
        return reject is None or not any(map(reject, data.split(b"\n")[: len(lines)]))

    return scan, every


