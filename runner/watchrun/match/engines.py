"""The matching engines: each finds, in one call per chunk, exactly the lines that match a
pattern and none of its excludes (the semantics are in `watchrun.match.matcher`).

Excludes are checked in the same scan where the engine can (hyperscan: extra pattern ids in one
database); otherwise per found line, behind a literal prefilter (`bytes in` on the line before
any regex; no regex at all when the exclude is a set of literals, like `healthcheck`).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import itertools
import operator
import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Protocol

from watchrun.match.literals import candidate_lines, exact_literals, required_literals
from watchrun.match.regex import Analysis, Unsupported
from watchrun.match.translate import translate

__all__ = ["BUILDERS", "LINEAR", "Compiled", "Lines", "Reject", "Store", "all_lines", "hs",
           "re2", "re2_regex", "rejecter"]

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
LINEAR = ("hyperscan", "re2")
"""Engines whose time is linear in the input: a hostile line cannot stall them."""


def _optional(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


hs: Any = _optional("hyperscan")
re2: Any = _optional("re2")


@dataclass(frozen=True, slots=True)
class Compiled:
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
        search: Any = x.reference.search
        if re2 is not None and not x.python_only:
            with contextlib.suppress(Unsupported):
                search = re2_regex(x).search
        linear = linear and search is not x.reference.search
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


def _filtered(scan: Scan, reject: Reject | None) -> Scan:
    if reject is None:
        return scan
    return lambda data: [(s, e) for s, e in scan(data) if not reject(data[s:e])]


def _search_loop(search: Callable[[bytes, int], Any], empty_ok: bool) -> Scan:
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


def _re_scan(analysis: Analysis) -> Scan:
    try:
        flags = re.MULTILINE | (re.IGNORECASE if analysis.caseless else 0)
        regex = re.compile(translate(analysis, "py"), flags)
    except (Unsupported, re.error):  # not expected: fall back to the reference, line by line
        ref = analysis.reference.search
        return lambda data: [(s, e) for s, e in all_lines(data) if ref(data[s:e]) is not None]
    return _search_loop(regex.search, analysis.empty_line)


def _build_re(analysis: Analysis, excludes: list[Analysis], reject: Reject | None,
              store: Store | None) -> Compiled:
    return Compiled("re", _filtered(_re_scan(analysis), reject), *_dense(analysis, reject))


def _re2_options() -> Any:
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1  # one character per byte, like re on bytes
    options.case_sensitive = True  # folding is spelled out by the translation
    options.never_capture = True
    options.log_errors = False
    options.max_mem = 64 << 20
    return options


def re2_regex(analysis: Analysis) -> Any:
    if re2 is None:
        raise Unsupported("google-re2 is not installed")
    try:
        return re2.compile(b"(?m)" + translate(analysis, "re2"), _re2_options())
    except re2.error as exc:
        why = exc.args[0] if exc.args else exc
        why = why.decode(errors="replace") if isinstance(why, bytes) else str(why)
        raise Unsupported(f"re2: {why}") from None


def _re2_literal(literal: bytes, fold: bool) -> Any:
    """RE2's search for one literal (`[eE]` for an ASCII letter when folding: `bytes.lower`)."""
    spelled = b"".join(b"[%c%c]" % (c, c - 32) if fold and 97 <= c <= 122 else b"\\x%02x" % c
                       for c in literal)
    return re2.compile(spelled, _re2_options()).search


RE2_LITERALS = 3
"""At most this many required literals are searched one by one before RE2's regex confirms a
line (each is a pass at ~3.5 GB/s; the regex of an alternation runs at ~0.75 GB/s)."""


def _build_re2(analysis: Analysis, excludes: list[Analysis], reject: Reject | None,
               store: Store | None) -> Compiled:
    regex = re2_regex(analysis)
    scan = _search_loop(regex.search, analysis.empty_line)
    literals = required_literals(analysis)
    if literals and len(literals) <= RE2_LITERALS:
        candidates = candidate_lines([analysis], _re2_literal)
        if candidates is not None:
            scan = _accelerated(candidates, _confirm(analysis, regex.search), scan)
    return Compiled("re2", _filtered(scan, reject), *_dense(analysis, reject))


def _confirm(analysis: Analysis, search: Callable[[bytes], Any]) -> Callable[[bytes], Any] | None:
    """How a candidate line is confirmed: not at all when the literals are the pattern."""
    return None if exact_literals(analysis) is not None else search


def _accelerated(candidates: Callable[[bytes], Lines], confirm: Callable[[bytes], Any] | None,
                 plain: Scan) -> Scan:
    """The lines `candidates` finds (the lines holding a required literal), each confirmed by
    `confirm`; after a chunk where they held over a quarter of its bytes, `plain` (one regex
    scan) for the next _COMMON_LITERAL_CHUNKS chunks."""
    rest = 0  # chunks left to scan with `plain` after the literals proved too common

    def scan(data: bytes) -> Lines:
        nonlocal rest
        if rest:
            rest -= 1
            return plain(data)
        found = candidates(data)
        if confirm is None:
            return found
        if len(found) > 64 and sum(e - s + 1 for s, e in found) * 4 > len(data):
            rest = _COMMON_LITERAL_CHUNKS  # a literal in most lines: one regex scan is cheaper
            return plain(data)
        return [(s, e) for s, e in found if confirm(data[s:e]) is not None]

    return scan


def _build_prefilter(analysis: Analysis, excludes: list[Analysis], reject: Reject | None,
                     store: Store | None) -> Compiled:
    candidates = candidate_lines([analysis])
    if candidates is None:
        raise Unsupported("no required literal of 2+ bytes")
    scan = _accelerated(candidates, _confirm(analysis, analysis.reference.search),
                        _re_scan(analysis))
    return Compiled("re+prefilter", _filtered(scan, reject), *_dense(analysis, reject))


_COMMON_LITERAL_CHUNKS = 16
"""Chunks scanned by the plain regex after the lines holding a required literal were over 1/4
of a chunk's bytes (then the literals are tried again)."""

def _build_hyperscan(analysis: Analysis, excludes: list[Analysis], reject: Reject | None,
                     store: Store | None) -> Compiled:
    if hs is None:
        raise Unsupported("hyperscan is not installed")
    exprs, flags, empty, rest = [], [], [], []
    for a in (analysis, *excludes):
        try:
            exprs.append(translate(a, "hs"))
        except Unsupported:
            if a is analysis:
                raise
            rest.append(a)  # a Python-only exclude: tested per line
            continue
        flags.append(hs.HS_FLAG_MULTILINE | (hs.HS_FLAG_ALLOWEMPTY if a.tree.getwidth()[0] == 0
                                             else 0))  # fmt: skip
        empty.append(a.empty_line)
    database = _database(exprs, flags, store)
    leftover = rejecter(rest)[0] if rest else None
    try:
        fallback = _search_loop(re2_regex(analysis).search, analysis.empty_line)
    except Unsupported:
        fallback = _re_scan(analysis)
    pad = any(b"$" in e for e in exprs)  # a literal "$" is translated as \x24: this is `$`
    scan = _hs_scan(database, _filtered(fallback, reject), tuple(empty), pad)
    return Compiled("hyperscan", _filtered(scan, leftover), *_dense(analysis, reject))


def _database(exprs: list[bytes], flags: list[int], store: Store | None) -> Any:
    """The compiled database of `exprs` (ids 0..), loaded from `store` when it has it."""
    key = hashlib.sha256(repr((hs.__version__, exprs, flags)).encode()).hexdigest()
    data = store.load(key) if store is not None else None
    if data is not None:
        try:
            database = hs.loadb(data, mode=hs.HS_MODE_BLOCK)
            database.scratch = hs.Scratch(database)
            return database
        except (hs.error, TypeError, ValueError):
            pass  # compiled below, and stored again
    database = hs.Database(mode=hs.HS_MODE_BLOCK)
    try:
        database.compile(expressions=exprs, ids=list(range(len(exprs))), flags=flags)
    except hs.error as exc:
        raise Unsupported(f"hyperscan: {exc}") from None
    if store is not None:
        store.save(key, hs.dumpb(database))
    return database


def _hs_scan(database: Any, fallback: Scan, empty_ok: tuple[bool, ...], pad: bool) -> Scan:
    """Lines with a hit of id 0 (the pattern) and none of ids 1.. (the excludes). The call
    back only notes where hits end; lines are found afterwards, once per matching line.

    `pad` (an expression has `$`): the buffer is scanned ending in an empty line, and hits past
    the data are dropped. Hyperscan 5.4 (python-hyperscan 0.9) misses `$` after some classes
    (`[0-9]$`) right before the newline that ends a buffer of more than 16 bytes; a line after
    it hides the bug (tests/test_matcher.py pins both)."""
    terminated = hs.ScanTerminated

    def scan(data: bytes) -> Lines:
        hits: list[int] = []
        excl: list[tuple[int, int]] = []
        cap = _HITS + len(data) // 16
        buf, limit = data, len(data)
        if pad and data:  # the buffer ends in an empty line; its match ends past `limit`
            ended = data[-1] == 10
            buf, limit = data + (b"\n" if ended else b"\n\n"), limit - ended

        def on_match(id_: int, _from: int, to: int, _flags: int, _ctx: object) -> bool:
            if to > limit:
                return False
            if id_:
                excl.append((to, id_))
                return False
            hits.append(to)
            return len(hits) > cap

        try:
            database.scan(buf, match_event_handler=on_match)
        except terminated:  # a hit every few bytes: a search per line is cheaper
            return fallback(data)
        if not hits:
            return []
        if any(a > b for a, b in itertools.pairwise(hits)):
            hits.sort()  # hyperscan does not promise ordered matches
        found = _lines_at(data, hits, empty_ok[0])
        if excl and found:
            gone = {start for to, i in excl for start, _ in _lines_at(data, [to], empty_ok[i])}
            found = [(s, e) for s, e in found if s not in gone]
        return found

    return scan


_HITS = 4096
"""Hits per chunk (plus one per 16 bytes) after which a hyperscan scan stops and the chunk goes
to the fallback engine: a pattern that matches all over every line."""


def _lines_at(data: bytes, ends: list[int], empty_ok: bool) -> Lines:
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


def _dense(analysis: Analysis, reject: Reject | None
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

    def every(data: bytes) -> bool:
        lines, found = has(data)
        if not all(found):
            return False
        return reject is None or not any(map(reject, data.split(b"\n")[: len(lines)]))

    return scan, every


BUILDERS: dict[str, Callable[[Analysis, list[Analysis], Reject | None, Store | None],
                              Compiled]] = {
    "hyperscan": _build_hyperscan,
    "re2": _build_re2,
    "re+prefilter": _build_prefilter,
    "re": _build_re,
}
