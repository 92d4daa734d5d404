"""Whether a pattern matches the empty line is told from its parse tree (match/nullable.py):
`re.search(b"")` on `(?:|)` forty times then `\\b` backtracked 2^40 ways, and `watchrun
validate` (every config load, every matcher) never ended. The tree's answer is Python's own,
checked against `search(b"")` on every construct and on random small patterns."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from liverunner import cli, write_config

from watchrun.match.nullable import matches_empty

_P = importlib.import_module("re._parser")
HOSTILE = "(?:|)" * 40 + r"\b"


def python_says(pattern: str) -> bool:
    return re.compile(pattern.encode()).search(b"") is not None


@pytest.mark.parametrize("pattern", [
    "", "^$", "^", "$", r"\A\Z", r"\b", r"\B", "a", "a?", "a*", "a+", ".", "[^a]", "x{0}",
    "(?:){3}", "(?:a|)(?:b|)", "(?i)a?", "(?m)^$", r"(a)?\1", r"(a?)\1", r"(?:()|a)\1",
    r"(|a){2,}\1", "(?=a)", "(?!a)", "(?<=)", "(?<!a)", "(a)?(?(1)x|)", "(a)?(?(1)|x)",
    "()(?(1)|x)", "(?>a|)", "a*+", "(?:|)" * 12 + r"\b", "(?:|)" * 12 + "$",
])
def test_the_tree_says_what_python_finds_in_an_empty_line(pattern: str) -> None:
    assert matches_empty(_P.parse(pattern.encode())) is python_says(pattern)


_ATOMS = st.sampled_from(["a", "b", "", ".", r"\b", r"\B", "^", "$", "[ab]", r"\1"])


def _grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    one = st.tuples(inner, inner)
    return st.one_of(
        inner.map(lambda x: f"(?:{x})"), inner.map(lambda x: f"({x})"),
        inner.map(lambda x: f"(?={x})"), inner.map(lambda x: f"(?!{x})"),
        inner.map(lambda x: f"(?>{x})"), inner.map(lambda x: f"(?:{x})?"),
        inner.map(lambda x: f"(?:{x})*"), inner.map(lambda x: f"(?:{x})+"),
        inner.map(lambda x: f"(?:{x}){{2}}"), inner.map(lambda x: f"(?:{x}){{0,2}}"),
        inner.map(lambda x: f"(?:{x})*+"),
        one.map(lambda xy: f"{xy[0]}|{xy[1]}"), one.map(lambda xy: f"{xy[0]}{xy[1]}"),
        one.map(lambda xy: f"(?(1){xy[0]}|{xy[1]})"))


@settings(max_examples=400, deadline=None)
@given(st.recursive(_ATOMS, _grow, max_leaves=6))
def test_on_random_patterns_the_tree_agrees_with_python(pattern: str) -> None:
    try:
        tree = _P.parse(pattern.encode())
        expected = python_says(pattern)
    except re.error:
        return  # (a reference to a group that is not there yet, a look-behind of no fixed width)
    assert matches_empty(tree) is expected, pattern


def test_validate_of_such_a_pattern_ends(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"watchers": [
        {"id": "a", "path": "a.log", "pattern": HOSTILE, "exclude": ["x" + HOSTILE]}]})
    res = cli("validate", "-c", config)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "valid — 1 watcher" in res.stdout
