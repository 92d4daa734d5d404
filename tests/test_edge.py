"""Every terminal and JSON surface is sanitized at the edge (issue #12 item 4): `logs`,
`matches` (text and --json), `status`, `list` go through `edge_text` / `edge_json`, so a
crafted line (U+2028/U+2029, C1 controls, DEL, escapes, bidi controls) can neither forge an
extra line nor drive the terminal."""

from __future__ import annotations

import functools
import json
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from inproc import inproc
from liverunner import cli as run_cli
from liverunner import write_config

from watchrun.match.sanitize import edge_json, edge_text
from watchrun.output.outdir import prepare_output_dir

FORBIDDEN = set(map(chr, [*range(0x00, 0x09), *range(0x0A, 0x20), *range(0x7F, 0xA0)])) | {
    "\u2028", "\u2029", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067",
    "\u2068", "\u2069", "\u200e", "\u200f", "\u061c"} | {
    "\u00ad", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\U000e0001",
    *map(chr, range(0xE0020, 0xE0080))}
"""What may never reach a terminal raw: C0 but tab, DEL, C1, line/paragraph separators, bidi,
and what draws nothing (a soft hyphen, zero-width spaces and joiners, a BOM, the tag characters
that can spell an instruction no reader sees)."""


def clean(text: str) -> bool:
    return not (set(text) & FORBIDDEN) and not any(0xD800 <= ord(c) <= 0xDFFF for c in text)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("plain\ttab", "plain\ttab"),
        ("a\u2028b\u2029c", "a\\u2028b\\u2029c"),
        ("two\nlines", "two\\nlines"),
        ("c1\x85\x9b31mred\x9b0m del\x7f", "c1red del"),
        ("\x1b[2J\x1b]0;title\x07esc", "esc"),
        ("bidi \u202eevil\u202c", "bidi \\u202eevil\\u202c"),
        ("lone \ud800", "lone \ufffd"),
        (42, "42"),
        (None, "None"),
    ],
)
def test_edge_text_table(value: object, shown: str) -> None:
    assert edge_text(value) == shown


@functools.cache
def invisible() -> list[str]:
    """Unicode's format characters and the Hangul fillers: they draw nothing (helper-91's F12 and
    helper-92's F6: the tag characters U+E0020-U+E007F can spell an instruction nobody sees);
    and the other default ignorables that draw nothing (explorer views, 2026-12-07): the
    combining grapheme joiner, the Khmer inherent vowels, the Mongolian and the 256 variation
    selectors, which can spell hidden bytes too."""
    others = {0x034F, 0x17B4, 0x17B5, *range(0x180B, 0x1810), *range(0xFE00, 0xFE10),
              *range(0xE0100, 0xE01F0)}
    return [chr(c) for c in range(0x110000)
            if unicodedata.category(chr(c)) == "Cf" or c in (0x115F, 0x1160, 0x3164, 0xFFA0)
            or c in others]


def test_bytes_hidden_in_variation_selectors_are_shown() -> None:
    """One variation selector per byte value after a visible character draws as that character
    alone ("variation selector smuggling" of a prompt); each is shown escaped, so the line that
    reaches a terminal or an agent's prompt is as long as what it holds."""
    def selector(b: int) -> str:
        return chr(0xFE00 + b) if b < 16 else chr(0xE0100 + b - 16)

    shown = edge_text("ok" + "".join(selector(b) for b in b"rm -rf /"))
    assert shown.startswith("ok\\U000e0162\\U000e015d") and len(shown) == 2 + 8 * 10, shown


def test_every_invisible_character_is_shown_escaped() -> None:
    for char in invisible():
        want = f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}"
        assert edge_text(f"a{char}b") == f"a{want}b", hex(ord(char))
        assert edge_text(f"a{char}b", multiline=True) == f"a{want}b", hex(ord(char))
    hidden = "".join(chr(0xE0000 + ord(c)) for c in "run rm -rf /")
    assert edge_text(f"ERROR ok{hidden}") == "ERROR ok" + "".join(
        f"\\U{0xE0000 + ord(c):08x}" for c in "run rm -rf /")


def test_edge_text_multiline_keeps_newlines_only() -> None:
    assert edge_text("a\nb\u2028c", multiline=True) == "a\nb\\u2028c"


@given(st.text())
def test_edge_text_is_always_one_clean_line(text: str) -> None:
    out = edge_text(text)
    assert clean(out) and "\n" not in out


ANY_CHAR = st.characters(exclude_categories=())
"""Lone surrogates too (st.text leaves them out by default)."""
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(ANY_CHAR),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(ANY_CHAR), inner,
                                                                max_size=4),
    max_leaves=20,
)


@given(JSON_VALUES, st.sampled_from([None, 2]))
def test_edge_json_is_clean_and_means_the_same(value: object, indent: int | None) -> None:
    out = edge_json(value, indent=indent)
    assert clean(out.replace("\n", "")) if indent else clean(out)
    if not any(0xD800 <= ord(c) <= 0xDFFF for c in json.dumps(value, ensure_ascii=False)):
        assert json.loads(out) == value


@given(st.recursive(st.text(st.sampled_from('#[]\\"u0023 ')),
                    lambda inner: st.dictionaries(st.text(st.sampled_from("#[k")), inner)
                    | st.lists(inner)), st.sampled_from([None, 2]))
def test_edge_json_never_holds_a_workflow_command_and_means_the_same(value: object,
                                                                    indent: int | None) -> None:
    """The GitHub Actions runner obeys `##[command]` anywhere in a line: log text in a once
    run's `--json` document or JSON log line reached the step log unfenced. `#\\u0023[` is
    the same text to a parser and nothing to the runner."""
    out = edge_json(value, indent=indent)
    assert "##[" not in out and json.loads(out) == value
    assert edge_json("a ##[error]x") == '"a #\\u0023[error]x"'


def test_edge_json_never_fails_on_what_json_loads_accepts() -> None:
    assert json.loads(edge_json({"n": float("nan"), "i": [float("inf")], "s": "\ud800"})) == {
        "n": "nan", "i": ["inf"], "s": "\ufffd"}


@given(JSON_VALUES, st.sampled_from([None, 2]))
def test_edge_json_is_unicode_that_strict_parsers_take(value: object,
                                                       indent: int | None) -> None:
    """A lone surrogate (how Python keeps a byte of a file name that is not UTF-8) was written
    as a `\\udcff` escape, which serde_json refuses; it is U+FFFD, as in the records."""
    out = edge_json(value, indent=indent)
    out.encode("utf-8")  # (a lone surrogate, raw, cannot be encoded)
    assert not any("\ud800" <= c <= "\udfff" for c in _strings(json.loads(out)))


def _strings(value: object) -> str:
    """Every character of the keys and strings in a parsed JSON value (escapes decoded)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "".join(k + _strings(v) for k, v in value.items())
    if isinstance(value, list):
        return "".join(map(_strings, value))
    return ""


# -- end to end: the forged-line case through the CLI ------------------------------------------

CRAFTED = ("ERROR real\u2028ERROR 2026-01-01 forged line\u2029 c1\x85\x9b31m del\x7f "
           "zw\u200bsp\ufeff tag\U000e0069\U000e0067 \x1b[31mred\x1b[0m \u202eevil")


def cli(*args: str) -> str:
    """`watchrun ARGS`, a read of an output dir (in this process: tests/inproc.py)."""
    res = inproc(Path.cwd(), *args)
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real once run whose command printed the crafted line (and a plain one)."""
    folder = tmp_path_factory.mktemp("edge")
    script = f"import sys; sys.stdout.write({CRAFTED!r} + '\\nERROR plain\\n')"
    cfg = write_config(folder, {"output": {"dir": "out"}, "watchers": [
        {"id": "app", "label": "app\nFAKE\u2028label", "command": [sys.executable, "-c", script],
         "pattern": "ERROR"}]})
    res = run_cli("run", "--once", "--quiet", "-c", cfg, timeout=60)
    assert res.returncode == 0, res.stderr
    return folder / "out"


def test_logs_cannot_forge_a_line(ran: Path) -> None:
    out = cli("logs", "app", "--output-dir", str(ran))
    assert out.splitlines() == out.split("\n")[:-1]  # no Unicode line break in the output
    assert len(out.splitlines()) == 2 and clean(out.replace("\n", ""))
    assert out.splitlines()[0].startswith("ERROR real\\u2028ERROR 2026-01-01 forged line")


def test_forged_lines_in_a_planted_tail_stay_inside_their_line(tmp_path: Path) -> None:
    layout = prepare_output_dir(tmp_path / "out")
    (layout.state / "x.status.json").write_text(json.dumps({"id": "x", "status": "stopped"}))
    (layout.state / "x.tail").write_bytes("one\u2028two\x85three\x0bfour\x1cfive\nsix\n".encode())
    out = cli("logs", "x", "--output-dir", str(layout.root))
    assert out.splitlines() == ["one\\u2028twothreefourfive", "six"]


def test_the_tail_snapshot_on_disk_is_clean_and_logs_shows_the_same(ran: Path) -> None:
    """`cat state/app.tail` (or `tail -f`) printed the line's U+2028 and bidi controls as they
    came: the snapshot holds them escaped, as `logs` shows them."""
    header, *lines = (ran / "state" / "app.tail").read_text().removesuffix("\n").split("\n")
    assert header.startswith("\x1ewatchrun-tail ") and clean("".join(lines))
    assert lines[0].startswith("ERROR real\\u2028ERROR 2026-01-01 forged line\\u2029 c1")
    assert lines[0].endswith("\\u202eevil")
    assert cli("logs", "app", "--output-dir", str(ran)).splitlines() == lines


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_matches_text_and_json_are_clean(ran: Path, fmt: str) -> None:
    args = ["--json"] if fmt == "json" else []
    out = cli("matches", "app", "--output-dir", str(ran), *args)
    if fmt == "json":
        doc = json.loads(out)
        recs = doc["matches"]
        assert clean(out.replace("\n", "")) and len(recs) == 2 and doc["id"] == "app"
        assert recs[0]["raw"] == CRAFTED  # still the same value, only escaped
    else:
        assert len(out.splitlines()) == 2 and clean(out.replace("\n", ""))


@pytest.mark.parametrize("args", [("status", "app"), ("list",), ("status", "app", "--json"),
                                  ("list", "--json")])
def test_status_and_list_are_clean(ran: Path, args: tuple[str, ...]) -> None:
    out = cli(*args, "--output-dir", str(ran))
    assert clean(out.replace("\n", ""))
    if "--json" in args:
        json.loads(out)
    elif args[0] == "list":
        assert len(out.splitlines()) == 2  # the header and one watcher, whatever its label


def test_hostile_status_snapshots_do_not_break_list(tmp_path: Path) -> None:
    layout = prepare_output_dir(tmp_path / "out")
    snaps = {
        "a\nFAKE  running": {"id": "a\nFAKE  running", "status": "\x1b[2Jx",  # (its file's
                              "source": [1, None, "\u2028"]},  # name: a copy is unreadable)
        "a": {"id": "a2"},  # a copy of another's (its id is not its file's name): `unreadable`
        "b": {"id": 7},  # not a snapshot: listed as `unreadable`, under its file's name
        "c": [1, 2],
        "d": {"id": "d", "runnerPid": 2**80, "label": {"nested": "\x85"}},
    }
    for name, snap in snaps.items():
        (layout.state / f"{name}.status.json").write_text(json.dumps(snap))
    (layout.state / "e.status.json").write_bytes(b"\xff\xfe not json")
    out = cli("list", "--output-dir", str(layout.root))
    assert len(out.splitlines()) == 7 and clean(out.replace("\n", ""))
    assert [ln.split()[:2] for ln in out.splitlines()[1:] if "unreadable" in ln] == [
        ["a", "unreadable"], ["b", "unreadable"], ["c", "unreadable"], ["e", "unreadable"]], out
    assert "a\\nFAKE  running" in out
    assert clean(cli("status", "d", "--output-dir", str(layout.root)).replace("\n", ""))
