"""`$` on CRLF logs (README, "Matching is done on bytes"): it matches before a `\\r` that ends a
line, in `pattern`, `exclude` and `gate.require`, in every engine and on every scan path (the
per-chunk scan, the dense per-line path, the every-line test); end to end through a real runner,
the Windows build log of the report passes its gate."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from liverunner import read_records, watchrun_bin, write_config
from test_once import base_env

from watchrun.match.matcher import Matcher, engines_available

AVAILABLE = engines_available()

ENDINGS = {"LF": b"\n", "CRLF": b"\r\n", "CRCRLF": b"\r\r\n"}

LINES = [
    b"build done\r\n",
    b"build done\n",
    b"build done\r\r\n",
    b"build done\rredrawn\n",  # a CR inside a line (a redraw) is data: `done$` is not there
    b"GET /health 200\r\n",
    b"GET /health 200\n",
    b"GET /health 2000\r\n",
    b"GET /health 200 \r\n",
    b"GET /api 500\r\r\n",
    b"\r\n",
    b"\n",
    b"build done\r",  # the last line, its CR the last byte read (no LF after it)
]
DATA = b"".join(LINES)

TABLE = [
    # (role, regex, lines it leaves; `exclude` rows exclude from pattern "GET|build|^")
    ("pattern", "done$", [b"build done\r", b"build done", b"build done\r"]),
    ("pattern", "^build done$", [b"build done\r", b"build done", b"build done\r"]),
    ("pattern", r"done\Z", [b"build done"]),  # `\Z` is the very end, as in Python
    ("pattern", r"done\r$", [b"build done\r", b"build done\r\r", b"build done\r"]),
    ("pattern", r"done\s*$", [b"build done\r", b"build done", b"build done\r\r",
                              b"build done\r"]),
    ("pattern", r"200$", [b"GET /health 200\r", b"GET /health 200"]),
    ("pattern", r"\d$", [b"GET /health 200\r", b"GET /health 200", b"GET /health 2000\r"]),
    ("pattern", "^$", [b"\r", b""]),
    ("pattern", "(?i)DONE$|500$", [b"build done\r", b"build done", b"build done\r"]),
    ("pattern", "(?:done|200)$", [b"build done\r", b"build done", b"GET /health 200\r",
                                  b"GET /health 200", b"build done\r"]),
    ("exclude", "/health 200$", [b"build done\r", b"build done", b"build done\r\r",
                                 b"build done\rredrawn", b"GET /health 2000\r",
                                 b"GET /health 200 \r", b"GET /api 500\r\r", b"\r", b"",
                                 b"build done\r"]),
    ("exclude", "^$", [x.rstrip(b"\n") for x in LINES if x not in (b"\r\n", b"\n")]),
    ("require", "^build done$", [b"build done\r", b"build done", b"build done\r"]),
]


def matcher(role: str, regex: str, engine: str) -> Matcher:
    """The Matcher the runner makes for the regex in that role (runtime/wiring.py)."""
    if role == "exclude":
        return Matcher("GET|build|^", [regex], engine=engine)
    return Matcher(regex, (), engine=engine)


def lines_found(m: Matcher, data: bytes) -> list[bytes]:
    return [data[s:e] for s, e in m.find(data)]


@pytest.mark.parametrize("engine", ["hyperscan", "re2", "re+prefilter", "re"])
@pytest.mark.parametrize(("role", "regex", "expected"), TABLE)
def test_dollar_matches_before_the_cr_that_ends_a_line(engine: str, role: str, regex: str,
                                                       expected: list[bytes]) -> None:
    if engine not in AVAILABLE:
        pytest.skip(f"{engine} not installed")
    try:
        m = matcher(role, regex, engine)
    except ValueError as exc:  # the prefilter needs a literal of 2+ bytes
        assert engine == "re+prefilter" and "no required literal" in str(exc)
        return
    assert lines_found(m, DATA) == expected
    for line in LINES:  # each line alone, as the reference sees it
        assert m.match_line(line) == (line.rstrip(b"\n") in expected), line
    lf = b"".join(x for x in LINES if b"\r" not in x)  # a chunk with no `\r` at all
    assert lines_found(m, lf) == [x for x in lf.split(b"\n")[:-1] if x in expected]


@pytest.mark.parametrize("engine", AVAILABLE)
def test_an_exclude_with_dollar_holds_on_the_dense_and_every_line_paths(engine: str) -> None:
    """A flood of CRLF lines matching a set of literals goes the per-line path and the
    every-line test, where the exclude is checked line by line: it excludes there too."""
    m = Matcher("GET", ["/health 200$"], engine=engine)
    flood = b"GET /api 500\r\n" * 400 + b"GET /health 200\r\n" * 100
    assert len(m.find(flood)) == 400  # (a chunk this dense turns the dense path on)
    assert m.find(flood) == [(14 * k, 14 * k + 13) for k in range(400)]
    assert not m.every_line(flood)
    assert m.every_line(b"GET /api 500\r\n" * 500)
    assert m.find(b"GET /health 200\r\n" * 500) == []


@pytest.mark.parametrize(("regex", "expected"), [
    ("(?<=done$)", [b"build done\r", b"build done", b"build done\r"]),  # fixed width kept
    ("(?<!done$)x|(?<=done)$", [b"build done\r", b"build done", b"build done\r"]),
    ("(?=done$)", [b"build done\r", b"build done", b"build done\r"]),
    (r"(200)$(?(1)|x)", [b"GET /health 200\r", b"GET /health 200"]),
])
def test_dollar_in_a_construct_only_python_runs(regex: str, expected: list[bytes]) -> None:
    for engine in ("re+prefilter", "re"):
        try:
            m = Matcher(regex, (), engine=engine)
        except ValueError as exc:
            assert engine == "re+prefilter" and "no required literal" in str(exc)
            continue
        assert lines_found(m, DATA) == expected, engine


# -- every engine against an oracle written apart from the matcher ------------------------------

ATOMS = ["a", "b", "1", r"\d", ".", r"\s", r"\r", "[^a]", "^", "$", r"\Z", r"\b", "a*", "(?:a|b)"]


def _regex(depth: int) -> st.SearchStrategy[str]:
    atom = st.sampled_from(ATOMS)
    if depth == 0:
        return atom
    sub = _regex(depth - 1)
    return st.one_of(
        atom,
        st.lists(sub, min_size=2, max_size=4).map("".join),
        st.lists(sub, min_size=2, max_size=3).map(lambda xs: "(?:" + "|".join(xs) + ")"),
        st.tuples(sub, st.sampled_from(["*", "?", "{1,2}"])).map(lambda t: f"(?:{t[0]}){t[1]}"),
    )


LINE = st.tuples(st.lists(st.sampled_from([b"a", b"b", b"1", b" ", b"\r", b"ab"]), max_size=5),
                 st.sampled_from(list(ENDINGS.values()))).map(lambda t: b"".join(t[0]) + t[1])


def oracle(regex: str, line: bytes) -> bool:
    """The documented rule, by hand: Python's search with each `$` as `\\r?\\Z` (the end,
    taking a final `\\r` with it)."""
    return re.search(regex.replace("$", r"(?:\r?\Z)").encode(), line) is not None


def expected_spans(regex: str, exclude: Sequence[str], data: bytes) -> list[tuple[int, int]]:
    out, pos = [], 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        line = data[pos:end]
        if oracle(regex, line) and not any(oracle(x, line) for x in exclude):
            out.append((pos, end))
        pos = end + 1
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_regex(3), st.lists(LINE, min_size=1, max_size=10), st.booleans(),
       st.sampled_from([(), ("a$",), (r"\d\s*$",)]))
def test_every_engine_puts_dollar_where_the_rule_says(regex: str, lines: list[bytes],
                                                      unterminated: bool,
                                                      exclude: tuple[str, ...]) -> None:
    data = b"".join(lines)
    if unterminated:
        data = data.removesuffix(b"\n")  # ending in a lone `\r` or in no line break at all
    want = expected_spans(regex, exclude, data)
    for engine in AVAILABLE:
        try:
            m = Matcher(regex, exclude, case_sensitive=True, engine=engine)
        except ValueError:
            continue  # the prefilter's missing literal; RE2 and hyperscan: `$` before more
        assert m.find(data) == want, (engine, regex, exclude)


# -- end to end: the report's build log, through a real runner ----------------------------------


@pytest.mark.parametrize("engine", AVAILABLE)
def test_a_crlf_build_log_passes_its_anchored_gate(tmp_path: Path, engine: str) -> None:
    """The report: on a build log a Windows tool wrote, `exclude: ["/health 200$"]` excluded
    nothing and `require: "^build done$"` "never appeared" (exit 1) though `logs` showed the
    line. The same for a command's CRLF output."""
    (tmp_path / "build.log").write_bytes(b"step 1 ok\r\nGET /health 200\r\nbuild done\r\n")
    gate = {"maxMatches": 0, "require": "^build done$"}
    cfg = write_config(tmp_path, {"watchers": [
        {"id": "build", "path": "build.log", "pattern": "GET ", "exclude": ["/health 200$"],
         "gate": gate},
        {"id": "tool", "command": r"printf 'GET /health 200\r\nbuild done\r\n'",
         "pattern": "GET ", "exclude": ["/health 200$"], "gate": gate},
        {"id": "errors", "path": "build.log", "pattern": "ok$"},
    ]})
    run = subprocess.run([watchrun_bin(), "run", "--once", "-c", str(cfg)], cwd=tmp_path,
                         env=base_env(WATCHRUN_ENGINES=engine), capture_output=True, text=True,
                         timeout=60, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "watchrun: passed: all 2 gates hold" in run.stdout
    assert "never appeared" not in run.stdout
    records = read_records(tmp_path / ".watchrun" / "watchers" / "errors.jsonl")
    found = [(r["line"], r.get("raw")) for r in records if r["kind"] == "match"]
    assert found == [("step 1 ok", "step 1 ok\r")]  # `line` as shown, `raw` as read
    logs = subprocess.run([watchrun_bin(), "logs", "build", "--json", "-c", str(cfg)],
                          cwd=tmp_path, env=base_env(), capture_output=True, text=True,
                          timeout=60, check=True)  # what a user looks at: the line `$` ends
    assert json.loads(logs.stdout)["lines"] == ["step 1 ok", "GET /health 200", "build done"]
