"""The chunk matcher: every engine finds exactly the lines the per-line reference finds."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from liverunner import fresh_python

from watchrun.match.matcher import ENGINES, Matcher, best_engine, engines_available

AVAILABLE = engines_available()


Spans = list[tuple[int, int]]


def reference(pattern: str, data: bytes, exclude: Sequence[str] = (), cs: bool = False) -> Spans:
    """Per-line loop with the reference semantics, the oracle for every engine."""
    matcher = Matcher(pattern, exclude, cs, engine="re")
    out, pos = [], 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        if matcher.match_line(data[pos:end]):
            out.append((pos, end))
        pos = end + 1
    return out


def lines_of(data: bytes, spans: Spans) -> list[bytes]:
    return [data[s:e] for s, e in spans]


def engines_for(pattern: str, cs: bool = False) -> list[str]:
    usable = []
    for engine in AVAILABLE:
        try:
            Matcher(pattern, (), cs, engine=engine)
        except ValueError:
            continue
        usable.append(engine)
    return usable


LOG = (
    b"INFO start\n"
    b"ERROR disk full\n"
    b"\n"
    b"warn: fatal-ish\n"
    b"healthcheck ERROR\n"
    b"caf\xc3\xa9 au lait\n"
    b"CAF\xc3\x89 AU LAIT\n"
    b"bad \xff\xfe bytes error\n"
    b"nul \x00 error\n"
    b"a\x0bb\n"
    b"tab\there\n"
    b"  indented\n"
    b"aa\n"
)

TABLE = [
    # (pattern, exclude, case_sensitive, expected lines)
    (
        "ERROR|FATAL",
        (),
        False,
        [
            b"ERROR disk full",
            b"warn: fatal-ish",
            b"healthcheck ERROR",
            b"bad \xff\xfe bytes error",
            b"nul \x00 error",
        ],
    ),
    ("ERROR|FATAL", (), True, [b"ERROR disk full", b"healthcheck ERROR"]),
    (
        "ERROR|FATAL",
        ("healthcheck",),
        False,
        [b"ERROR disk full", b"warn: fatal-ish", b"bad \xff\xfe bytes error", b"nul \x00 error"],
    ),
    ("error", ("HEALTH", "^nul"), False, [b"ERROR disk full", b"bad \xff\xfe bytes error"]),
    ("^ERROR", (), False, [b"ERROR disk full"]),
    ("ERROR$", (), True, [b"healthcheck ERROR"]),
    (r"\AERROR", (), False, [b"ERROR disk full"]),
    (r"ERROR\Z", (), True, [b"healthcheck ERROR"]),
    ("^$", (), False, [b""]),
    (r"full\s+warn", (), False, []),  # \s must not cross the line end
    (r"full[^x]warn", (), False, []),  # nor a negated class
    (r"full\n", (), False, []),  # a newline is never inside a line
    (r"a\sb", (), False, [b"a\x0bb"]),  # \s includes \v, as in Python
    (r"\t", (), False, [b"tab\there"]),
    ("^  ", (), False, [b"  indented"]),
    ("x*", (), False, LOG.split(b"\n")[:-1]),  # matches the empty string: every line
    ("z?$", (), False, LOG.split(b"\n")[:-1]),
    ("caf\u00e9", (), False, [b"caf\xc3\xa9 au lait"]),  # ASCII-only folding: not CAFÉ
    ("café", (), False, [b"caf\xc3\xa9 au lait"]),
    ("(?:É|é) AU", (), False, [b"caf\xc3\xa9 au lait", b"CAF\xc3\x89 AU LAIT"]),
    (r"\xe9 au", (), False, [b"caf\xc3\xa9 au lait"]),  # \xe9 means the character é
    (r"\351 au", (), False, [b"caf\xc3\xa9 au lait"]),  # so does the octal \351
    (r"\\351", (), False, []),  # a backslash, then 351
    (r"\101U", (), False, [b"caf\xc3\xa9 au lait", b"CAF\xc3\x89 AU LAIT"]),  # octal ASCII A
    (r"\bau\b", (), True, [b"caf\xc3\xa9 au lait"]),
    (r"caf\w", (), False, []),  # \w is ASCII on bytes
    ("caf.", (), False, [b"caf\xc3\xa9 au lait", b"CAF\xc3\x89 AU LAIT"]),  # . is one byte
    ("\xff", (), False, []),  # the character ÿ, not the byte 0xff
    ("bad ..", (), False, [b"bad \xff\xfe bytes error"]),
    ("nul \x00", (), False, [b"nul \x00 error"]),
    (r"(a)\1", (), False, [b"aa"]),  # backreference: stdlib only
    (r"(?i)(A)\1", (), True, [b"aa"]),
    ("disk(?= full)", (), False, [b"ERROR disk full"]),  # lookahead
    (r"(?<!\S)au\b", (), True, [b"caf\xc3\xa9 au lait"]),  # lookbehind
    (r"(?<!\s)au", (), True, []),
    ("(?-i:ERROR)", (), False, [b"ERROR disk full", b"healthcheck ERROR"]),
    ("(?i:error) disk", (), True, [b"ERROR disk full"]),
    (r"^\S+$", (), False, [b"aa"]),
    (r"\B", (), False, [x for x in LOG.split(b"\n")[:-1] if x not in (b"", b"a\x0bb")]),
]


@pytest.mark.parametrize(("pattern", "exclude", "cs", "expected"), TABLE)
@pytest.mark.parametrize("engine", ENGINES)
def test_table(
    pattern: str, exclude: tuple[str, ...], cs: bool, expected: list[bytes], engine: str
) -> None:
    if engine not in AVAILABLE:
        pytest.skip(f"{engine} not installed")
    try:
        matcher = Matcher(pattern, exclude, cs, engine=engine)
    except ValueError as exc:
        assert "cannot run pattern" in str(exc)
        assert engine != "re"
        return
    spans = matcher.find(LOG)
    assert lines_of(LOG, spans) == expected
    assert spans == reference(pattern, LOG, exclude, cs)


@pytest.mark.parametrize(
    ("pattern", "engine"),
    [
        ("ERROR|FATAL", "hyperscan"),
        (r"timeout after \d+ms", "hyperscan"),
        (r"(a)\1", "re"),
        ("x(?=y)", "re"),
        ("(?>ab)c", "re+prefilter"),
        ("a*+b", "re"),
    ],
)
def test_best_engine(pattern: str, engine: str) -> None:
    if "hyperscan" not in AVAILABLE:
        pytest.skip("hyperscan not installed")
    assert best_engine(pattern) == engine


def test_engine_fallbacks_without_hyperscan() -> None:
    assert Matcher("a(?=b)|c", engine="re").engine == "re"
    assert Matcher("ERROR|FATAL", engine="re+prefilter").engine == "re+prefilter"
    with pytest.raises(ValueError, match="re2 cannot run pattern"):
        Matcher(r"(a)\1", engine="re2")
    with pytest.raises(ValueError, match=r"re\+prefilter cannot run pattern .*required literal"):
        Matcher(r"\d+", engine="re+prefilter")
    with pytest.raises(ValueError, match="unknown engine 'pcre'"):
        Matcher("x", engine="pcre")


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("[éè]", "character class can hold ASCII characters only"),
        ("[^é]", "character class can hold ASCII characters only"),
        (r"[\u00e9]", "character class can hold ASCII characters only"),
        ("é+", r"group the character: \(\?:é\)\+"),
        ("(unclosed", "invalid regex '\\(unclosed': missing \\)"),
        (r"\N{NO SUCH NAME}", "undefined character name"),
        ("(?u)x", "cannot use 'u' flag"),
        ("(?L)x", "locale flag is not supported"),
    ],
)
def test_invalid_patterns(pattern: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Matcher(pattern)


def test_invalid_exclude_is_named() -> None:
    with pytest.raises(ValueError, match=r"invalid regex '\[x': unterminated"):
        Matcher("ok", exclude=["[x"])


def test_grouped_non_ascii_repeat_is_fine() -> None:
    m = Matcher("^(?:é)+$", engine="re")
    assert m.match_line("éé".encode()) and not m.match_line("é\xa9".encode("latin-1"))


def test_chunk_without_trailing_newline_and_empty_chunk() -> None:
    for engine in AVAILABLE:
        m = Matcher("end$", engine=engine) if engine != "re+prefilter" else Matcher("end")
        assert m.find(b"a\nthe end") == [(2, 9)]
        assert m.find(b"") == []
        assert Matcher("^", engine=engine if engine != "re+prefilter" else None).find(b"") == []


def test_every_line_once_and_in_order_for_dense_patterns() -> None:
    data = b"".join(b"%d abc %s\n" % (i, b"x" * (i % 50)) for i in range(5000))
    for pattern in [".", r"\w", "x*x", "[a-z]", "(?:a|b|c|x)+"]:
        expected = reference(pattern, data)
        for engine in engines_for(pattern):
            assert Matcher(pattern, engine=engine).find(data) == expected, (pattern, engine)


def test_very_long_line() -> None:
    data = b"x" * 3_000_000 + b" ERROR " + b"y" * 1000 + b"\nshort\nERROR\n"
    for engine in engines_for("ERROR"):
        found = Matcher("ERROR", engine=engine).find(data)
        assert found == [(0, 3_001_007), (3_001_014, 3_001_019)]


@pytest.mark.parametrize("engine", ["hyperscan", "re2"])
def test_redos_pattern_is_linear(engine: str) -> None:
    if engine not in AVAILABLE:
        pytest.skip(f"{engine} not installed")
    matcher = Matcher("^(a+)+$", engine=engine)
    data = b"a" * 50_000 + b"!\n" + b"aaa\n"
    started = time.monotonic()
    assert matcher.find(data) == [(50_002, 50_005)]
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize("engine", ["hyperscan", "re2"])
def test_hostile_matching_line_is_not_rechecked_by_backtracking(engine: str) -> None:
    # The stdlib needs minutes for this line (exponential backtracking before it finds ERROR);
    # the linear engines' hits are exact, so no stdlib confirmation runs.
    if engine not in AVAILABLE:
        pytest.skip(f"{engine} not installed")
    data = b"a" * 40 + b"! ERROR\n"
    started = time.monotonic()
    assert Matcher(r"(\w+\s?)+$|ERROR", engine=engine).find(data) == [(0, 47)]
    assert Matcher("ok", [r"(\w+\s?)+$|ERROR"]).find(b"ok " + data) == []
    assert time.monotonic() - started < 1.0


def test_crafted_line_cannot_hide_a_following_match() -> None:
    # A hit that an engine could stretch across lines must not swallow the next line's match.
    data = b"a\n\nb a b\nab\n"
    for pattern in [r"a\s*b", r"a[^x]*b", r"a.*b|^b"]:
        expected = reference(pattern, data)
        for engine in engines_for(pattern):
            assert Matcher(pattern, engine=engine).find(data) == expected, (pattern, engine)


# --- property: all engines agree with the per-line reference ----------------------------------

ATOMS = [
    "a",
    "b",
    "A",
    "é",
    " ",
    "1",
    "_",
    "!",
    r"\.",
    ".",
    r"\d",
    r"\w",
    r"\s",
    r"\S",
    r"\W",
    "[ab]",
    "[^a]",
    "[a-c1]",
    "[^ ]",
    r"\b",
    r"\B",
    "^",
    "$",
    r"\A",
    r"\Z",
    r"\n",
    r"\x0b",
]


def _regex(depth: int) -> st.SearchStrategy[str]:
    atom = st.sampled_from(ATOMS)
    if depth == 0:
        return atom
    sub = _regex(depth - 1)
    return st.one_of(
        atom,
        st.lists(sub, min_size=2, max_size=4).map("".join),
        st.lists(sub, min_size=2, max_size=3).map(lambda xs: "(?:" + "|".join(xs) + ")"),
        st.tuples(sub, st.sampled_from(["*", "+", "?", "{1,3}", "+?", "{2}"])).map(
            lambda t: f"(?:{t[0]}){t[1]}"
        ),
        sub.map(lambda x: f"({x})"),
        sub.map(lambda x: f"(?i:{x})"),
        sub.map(lambda x: f"(?-i:{x})"),
    )


TOKENS = [
    "a",
    "b",
    "A",
    "B",
    "ab",
    "é",
    "É",
    "\xff",
    "\x00",
    " ",
    "\t",
    "1",
    "12",
    "_",
    "!",
    ".",
    "\x0b",
    "\r",
    "\xe3\xa9",
    "aa",
]
LINE = st.lists(st.sampled_from(TOKENS), max_size=6).map(lambda ts: "".join(ts))


def _encode(line: str) -> bytes:
    return line.encode("utf-8") if line != "\xff" else b"\xff"


CHUNK = st.tuples(st.lists(LINE, min_size=1, max_size=12), st.booleans()).map(
    lambda t: b"\n".join(_encode(x) for x in t[0]) + (b"\n" if t[1] else b"")
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_regex(3), st.booleans(), CHUNK, st.lists(st.sampled_from(["a", "^b", r"\d$"]), max_size=1))
def test_engines_equal_reference(pattern: str, cs: bool, data: bytes, exclude: list[str]) -> None:
    try:
        expected = reference(pattern, data, tuple(exclude), cs)
    except ValueError:
        return  # e.g. a quantifier on é: rejected for every engine
    for engine in AVAILABLE:
        try:
            matcher = Matcher(pattern, exclude, cs, engine=engine)
        except ValueError:
            continue
        assert matcher.find(data) == expected, (engine, pattern)


# Found by test_engines_equal_reference: hyperscan 5.4 misses `[0-9]$` on the last line of a
# buffer of more than 16 bytes (matched with a pattern or as an exclude); engines.py pads the scan.
_LAST_LINE = b"aa\naa\naaaaaa\naab\naaaa\naaaa\naaaaaa\naaaaaa\naaaaaa\naaaaaa\naaaaaa\naaaaa12\n"


@pytest.mark.parametrize(("pattern", "exclude", "data"), [
    (r"\d$", [], _LAST_LINE),
    ("a", [r"\d$"], _LAST_LINE),
    (r"[0-9](?: |$)", [], _LAST_LINE),
    (r"\d$", [], _LAST_LINE[:-1]),  # an unterminated last line
    (r"^$", [], b"a\n\n" + _LAST_LINE),  # the pad's own empty line is never a match
    (r"x$|^$", [], _LAST_LINE),
])
def test_a_dollar_on_the_last_line_of_a_buffer_is_seen_by_every_engine(
        pattern: str, exclude: list[str], data: bytes) -> None:
    expected = reference(pattern, data, tuple(exclude), False)
    ran = []
    for engine in AVAILABLE:
        try:
            matcher = Matcher(pattern, exclude, engine=engine)
        except ValueError:
            continue  # the prefilter needs a literal
        assert matcher.find(data) == expected, engine
        ran.append(engine)
    assert "hyperscan" in ran or "hyperscan" not in AVAILABLE


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(
        [
            r"(a)\1",
            r"a(?=b)",
            r"(?<=a)b",
            r"(?<!\s)a",
            r"(?!a)\w",
            r"(a)?(?(1)b|c)",
            r"(?>a|ab)c",
            r"a++",
            r"(?<![ab])\B",
        ]
    ),
    st.booleans(),
    CHUNK,
)
def test_python_only_constructs(pattern: str, cs: bool, data: bytes) -> None:
    assert Matcher(pattern, (), cs).engine in ("re", "re+prefilter")
    assert Matcher(pattern, (), cs).find(data) == reference(pattern, data, (), cs)


# -- issue #14: dense chunks, literal sets, excludes in the scan, WATCHRUN_ENGINES ---------------

DENSE_LINES = st.lists(st.sampled_from([
    b"ERROR x", b"error y", b"FATAL z", b"info", b"healthcheck ERROR", b"Err", b"", b"\xc3\xa9rror",
    b"eRRoR q", b"fatality",
]), min_size=300, max_size=900)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(DENSE_LINES, min_size=1, max_size=4), st.sampled_from(["ERROR", "error|fatal"]),
       st.booleans(), st.sampled_from([(), ("healthcheck",), ("x$",)]))
def test_dense_and_flood_paths_equal_the_reference(chunks: list[list[bytes]], pattern: str,
                                                   cs: bool, exclude: tuple[str, ...]) -> None:
    """Chunks where most lines match go the per-line literal path and `every_line`; every
    chunk still gives exactly the reference's lines."""
    for engine in AVAILABLE:
        matcher = Matcher(pattern, exclude, cs, engine=engine)
        for lines in chunks:
            data = b"".join(x + b"\n" for x in lines)
            assert matcher.find(data) == reference(pattern, data, exclude, cs), engine
            if matcher.every_line(data):  # (False only means: ask `find`)
                assert len(reference(pattern, data, exclude, cs)) == len(lines), engine


@settings(max_examples=200)
@given(st.lists(st.sampled_from([b"ERROR x", b"error ERROR", b"fatal", b"x", b"FATAL error", b"",
                                 b"errorfatal", b"\xffERROR\xff \xc3\xa9", b"ab", b"b", b"aa",
                                 b"aaa", b"ba"]), min_size=1, max_size=40),
       st.sampled_from(["ERROR", "error|fatal", "ab|b", "aa", "b"]), st.booleans())
@example([b"error ERROR", b"x"], "ERROR", False)  # as many matches as lines, one line without
@example([b"FATAL error", b"fatal", b"x"], "error|fatal", False)
def test_whether_every_line_matches_is_told_exactly(lines: list[bytes], pattern: str,
                                                     cs: bool) -> None:
    """The flood test (`dense`'s `every`), by counting where it can: the same answer as a
    look at each line, also with two matches on a line, with needles that overlap, and past
    the size where StringZilla counts."""
    from watchrun.match.regex import analyse
    from watchrun.match.scanning import dense
    from watchrun.match.simd import BIG

    analysis = analyse(pattern, cs)
    every = dense(analysis, None)[1]
    assert every is not None
    data = b"".join(x + b"\n" for x in lines)
    want = all(analysis.reference.search(x) is not None for x in lines)
    assert every(data) == want
    assert every(data * (BIG // len(data) + 1)) == want


@given(st.lists(st.sampled_from([b"healthcheck", b"HealthCheck ok", b"x", b"check", b"",
                                 b"err", b"error", b"errors=0", b"ab"]), max_size=20),
       st.sampled_from(["healthcheck", "err(or)?", "[ab]b|x", "(?i)ERROR"]), st.booleans())
def test_a_set_of_literals_is_exactly_the_pattern(lines: list[bytes], pattern: str,
                                                  cs: bool) -> None:
    from watchrun.match.literals import exact_literals
    from watchrun.match.regex import analyse

    analysis = analyse(pattern, cs)
    needles = exact_literals(analysis)
    assert needles is not None
    for line in lines:
        hay = line.lower() if analysis.caseless else line
        assert any(n in hay for n in needles) == (analysis.reference.search(line) is not None)


@pytest.mark.parametrize("pattern", ["^ERROR", r"ERROR\b", "a.b", "x*", "(?i)ERR(?-i:X)"])
def test_patterns_with_anchors_wildcards_or_mixed_case_are_not_literal_sets(pattern: str) -> None:
    from watchrun.match.literals import exact_literals
    from watchrun.match.regex import analyse

    assert exact_literals(analyse(pattern, True)) is None


def test_watchrun_engines_restricts_the_engines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WATCHRUN_ENGINES", "re2")
    if "re2" in AVAILABLE:
        assert Matcher("ERROR|FATAL").engine == "re2"
    monkeypatch.setenv("WATCHRUN_ENGINES", "re+prefilter,re")
    assert Matcher("ERROR|FATAL").engine == "re+prefilter"
    assert Matcher(r"[a-c]+\d").engine == "re"  # no literal to find first
    assert not Matcher("ERROR").linear  # Python re: the runner isolates it in a worker
    monkeypatch.setenv("WATCHRUN_ENGINES", "pcre")
    with pytest.raises(ValueError, match="unknown engines"):
        Matcher("ERROR")


def test_identical_patterns_share_one_compiled_engine() -> None:
    a, b = Matcher("ERROR|FATAL", ["healthcheck"]), Matcher("ERROR|FATAL", ["healthcheck"])
    assert a._compiled is b._compiled
    assert Matcher("ERROR|FATAL")._compiled is not a._compiled  # other excludes


LITERAL_LINES = st.lists(st.sampled_from([
    b"ERROR x", b"error", b"Timeout 15ms", b"timeout 9 ms", b"CAF\xc3\x89 down", b"caf\xc3\xa9 up",
    b"[ERR] 42", b"err", b"info", b"", b"x\xffERRORx", b"fatal\xc3\xa9", b"FaTaL",
]), min_size=1, max_size=80)


@settings(max_examples=60, deadline=None)
@given(LITERAL_LINES, st.sampled_from(["error|fatal", r"timeout \d+ ?ms", "café", r"\[ERR\] \d",
                                       "(?i)ERR|xé", r"fatal(?-i:é)"]),
       st.booleans(), st.booleans())
def test_literal_first_search_equals_the_reference(lines: list[bytes], pattern: str, cs: bool,
                                                   ended: bool) -> None:
    """re2 and re+prefilter look for a pattern's required literals first (RE2 one literal at a
    time with ASCII case spelled out, `bytes.find` in the lowered chunk) and confirm the lines
    that hold one: still exactly the reference's lines, non-ASCII letters not folded, also for
    a last line without its newline."""
    data = b"\n".join(lines) + (b"\n" if ended else b"")
    want = reference(pattern, data, (), cs)
    for engine in ("re2", "re+prefilter"):
        if engine in AVAILABLE:
            assert Matcher(pattern, (), cs, engine=engine).find(data) == want, engine


@pytest.mark.skipif("hyperscan" not in AVAILABLE or "re2" not in AVAILABLE,
                    reason="needs hyperscan and google-re2")
def test_re2_is_loaded_only_when_a_chunk_needs_it() -> None:
    """A hyperscan matcher leaves google-re2 unloaded (2 ms of every start) until a chunk
    needs its per-line search (a pattern with `$`, which hyperscan scans hit by hit, hit every
    few bytes; a line of any other pattern is one hit) or its flood test; both still work."""
    script = (
        "import sys\n"
        "from watchrun.match.matcher import Matcher\n"
        "m = Matcher('ERROR|FATAL', ['healthcheck'])\n"
        "assert m.engine == 'hyperscan'\n"
        "assert m.find(b'ok\\nERROR a\\nERROR healthcheck\\n') == [(3, 10)]\n"
        "data = b'E\\n' + b'ERROR\\n' * 50000\n"
        "assert len(m.find(data)) == 50000\n"
        "print('re2' in sys.modules)\n"
        "assert len(Matcher('ERROR$', ['healthcheck']).find(data)) == 50000\n"
        "print('re2' in sys.modules)\n"
        "assert m.every_line(b'ERROR x\\nFATAL\\n' * 5000)\n"
    )
    assert fresh_python(script) == ["False", "True"]


@pytest.mark.skipif("hyperscan" not in AVAILABLE, reason="needs hyperscan")
def test_a_re2_found_but_not_importable_leaves_the_other_paths(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """google-re2 is looked for without importing it; when it is there but its import fails,
    the paths that would use it (the per-line search of a chunk with a hit every few bytes,
    the flood test) take the stdlib's instead, with the same answers."""
    from watchrun.match import scanning

    monkeypatch.setattr(scanning, "re2", lambda: None)
    m = Matcher("ERROR|FATAL|QUUX9", ["healthcheck"])  # (patterns no other test compiled)
    data = b"E\n" + b"ERROR\n" * 50000 + b"ERROR healthcheck\n"
    assert m.find(data) == [(2 + 6 * i, 7 + 6 * i) for i in range(50000)]
    flood = Matcher("ERROR|FATAL|QUUX8")  # no exclude: the flood test counts
    assert len(flood.find(b"ERROR x\nFATAL\n" * 5000)) == 10000
    assert flood.every_line(b"ERROR x\nFATAL\n" * 5000)
    assert not flood.every_line(b"ERROR x\nok\n" * 5000)


@pytest.mark.parametrize(("exclude", "linear"), [
    ((), True), (("healthcheck",), True), (("a.*c",), True),
    (("^(a+)+(?=c)",), False), (("ok", "x(?<=y)"), False),
])
def test_a_matcher_with_an_exclude_only_python_re_runs_is_not_linear(
        exclude: tuple[str, ...], linear: bool) -> None:
    """`linear` sends the watcher to its regex worker; a Python-re-only exclude had counted as
    linear (two bound methods compared with `is`) and was searched on the loop."""
    assert Matcher("b c", exclude).linear is linear
