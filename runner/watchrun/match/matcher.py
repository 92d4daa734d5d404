"""The chunk matcher: which lines of a chunk of complete lines match a watcher's pattern.

Semantics (the reference, which every engine reproduces exactly): a line matches when
`re.search(pattern.encode("utf-8"), line, flags)` finds a match, where `line` is the line's
bytes without its b"\\n" and `flags` is re.IGNORECASE unless the watcher is case-sensitive, and
no `exclude` pattern (same rules) matches it. So matching is on UTF-8 bytes:

- case folding is ASCII only, like `grep -i` in the C locale (`error` matches `ERROR`, but
  `é` does not match `É`);
- `.`, `\\w`, `\\d`, `\\s`, `\\b` work on bytes and ASCII classes: `.` matches one byte of a
  multi-byte character, `\\w` never matches `é`;
- a non-ASCII character in a class (`[éè]`) or a quantifier on a lone non-ASCII character
  (`é+`) would act on bytes, so they are rejected with a ValueError suggesting `(?:é|è)` or
  `(?:é)+`; `\\u00e9`, `\\xe9` and `\\N{...}` mean the character (its UTF-8 bytes);
- invalid UTF-8 and NUL bytes in a line are ordinary bytes.

Engines, fastest first: "hyperscan" (all match ends of one scan per chunk), "re2" (linear
time), "re+prefilter" (stdlib: `bytes.find` of the pattern's required literals, then the
reference regex on candidate lines only) and "re" (stdlib, one search per matching line).
Hyperscan, re2 and re run a translation of the pattern that cannot match a newline and means
exactly the reference per line (see `watchrun.match.regex`), so their hits are the matching lines;
"re+prefilter" confirms each candidate with the reference. A Matcher is not thread-safe
(hyperscan's scratch space is per database): use one per thread.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import re
from collections.abc import Callable, Sequence
from typing import Any

from watchrun.match.literals import required_literals
from watchrun.match.regex import Analysis, Unsupported, analyse, backtracking_constructs, translate

__all__ = ["BACKTRACKING_BUDGET_S", "ENGINES", "LINEAR", "Matcher", "best_engine",
           "engines_available", "needs_backtracking"]

ENGINES = ("hyperscan", "re2", "re+prefilter", "re")
LINEAR = ("hyperscan", "re2")
"""Engines whose time is linear in the input: a hostile line cannot stall them."""
BACKTRACKING_BUDGET_S = 0.25
"""Per-line time budget of a pattern run by Python `re` (`backtracking: true`), in a worker."""

Lines = list[tuple[int, int]]
Scan = Callable[[bytes], Lines]


def _optional(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


_hs: Any = _optional("hyperscan")
_re2: Any = _optional("re2")


def engines_available() -> list[str]:
    """The engines this interpreter can run, fastest first."""
    names = [name for name, mod in (("hyperscan", _hs), ("re2", _re2)) if mod is not None]
    return [*names, "re+prefilter", "re"]


def best_engine(pattern: str, case_sensitive: bool = False) -> str:
    """The engine a Matcher would use for `pattern` (ValueError if the pattern is invalid)."""
    return Matcher(pattern, case_sensitive=case_sensitive).engine


def needs_backtracking(pattern: str, case_sensitive: bool = False) -> str | None:
    """What in `pattern` only Python `re` (a backtracking engine) can run, or None when a
    linear-time engine runs it. A property of the pattern, the same on every machine (without
    google-re2 installed, only the constructs are judged). ValueError if it is invalid."""
    analysis = analyse(pattern, case_sensitive)
    constructs = backtracking_constructs(analysis)
    if constructs:
        return " and ".join(constructs)
    if _re2 is not None:
        try:
            _re2_regex(analysis)
        except Unsupported as exc:
            return f"syntax RE2 cannot run ({str(exc).removeprefix('re2: ')})"
    return None


class Matcher:
    """Find the lines of a chunk that match `pattern` and no `exclude` pattern."""

    __slots__ = ("_always", "_exclude_refs", "_excludes", "_ref", "_scan", "engine", "linear",
                 "pattern")

    def __init__(
        self,
        pattern: str,
        exclude: Sequence[str] = (),
        case_sensitive: bool = False,
        engine: str | None = None,
    ) -> None:
        if engine is not None and engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}: one of {', '.join(ENGINES)}")
        analysis = analyse(pattern, case_sensitive)
        excludes = [analyse(x, case_sensitive) for x in exclude]
        self.pattern = pattern
        self._ref = analysis.reference
        self._always = analysis.always
        self._exclude_refs = tuple(x.reference for x in excludes)
        tests = [_line_test(x) for x in excludes]
        self._excludes = tuple(test for test, _ in tests)
        reasons = []
        for name in ENGINES if engine is None else (engine,):
            try:
                self._scan: Scan = _BUILDERS[name](analysis)
            except Unsupported as exc:
                reasons.append(f"{name}: {exc}")
                continue
            self.engine: str = name
            self.linear: bool = (name in LINEAR or self._always) and all(lin for _, lin in tests)
            """Every scan runs in linear time (no backtracking `re` on a line)."""
            return
        raise ValueError(f"engine {engine} cannot run pattern {pattern!r} ({'; '.join(reasons)})")

    def find(self, data: bytes) -> Lines:
        """(start, end) of each matching line of `data`, in order, `end` at its b"\\n"."""
        if not data:
            return []
        lines = _all_lines(data) if self._always else self._scan(data)
        if self._excludes and lines:
            tests = self._excludes
            lines = [(s, e) for s, e in lines if not any(t(data[s:e]) for t in tests)]
        return lines

    def match_line(self, line: bytes) -> bool:
        """The reference semantics for one line (a trailing b"\\n" is ignored)."""
        if line.endswith(b"\n"):
            line = line[:-1]
        if self._ref.search(line) is None:
            return False
        return not any(ex.search(line) is not None for ex in self._exclude_refs)


def _all_lines(data: bytes) -> Lines:
    out, pos, n = [], 0, len(data)
    while pos < n:
        end = data.find(b"\n", pos)
        end = n if end < 0 else end
        out.append((pos, end))
        pos = end + 1
    return out


def _line_test(analysis: Analysis) -> tuple[Callable[[bytes], bool], bool]:
    """A per-line test for an exclude pattern: re2 (linear time) when it can, else the stdlib;
    and whether it is the linear one."""
    empty = analysis.empty_line
    search = analysis.reference.search
    linear = False
    if _re2 is not None and not analysis.python_only:
        with contextlib.suppress(Unsupported):
            search = _re2_regex(analysis).search
            linear = True
    return (lambda line: search(line) is not None if line else empty), linear


# --- engines: each returns the exact matching lines of a chunk -------------------------------


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


def _build_re(analysis: Analysis) -> Scan:
    try:
        flags = re.MULTILINE | (re.IGNORECASE if analysis.caseless else 0)
        regex = re.compile(translate(analysis, "py"), flags)
    except (Unsupported, re.error):  # not expected: fall back to the reference, line by line
        ref = analysis.reference.search
        return lambda data: [(s, e) for s, e in _all_lines(data) if ref(data[s:e]) is not None]
    return _search_loop(regex.search, analysis.empty_line)


def _re2_regex(analysis: Analysis) -> Any:
    if _re2 is None:
        raise Unsupported("google-re2 is not installed")
    options = _re2.Options()
    options.encoding = _re2.Options.Encoding.LATIN1  # one character per byte, like re on bytes
    options.case_sensitive = True  # folding is spelled out by the translation
    options.never_capture = True
    options.log_errors = False
    options.max_mem = 64 << 20
    try:
        return _re2.compile(b"(?m)" + translate(analysis, "re2"), options)
    except _re2.error as exc:
        why = exc.args[0] if exc.args else exc
        why = why.decode(errors="replace") if isinstance(why, bytes) else str(why)
        raise Unsupported(f"re2: {why}") from None


def _build_re2(analysis: Analysis) -> Scan:
    return _search_loop(_re2_regex(analysis).search, analysis.empty_line)


def _build_prefilter(analysis: Analysis) -> Scan:
    literals = required_literals(analysis)
    if literals is None or analysis.empty_line:
        raise Unsupported("no required literal of 2+ bytes")
    needles = sorted(literals)
    lower = analysis.folds_somewhere
    confirm = analysis.reference.search
    plain = _build_re(analysis)
    rest = 0  # chunks left to scan with `plain` after the literals proved too common

    def scan(data: bytes) -> Lines:
        nonlocal rest
        if rest:
            rest -= 1
            return plain(data)
        hay = data.lower() if lower else data
        find, rfind, n = hay.find, hay.rfind, len(hay)
        candidates: dict[int, int] = {}
        for needle in needles:
            i = find(needle)
            while i >= 0:
                end = find(b"\n", i)
                end = n if end < 0 else end
                candidates[rfind(b"\n", 0, i) + 1] = end
                i = find(needle, end + 1)
        if len(candidates) > 64 and len(candidates) * 4 > data.count(b"\n"):
            rest = _COMMON_LITERAL_CHUNKS  # a literal in most lines: one regex scan is cheaper
            return plain(data)
        starts = sorted(candidates) if len(needles) > 1 else candidates
        return [(s, candidates[s]) for s in starts if confirm(data[s : candidates[s]]) is not None]

    return scan


_COMMON_LITERAL_CHUNKS = 16
"""Chunks scanned by plain `re` after the required literals were found in over 1/4 of the
lines of a chunk (then the prefilter is tried again)."""

_DENSE = 256
"""Repeated match ends inside already-found lines (beyond 4 per found line) after which a
hyperscan scan stops and the chunk goes to the fallback engine."""


def _build_hyperscan(analysis: Analysis) -> Scan:
    if _hs is None:
        raise Unsupported("hyperscan is not installed")
    flags = _hs.HS_FLAG_MULTILINE
    if analysis.tree.getwidth()[0] == 0:
        flags |= _hs.HS_FLAG_ALLOWEMPTY
    database = _hs.Database(mode=_hs.HS_MODE_BLOCK)
    try:
        database.compile(expressions=[translate(analysis, "hs")], ids=[0], flags=[flags])
    except _hs.error as exc:
        raise Unsupported(f"hyperscan: {exc}") from None
    try:
        dense = _build_re2(analysis)
    except Unsupported:
        dense = _build_re(analysis)
    return _hs_scan(database, dense, analysis.empty_line)


def _hs_scan(database: Any, dense: Scan, empty_ok: bool) -> Scan:
    terminated = _hs.ScanTerminated

    def scan(data: bytes) -> Lines:
        found: Lines = []
        n = len(data)
        last = n - 1 if data.endswith(b"\n") else n
        line_start = line_end = -1
        repeats, limit = 0, _DENSE

        def on_match(_id: int, _from: int, to: int, _flags: int, _ctx: object) -> bool:
            nonlocal line_start, line_end, repeats, limit
            if line_start <= to <= line_end:
                repeats += 1
                return repeats > limit
            if to > last:
                return False
            line_start = data.rfind(b"\n", 0, to) + 1
            end = data.find(b"\n", to)
            line_end = n if end < 0 else end
            found.append((line_start, line_end))
            limit += 4
            return False

        try:
            database.scan(data, match_event_handler=on_match)
        except terminated:  # too many match ends: a search per line is cheaper
            return dense(data)
        if any(a[0] >= b[0] for a, b in itertools.pairwise(found)):
            found = sorted(set(found))  # hyperscan does not promise ordered matches
        if not empty_ok:
            found = [(s, e) for s, e in found if s < e]
        return found

    return scan


_BUILDERS: dict[str, Callable[[Analysis], Scan]] = {
    "hyperscan": _build_hyperscan,
    "re2": _build_re2,
    "re+prefilter": _build_prefilter,
    "re": _build_re,
}
