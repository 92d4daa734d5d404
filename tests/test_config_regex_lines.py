"""Regexes judged against what a line can be: one that matches every line, or no line, or one
case only, where the user cannot have meant it (gate.md findings 11, 12, 15)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from liverunner import cli

from watchrun.config import LoadResult, load_config


def load(tmp_path: Path, text: str) -> LoadResult:
    path = tmp_path / "w.yaml"
    path.write_text(text, encoding="utf-8")
    return load_config([path], env={})


def said(result: LoadResult) -> list[tuple[str, str, str]]:
    return [(d.severity, d.path, d.message) for d in result.diagnostics]


EVERY = ("matches the empty string, so it ", "(an empty alternative? `a|` and `(?:a)?` match "
         "where `a` does not)")


@pytest.mark.parametrize("rx", ["healthcheck|", "(?:x)?", "|x", "^|x", "$", "x*"])
def test_an_exclude_matching_the_empty_string_is_refused(tmp_path: Path, rx: str) -> None:
    result = load(tmp_path, "watchers:\n  - {id: x, path: app.log, pattern: ERROR, exclude: "
                  f"[ok, '{rx}'], gate: {{maxMatches: 0}}}}\n")
    assert result.config is None
    assert said(result) == [("error", "watchers[0].exclude[1]",
                             f'"{rx}" {EVERY[0]}excludes every line {EVERY[1]}')]


@pytest.mark.parametrize("rx", ["tests passed|", "(?:x)?"])
def test_a_require_matching_the_empty_string_is_refused(tmp_path: Path, rx: str) -> None:
    result = load(tmp_path, "watchers:\n  - {id: r, command: [echo, hi], pattern: 'warning:', "
                  f"gate: {{require: '{rx}'}}}}\n")
    assert said(result) == [("error", "watchers[0].gate.require",
                             f'"{rx}" {EVERY[0]}is satisfied by any line: the gate could '
                             f"never be crossed by it {EVERY[1]}")]


def test_a_pattern_matching_every_line_by_a_slip_is_a_warning(tmp_path: Path) -> None:
    result = load(tmp_path, "watchers:\n  - {id: p, path: app.log, pattern: 'ERROR|'}\n")
    assert result.config is not None
    assert said(result) == [("warning", "watchers[0].pattern",
                             f'"ERROR|" {EVERY[0]}matches every line {EVERY[1]}; write `^` if '
                             "every line is meant")]


@pytest.mark.parametrize("rx", ["^", "$", "^\\s*$", "^$", "^[[:space:]]*$", "\\b"])
def test_what_matches_some_lines_or_every_line_on_purpose_passes(tmp_path: Path,
                                                                   rx: str) -> None:
    result = load(tmp_path, f"watchers:\n  - {{id: p, path: app.log, pattern: '{rx}', "
                  "exclude: ['^\\s*$', '^$'], gate: {require: '^$'}}\n")
    assert said(result) == []


BREAK = ("which no line holds (the log is split into lines at line breaks), so it can never "
         "match there")


@pytest.mark.parametrize("key", ["pattern", "exclude[0]", "gate.require"])
def test_a_raw_line_break_in_a_regex_is_refused(tmp_path: Path, key: str) -> None:
    block = "|\n      Traceback\n"  # YAML keeps the block's last line break
    deeper = block.replace("  ", "    ")
    item = {"pattern": f"    pattern: {block}",
            "exclude[0]": f"    pattern: x\n    exclude:\n      - {deeper}",
            "gate.require": f"    pattern: x\n    gate:\n      require: {deeper}"}[key]
    result = load(tmp_path, f"watchers:\n  - id: a\n    path: app.log\n{item}"
                  + ("    gate: {maxMatches: 0}\n" if key != "gate.require" else ""))
    assert said(result) == [("error", f"watchers[0].{key}",
                             f'"Traceback\\n" holds a line break (U+000A) as itself, {BREAK}; '
                             "a YAML `|` or `>` block scalar ends with one: write `|-`, `>-` "
                             "or a plain scalar")]


def test_an_escaped_line_break_is_a_warning(tmp_path: Path) -> None:
    result = load(tmp_path, "watchers:\n  - {id: b, path: app.log, pattern: 'Traceback\\n|x', "
                  "exclude: ['a\\x0a'], gate: {maxMatches: 0}}\n")
    tail = f"{BREAK}; match the line's end with `$`"
    assert said(result) == [
        ("warning", "watchers[0].pattern", f'"Traceback\\\\n|x" needs a line break (`\\n`) '
         f"there, {tail}"),
        ("warning", "watchers[0].exclude[0]", f'"a\\\\x0a" needs a line break (`\\n`) there, '
         f"{tail}")]


def test_a_verbose_regex_may_span_lines(tmp_path: Path) -> None:
    result = load(tmp_path, "watchers:\n  - id: v\n    path: app.log\n    pattern: |\n"
                  "      (?x) Traceback   # the header\n      \\s \\(most\n")
    assert said(result) == []


@pytest.mark.parametrize(("rx", "word", "forms"), [
    ("ошибка", "ошибка", "ошибка|ОШИБКА"),
    ("task (échec|failed)", "échec", "échec|ÉCHEC"),
    ("Ошибка", "Ошибка", "Ошибка|ОШИБКА|ошибка"),
    ("\\u043e\\u0448\\u0438\\u0431\\u043a\\u0430", "ошибка", "ошибка|ОШИБКА"),
    ("\\xe9chec", "échec", "échec|ÉCHEC"),
    ("\\351chec", "échec", "échec|ÉCHEC")])  # (an octal escape means the character too)
def test_a_caseless_regex_with_a_non_ascii_letter_is_a_warning(
        tmp_path: Path, rx: str, word: str, forms: str) -> None:
    letter = word[0]
    result = load(tmp_path, f"watchers:\n  - {{id: ru, path: app.log, pattern: '{rx}', "
                  "gate: {maxMatches: 0}}\n")
    assert said(result) == [("warning", "watchers[0].pattern", f"`{word}` matches only "
                             "as written: case-insensitive matching folds ASCII letters only, "
                             f"and `{letter}` is not one; write `(?:{forms})` to match the "
                             "other case too (or match case-sensitively, if only this case is "
                             "meant)")]


@pytest.mark.parametrize("extra", ["caseSensitive: true", "exclude: ['(?:ошибка|ОШИБКА)']",
                                   "gate: {require: '错误 \\wok'}"])
def test_no_case_warning_where_the_case_is_settled(tmp_path: Path, extra: str) -> None:
    rx = "ошибка" if "caseSensitive" in extra else "x"
    result = load(tmp_path, f"watchers:\n  - {{id: ru, path: app.log, pattern: '{rx}', "
                  f"{extra}}}\n")
    assert said(result) == []


def test_the_every_line_check_never_stalls_on_a_hostile_regex(tmp_path: Path) -> None:
    """Probe lines searched by Python `re` took 11 s on 8 characters for this exclude, and the
    time doubles with each one: `validate` of an untrusted config would never end."""
    hostile = "(?:(?:(?:(?:_|\\x01)*)*)*)*!|^"
    (tmp_path / "w.yaml").write_text(
        f"watchers:\n  - {{id: h, path: app.log, pattern: x, exclude: ['{hostile}']}}\n",
        encoding="utf-8")
    done = cli("validate", "-c", tmp_path / "w.yaml", timeout=30)
    assert done.returncode == 2
    assert (f"watchers[0].exclude[0]: {json.dumps(hostile)} matches the empty string, so it "
            "excludes every line") in done.stdout + done.stderr


@pytest.mark.parametrize(("key", "char", "name"), [
    ("pattern", "\u200b", "ZERO WIDTH SPACE"),
    ("exclude[0]", "\u202e", "RIGHT-TO-LEFT OVERRIDE"),
    ("gate.require", "\ufeff", "ZERO WIDTH NO-BREAK SPACE")])
def test_an_invisible_character_in_a_regex_is_a_warning(tmp_path: Path, key: str, char: str,
                                                        name: str) -> None:
    """(explore-encodings F6) `exclude: ["health<ZWSP>check"]` never excluded and `require:
    "done<BOM>"` could never be met, while the config looked right in an editor; `validate
    --strict` said nothing."""
    rx = f"health{char}check"
    item = {"pattern": f"pattern: '{rx}'", "exclude[0]": f"pattern: x, exclude: ['{rx}']",
            "gate.require": f"pattern: x, gate: {{require: '{rx}'}}"}[key]
    result = load(tmp_path, f"watchers:\n  - {{id: z, path: app.log, {item}}}\n")
    assert result.config is not None
    code = f"{ord(char):04x}"
    assert said(result) == [("warning", f"watchers[0].{key}", f'"health\\u{code}check" holds '
                             f"U+{code.upper()} ({name}), an invisible character, as itself: "
                             "the pattern does not match what it looks like; delete it, or "
                             f"write the escape `\\u{code}` (in YAML single quotes) if it is "
                             "meant")]
    strict = cli("validate", "--strict", "-c", tmp_path / "w.yaml")
    assert strict.returncode == 2, strict.stdout + strict.stderr


def test_the_escape_of_an_invisible_character_passes(tmp_path: Path) -> None:
    result = load(tmp_path, "watchers:\n  - {id: z, path: app.log, pattern: 'a\\u200bb'}\n")
    assert said(result) == []


def test_a_pattern_of_bytes_that_are_not_utf8_names_the_byte(tmp_path: Path) -> None:
    """(explore-encodings F7) `PAT=$'caf\\xe9'` from a Latin-1 terminal, through `${PAT}`:
    Python's "'utf-8' codec can't encode character '\\udce9' …: surrogates not allowed" was the
    whole answer."""
    path = tmp_path / "w.yaml"
    path.write_text("watchers:\n  - {id: l, path: app.log, pattern: '${PAT}'}\n")
    result = load_config([path], env={"PAT": os.fsdecode(b"caf\xe9")})
    assert result.config is None
    assert said(result) == [("error", "watchers[0].pattern", "invalid regex 'caf\\udce9': holds "
                             "the byte 0xE9 at character 3, which is not UTF-8 text (a Latin-1 "
                             "terminal or variable?); write the pattern in UTF-8")]
