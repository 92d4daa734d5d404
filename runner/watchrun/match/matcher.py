"""The chunk matcher: which lines of a chunk of complete lines match a watcher's pattern.

Semantics (the reference, which every engine reproduces exactly): a line matches when
`re.search(pattern.encode("utf-8"), line, flags)` finds a match, where `line` is the line's
bytes without its b"\\n" and `flags` is re.IGNORECASE unless the watcher is case-sensitive, and
no `exclude` pattern (same rules) matches it. So matching is on UTF-8 bytes, with one change to
Python's rules (the last point):

- case folding is ASCII only, like `grep -i` in the C locale (`error` matches `ERROR`, but
  `é` does not match `É`);
- `.`, `\\w`, `\\d`, `\\s`, `\\b` work on bytes and ASCII classes: `.` matches one byte of a
  multi-byte character, `\\w` never matches `é`;
- a non-ASCII character in a class (`[éè]`) or a quantifier on a lone non-ASCII character
  (`é+`) would act on bytes, so they are rejected with a ValueError suggesting `(?:é|è)` or
  `(?:é)+`; `\\u00e9`, `\\xe9` and `\\N{...}` mean the character (its UTF-8 bytes);
- invalid UTF-8 and NUL bytes in a line are ordinary bytes;
- `$` is `\\r?\\Z`: it also matches before a `\\r` that ends the line, taking it (the CR of a
  CRLF line ending, which no surface shows; `watchrun.match.line_end`); `\\Z` does not.

Engines, fastest first: "hyperscan" (one scan per chunk reporting each matching line once, at
its end; the excludes in the same scan), "re2" (linear time), "re+prefilter" (stdlib:
`bytes.find` of the pattern's required literals, then the reference regex on candidate lines
only, or no regex when the pattern is a set of literals) and "re" (stdlib, one search per
matching line); `WATCHRUN_ENGINES` (a comma list) restricts them, for benchmarks and to work
around an engine. Hyperscan, re2 and re run a translation of the pattern that cannot match a
newline and means exactly the reference per line (see `watchrun.match.regex`), so their hits are
the matching lines; "re+prefilter" confirms each candidate with the reference. When most lines
of chunks match a pattern that is a set of literals, they are found with `in` on each line
instead (no call back per match).

Compiled engines are shared by the Matchers of one thread with the same pattern, excludes and
case (one hyperscan database for identical patterns across watchers). A Matcher is not
thread-safe (hyperscan's scratch space is per database): use one per thread. `compile_for`
compiles them in a worker thread for another one (the event loop's), whose Matchers then find
them compiled.
"""

from __future__ import annotations

import functools
import operator
import os
import threading
from collections.abc import Sequence

from watchrun.match.engines import (
    BUILDERS,
    LINEAR,
    Compiled,
    Lines,
    Reject,
    Store,
    all_lines,
    hs,
    re2_installed,
    re2_regex,
    rejecter,
)
from watchrun.match.regex import Unsupported, analyse, backtracking_constructs

__all__ = ["BACKTRACKING_BUDGET_S", "ENGINES", "LINEAR", "Matcher", "best_engine",
           "compile_for", "engines_available", "needs_backtracking"]

ENGINES = ("hyperscan", "re2", "re+prefilter", "re")
BACKTRACKING_BUDGET_S = 0.25
"""Per-line time budget of a pattern run by Python `re` (`backtracking: true`), in a worker."""
DENSE_CHUNKS = 16
"""Chunks matched line by line after one where matching lines held at least a quarter of the
bytes (the pattern being a set of literals); then the engine is tried again."""
_DENSE_MIN = 256


def engines_available() -> list[str]:
    """The engines this interpreter can run, fastest first (`WATCHRUN_ENGINES` applied)."""
    names = [name for name, there in (("hyperscan", hs is not None), ("re2", re2_installed()))
             if there]
    return [e for e in (*names, "re+prefilter", "re") if e in _allowed()]


def _allowed() -> tuple[str, ...]:
    """`WATCHRUN_ENGINES`, e.g. `re2` or `re+prefilter,re`: the engines that may be used."""
    raw = os.environ.get("WATCHRUN_ENGINES", "").strip()
    if not raw:
        return ENGINES
    names = tuple(x.strip() for x in raw.split(",") if x.strip())
    unknown = [x for x in names if x not in ENGINES]
    if unknown:
        raise ValueError(f"WATCHRUN_ENGINES names unknown engines {unknown}: use "
                         f"{', '.join(ENGINES)}")
    return names


def best_engine(pattern: str, case_sensitive: bool = False) -> str:
    """The engine a Matcher would use for `pattern` (ValueError if the pattern is invalid)."""
    return Matcher(pattern, case_sensitive=case_sensitive).engine


@functools.lru_cache(maxsize=1024)
def needs_backtracking(pattern: str, case_sensitive: bool = False) -> str | None:
    """What in `pattern` only Python `re` (a backtracking engine) can run, or None when a
    linear-time engine runs it. A property of the pattern, the same on every machine (without
    google-re2 installed, only the constructs are judged). ValueError if it is invalid.
    Remembered per pattern: a config's checks and `validate`'s notes ask again for each
    watcher, and many watchers share their patterns and excludes."""
    analysis = analyse(pattern, case_sensitive)
    constructs = backtracking_constructs(analysis)
    if constructs:
        return " and ".join(constructs)
    if re2_installed():
        try:
            re2_regex(analysis)
        except Unsupported as exc:
            return f"syntax RE2 cannot run ({str(exc).removeprefix('re2: ')})"
    return None


def compile_for(thread: int, pattern: str, exclude: Sequence[str] = (),
                case_sensitive: bool = False, store: Store | None = None) -> str:
    """Compile here the engine that a Matcher made later in thread `thread` (a
    `threading.get_ident()`) with the same arguments runs, and return its name: run in a worker
    thread, that Matcher is then built without compiling anything (a runtime watcher's start on
    the event loop). The calling thread keeps nothing. ValueError as Matcher's. Kept while
    fewer than 256 other compiles come in between (then that Matcher compiles again)."""
    return _compiled(pattern, tuple(exclude), case_sensitive, _allowed(), thread, store)[0].engine


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str, exclude: tuple[str, ...], case_sensitive: bool,
              engines: tuple[str, ...], thread: int, store: Store | None
              ) -> tuple[Compiled, bool, Reject | None]:
    """The first of `engines` that runs the pattern, whether everything runs in linear time,
    and the excludes' per-line test; shared per thread (`thread` is part of the key)."""
    analysis = analyse(pattern, case_sensitive)
    excludes = [analyse(x, case_sensitive) for x in exclude]
    reject, reject_linear = rejecter(excludes)
    reasons = []
    for name in engines:
        try:
            compiled = BUILDERS[name](analysis, excludes, reject, store)
        except Unsupported as exc:
            reasons.append(f"{name}: {exc}")
            continue
        return compiled, (name in LINEAR or analysis.always) and reject_linear, reject
    raise ValueError(f"no engine can run pattern {pattern!r} ({'; '.join(reasons)})")


class Matcher:
    """Find the lines of a chunk that match `pattern` and no `exclude` pattern."""

    __slots__ = ("_always", "_compiled", "_dense_left", "_exclude_refs", "_ref", "_reject",
                 "engine", "linear", "pattern")

    def __init__(
        self,
        pattern: str,
        exclude: Sequence[str] = (),
        case_sensitive: bool = False,
        engine: str | None = None,
        store: Store | None = None,
    ) -> None:
        """`store` keeps compiled hyperscan databases between runs (`engines.Store`)."""
        if engine is not None and engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}: one of {', '.join(ENGINES)}")
        analysis = analyse(pattern, case_sensitive)
        self.pattern = pattern
        self._ref = analysis.reference
        self._always = analysis.always
        self._exclude_refs = tuple(analyse(x, case_sensitive).reference for x in exclude)
        engines = _allowed() if engine is None else (engine,)
        try:
            self._compiled, linear, reject = _compiled(pattern, tuple(exclude), case_sensitive,
                                                       engines, threading.get_ident(), store)
        except ValueError as exc:
            if engine is None:
                raise
            raise ValueError(f"engine {engine} cannot run pattern {pattern!r} "
                             f"({str(exc).rpartition('(')[2]}") from None
        self._reject = reject if self._always else None
        self.engine: str = self._compiled.engine
        self.linear: bool = linear
        """Every scan runs in linear time (no backtracking `re` on a line)."""
        self._dense_left = 0

    def find(self, data: bytes) -> Lines:
        """(start, end) of each matching line of `data`, in order, `end` at its b"\\n"."""
        if not data:
            return []
        if self._always:
            lines = all_lines(data)
            reject = self._reject
            return lines if reject is None else [(s, e) for s, e in lines
                                                 if not reject(data[s:e])]
        dense = self._compiled.dense
        if dense is None:
            return self._compiled.scan(data)
        if self._dense_left:
            lines = dense(data)
            self._dense_left = self._dense_left - 1 if self._is_dense(lines, data) else 0
            return lines
        lines = self._compiled.scan(data)
        if self._is_dense(lines, data):
            self._dense_left = DENSE_CHUNKS
        return lines

    def every_line(self, data: bytes) -> bool:
        """Whether every line of `data` matches, when that is cheap to tell: after chunks where
        most lines matched, for a pattern that is a set of literals. False means "use `find`"."""
        every = self._compiled.every
        if not (self._dense_left and every is not None and data and every(data)):
            return False
        self._dense_left = DENSE_CHUNKS  # a flood goes on
        return True

    @staticmethod
    def _is_dense(lines: Lines, data: bytes) -> bool:
        """Matching lines hold a quarter of the chunk's bytes (told without counting its lines:
        a count of every byte again costs more than the scan)."""
        if len(lines) < _DENSE_MIN:
            return False
        held = sum(map(operator.sub, map(operator.itemgetter(1), lines),
                       map(operator.itemgetter(0), lines)))
        return bool((held + len(lines)) * 4 >= len(data))

    def match_line(self, line: bytes) -> bool:
        """The reference semantics for one line (a trailing b"\\n" is ignored)."""
        if line.endswith(b"\n"):
            line = line[:-1]
        if self._ref.search(line) is None:
            return False
        return not any(ex.search(line) is not None for ex in self._exclude_refs)
