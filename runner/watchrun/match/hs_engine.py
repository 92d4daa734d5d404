"""The hyperscan engine: the pattern and its excludes in one compiled database (ids 0..), one
scan per chunk (one hit per matching line), databases kept between runs in a `Store`."""

from __future__ import annotations

import functools
import hashlib
import operator
from itertools import repeat
from typing import Any

from watchrun.match.optional import optional
from watchrun.match.regex import Analysis, Unsupported
from watchrun.match.scanning import (
    Compiled,
    Lines,
    Reject,
    Scan,
    Store,
    dense,
    filtered,
    lines_at,
    re2_regex,
    re_scan,
    rejecter,
    search_loop,
)
from watchrun.match.translate import DOLLAR, lf_only, translate

hs: Any = optional("hyperscan")


def build_hyperscan(analysis: Analysis, excludes: list[Analysis], reject: Reject | None,
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
    leftover = rejecter(rest)[0] if rest else None
    pad = any(b"$" in e for e in exprs)  # a literal "$" is translated as \x24: this is `$`
    if not pad:
        try:  # each expression reports a matching line once, at its newline
            database = _database([b"(?:%b)[^\\n]*\\n" % e for e in exprs],
                                 [hs.HS_FLAG_MULTILINE] * len(exprs), store)
        except Unsupported:
            pass
        else:
            scan = _line_scan(database, tuple(empty), analysis.tree.getwidth()[0] == 0)
            return Compiled("hyperscan", filtered(scan, leftover), *dense(analysis, reject))
    database = _database(exprs, flags, store)
    lf = _database(list(map(lf_only, exprs)), flags, store) if any(DOLLAR in e for e in exprs) \
        else database  # fmt: skip
    scan = _hs_scan(database, lf, filtered(_fallback(analysis), reject), tuple(empty), pad)
    return Compiled("hyperscan", filtered(scan, leftover), *dense(analysis, reject))


def _fallback(analysis: Analysis) -> Scan:
    """The search per line for a chunk with a hit every few bytes, compiled when a chunk first
    needs it (RE2's import and compile are not paid at start)."""
    @functools.cache
    def compiled() -> Scan:
        try:
            return search_loop(re2_regex(analysis).search, analysis.empty_line)
        except Unsupported:
            return re_scan(analysis)

    return lambda data: compiled()(data)


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


def _line_scan(database: Any, empty_ok: tuple[bool, ...], may_be_empty: bool) -> Scan:
    """Lines with a hit of id 0 (the pattern) and none of ids 1.. (the excludes), each
    expression compiled as `(?:P)[^\\n]*\\n`: every match of it on a line ends at the line's
    newline, and hyperscan reports an end once per id, so the call back runs once per matching
    line and the line's end is the hit; its start is one `rfind` each, in C (`map`). No
    pattern with `$` (hyperscan refuses anything after one): those take `_hs_scan`.
    `may_be_empty`: the pattern can match an empty line (kept only when `empty_ok[0]`)."""

    def scan(data: bytes) -> Lines:
        ends: list[int] = []
        excl: list[tuple[int, int]] = []
        add = ends.append

        def on_match(id_: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
            if id_:
                excl.append((to - 1, id_))
            else:
                add(to - 1)

        database.scan(data if data.endswith(b"\n") else data + b"\n",
                      match_event_handler=on_match)
        if not ends:
            return []
        ends.sort()  # hyperscan does not promise ordered matches (in order: one pass, in C)
        starts = map(operator.add, map(data.rfind, repeat(b"\n"), repeat(0), ends), repeat(1))
        found = list(zip(starts, ends, strict=True))
        if may_be_empty and not empty_ok[0]:
            found = [line for line in found if line[0] < line[1]]
        if excl and found:  # an exclude's hit on an empty line counts only if it may match one
            gone = {end for end, i in excl
                    if empty_ok[i] or (end and data[end - 1] != 10)}  # fmt: skip
            found = [line for line in found if line[1] not in gone]
        return found

    return scan


def _hs_scan(database: Any, lf: Any, fallback: Scan, empty_ok: tuple[bool, ...],
             pad: bool) -> Scan:
    """Lines with a hit of id 0 (the pattern) and none of ids 1.. (the excludes), for
    patterns with `$`. The call back only notes where hits end; lines are found afterwards,
    once per matching line. `lf`: the database of the expressions with `$` as hyperscan's own,
    for a chunk with no `\\r` (a memchr): where a `$` need not take a `\\r`, `ERROR$` stays one
    literal at a line's end (11 GB/s, not 7, for `build done$`; docs/decisions.md).

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
            (database if b"\r" in data else lf).scan(buf, match_event_handler=on_match)
        except terminated:  # a hit every few bytes: a search per line is cheaper
            return fallback(data)
        if not hits:
            return []
        hits.sort()  # hyperscan does not promise ordered matches (in order: one pass, in C)
        found = lines_at(data, hits, empty_ok[0])
        if excl and found:
            gone = {start for to, i in excl for start, _ in lines_at(data, [to], empty_ok[i])}
            found = [(s, e) for s, e in found if s not in gone]
        return found

    return scan


_HITS = 4096
"""Hits per chunk (plus one per 16 bytes) after which a hyperscan scan stops and the chunk goes
to the fallback engine: a pattern that matches all over every line."""


