"""The matching engines: each finds, in one call per chunk, exactly the lines that match a
pattern and none of its excludes (the semantics are in `watchrun.match.matcher`).

Excludes are checked in the same scan where the engine can (hyperscan: extra pattern ids in one
database); otherwise per found line, behind a literal prefilter (`bytes in` on the line before
any regex; no regex at all when the exclude is a set of literals, like `healthcheck`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from watchrun.match.hs_engine import build_hyperscan, hs
from watchrun.match.literals import candidate_lines, exact_literals, required_literals
from watchrun.match.optional import re2_installed
from watchrun.match.regex import Analysis, Unsupported
from watchrun.match.scanning import (
    Compiled,
    Lines,
    Reject,
    Scan,
    Store,
    all_lines,
    dense,
    filtered,
    re2_regex,
    re_scan,
    rejecter,
    search_loop,
)

__all__ = ["BUILDERS", "LINEAR", "Compiled", "Lines", "Reject", "Store", "all_lines", "hs",
           "re2_installed", "re2_regex", "rejecter"]

LINEAR = ("hyperscan", "re2")
"""Engines whose time is linear in the input: a hostile line cannot stall them."""


def _build_re(analysis: Analysis, excludes: list[Analysis], reject: Reject | None,
              store: Store | None) -> Compiled:
    return Compiled("re", filtered(re_scan(analysis), reject), *dense(analysis, reject))


RE2_LITERALS = 3
"""At most this many required literals are searched one by one before RE2's regex confirms a
line (each is a SIMD pass at ~15 GB/s after one ASCII lowering at ~1.5 GB/s, `simd.py`; the
regex of an alternation runs at ~0.75 GB/s)."""


def _build_re2(analysis: Analysis, excludes: list[Analysis], reject: Reject | None,
               store: Store | None) -> Compiled:
    regex = re2_regex(analysis)
    scan = search_loop(regex.search, analysis.empty_line)
    literals = required_literals(analysis)
    if literals and len(literals) <= RE2_LITERALS:
        candidates = candidate_lines([analysis])
        if candidates is not None:
            scan = _accelerated(candidates, _confirm(analysis, regex.search), scan)
    return Compiled("re2", filtered(scan, reject), *dense(analysis, reject))


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
                        re_scan(analysis))
    return Compiled("re+prefilter", filtered(scan, reject), *dense(analysis, reject))


_COMMON_LITERAL_CHUNKS = 16
"""Chunks scanned by the plain regex after the lines holding a required literal were over 1/4
of a chunk's bytes (then the literals are tried again)."""

BUILDERS: dict[str, Callable[[Analysis, list[Analysis], Reject | None, Store | None],
                              Compiled]] = {
    "hyperscan": build_hyperscan,
    "re2": _build_re2,
    "re+prefilter": _build_prefilter,
    "re": _build_re,
}
