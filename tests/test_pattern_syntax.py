"""Pattern text before Python's parser (`match/syntax.py`): POSIX bracket classes (`[[:alpha:]]`,
as grep and RE2 read them) were taken by Python `re` as a set of `[`, `:`, `a`, `l`, … and a
literal `]` (no match, a FutureWarning on stderr); a pattern nested ~300 groups deep ended
`validate` in a RecursionError traceback (exit 1) and the MCP tool in an internal error. Now
every engine reads POSIX classes as grep does (ASCII), and too deep a pattern is a config
error (exit 2) naming the depth allowed."""

from __future__ import annotations

import json
import re
import string
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from inproc import inproc

from watchrun.match.matcher import Matcher, engines_available
from watchrun.match.syntax import MAX_DEPTH, POSIX_CLASSES, prepare

GREP = {
    "alnum": str.isalnum, "alpha": str.isalpha, "digit": str.isdigit,
    "lower": str.islower, "upper": str.isupper, "xdigit": lambda c: c in string.hexdigits,
    "space": lambda c: c in " \t\n\v\f\r", "blank": lambda c: c in " \t",
    "punct": lambda c: c in string.punctuation, "print": lambda c: " " <= c <= "~",
    "graph": lambda c: "!" <= c <= "~", "cntrl": lambda c: ord(c) < 32 or ord(c) == 127,
    "word": lambda c: c.isalnum() or c == "_", "ascii": lambda c: True,
}
"""What each class holds in grep's C locale, over the ASCII characters."""

ASCII = [chr(i) for i in range(128)]


def test_every_class_of_grep_is_known() -> None:
    assert set(POSIX_CLASSES) == set(GREP)


@pytest.mark.parametrize("name", sorted(GREP))
@pytest.mark.parametrize("negated", [False, True])
def test_each_class_holds_what_grep_s_does_in_every_engine(name: str, negated: bool) -> None:
    pattern = f"^[{'^' if negated else ''}[:{name}:]]$"
    expected = [c for c in ASCII if GREP[name](c) != negated and c != "\n"]
    data = "\n".join(ASCII).encode() + b"\n"
    for engine in engines_available():
        if engine == "re+prefilter":
            continue  # (only for patterns with literals)
        matcher = Matcher(pattern, (), True, engine=engine)
        found = [data[s:e].decode() for s, e in matcher.find(data)]
        assert found == expected, (engine, pattern)


@pytest.mark.parametrize(("pattern", "written"), [
    ("[[:alpha:]]+[[:digit:]]", "[A-Za-z]+[0-9]"),
    ("[^[:space:]]", "[^\\t\\n\\x0b\\x0c\\r ]"),
    ("[]a[:digit:]]", "[]a0-9]"),  # a `]` first is a member
    ("[_[:alnum:]-]", "[_0-9A-Za-z-]"),
    ("\\[[:alpha:]\\]", "\\[[:alpha:]\\]"),  # outside brackets: a plain class, as in grep
    ("[a[:x] y :]", "[a[:x] y :]"),  # not a name
    ("(?#[[:nope:]])x", "(?#[[:nope:]])x"),  # a comment
    ("\\[[:digit:]]", "\\[[:digit:]]"),
])
def test_rewrites(pattern: str, written: str) -> None:
    assert prepare(pattern) == written


@pytest.mark.parametrize(("pattern", "message"), [
    ("[[:letters:]]", "unknown POSIX class [:letters:]; known: [:alnum:] [:alpha:]"),
    ("[[:^alpha:]]", "the negated POSIX class [:^alpha:] is not supported; write a negated "
                     "class instead: [^[:alpha:]]"),
    ("(" * (MAX_DEPTH + 1) + ")" * (MAX_DEPTH + 1),
     f"groups are nested {MAX_DEPTH + 1} deep; at most {MAX_DEPTH} are allowed"),
    ("(?:a|(" * 300 + ")" * 600, "groups are nested 600 deep"),
])
def test_refusals(pattern: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        Matcher(pattern)


@given(st.text(st.characters(codec="ascii"), max_size=40))
def test_text_without_a_class_name_is_kept(pattern: str) -> None:
    if "[:" in pattern or pattern.count("(") > MAX_DEPTH:
        return
    assert prepare(pattern) == pattern


@pytest.mark.parametrize("depth", [MAX_DEPTH, 300, 5000])
def test_depth_in_every_engine_and_past_it_a_config_error(tmp_path: Path, depth: int) -> None:
    pattern = "(" * depth + "ERROR" + ")" * depth
    (tmp_path / "app.log").write_text("x ERROR y\n")
    config = tmp_path / "watch.json"
    config.write_text(json.dumps({"watchers": [{"id": "w", "path": "app.log",
                                                "pattern": pattern}]}))
    p = inproc(tmp_path, "validate", "-c", str(config))  # (in this process)
    assert "Traceback" not in p.stderr + p.stdout
    if depth <= MAX_DEPTH:
        assert p.returncode == 0, p.stderr
        for engine in engines_available():
            assert Matcher(pattern, engine=engine).find(b"x ERROR y\n") == [(0, 9)], engine
    else:
        assert p.returncode == 2, p.stderr
        said = p.stdout + p.stderr
        assert "watchers[0].pattern: invalid regex" in said
        assert f"groups are nested {depth} deep; at most {MAX_DEPTH} are allowed" in said
        assert f"… ({len(pattern)} characters)" in said and len(said) < 600  # not all of it


def test_a_posix_class_matches_in_a_run_without_a_warning(tmp_path: Path) -> None:
    (tmp_path / "app.log").write_text("id=abc\nid=12\nid=AB7\nid=AB7x\n")
    config = tmp_path / "watch.json"
    config.write_text(json.dumps({"watchers": [{
        "id": "w", "path": "app.log", "caseSensitive": True,
        "pattern": "id=[[:upper:]]+[[:digit:]]", "exclude": ["[[:lower:]]$"]}]}))
    for command in (["validate"], ["run", "--once", "--output-dir", str(tmp_path / "out")]):
        p = subprocess.run([sys.executable, "-W", "default", "-m", "watchrun", *command, "-c",
                            str(config)], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert "Warning" not in p.stderr, p.stderr
    records = [json.loads(line) for line in (tmp_path / "out/watchers/w.jsonl").open()]
    assert [r["line"] for r in records if r["kind"] == "match"] == ["id=AB7"]
