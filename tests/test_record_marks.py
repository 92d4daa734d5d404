"""The files a person `cat`s or `tail -f`s (the JSONL records, the status snapshots) carry no
raw bidi control or line separator, and a record's text fields (a file's `path`, from a file
name others chose or a `${VAR}`) carry no control character (a name's are shown escaped):
SPEC §6 for every text field, not only `line`. Checked through a real `watchrun run --once` on
real files."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from liverunner import cli, read_records, write_config

from watchrun.match.plain import plain_text, plain_texts
from watchrun.output import jsonl
from watchrun.output.jsonl import dumps

MARKS = ["\u2028", "\u2029", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066",
         "\u2067", "\u2068", "\u2069", "\u200e", "\u200f", "\u061c"]
"""Line/paragraph separators and bidi controls: they reorder or break what a terminal shows."""
MARK_BYTES = [m.encode() for m in MARKS]

DIR = "d\u202eir\x1b[31mRED\x1b]0;title\x07"
NAME = "app\u2066x\x1b]8;;http:evil\x07link\x1b]8;;\x07\x9b2J.log"


def _run(folder: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOGF": str(folder / DIR / NAME)}
    return cli("run", "--once", cwd=folder, env=env)


@pytest.fixture
def ran(tmp_path: Path) -> Path:
    (tmp_path / DIR).mkdir()
    (tmp_path / DIR / NAME).write_bytes(
        "ERROR a \u202eevil\u202c b \u2066iso\u2069 c \u200f d \u061c e \u2028 f\n".encode()
        + b"ERROR plain\n")
    write_config(tmp_path, {"output": {"dir": "out"}, "watchers": [
        {"id": "f", "path": "${LOGF}", "pattern": "ERROR", "fromStart": True,
         "label": "lab\u202eel ${LOGF}"},
        {"id": "c", "command": ["printf", "ERROR c \u202eevil\u202c \u2067x\u2069\\n"],
         "pattern": "ERROR"}]})
    done = _run(tmp_path)
    assert done.returncode == 0, done.stderr
    return tmp_path / "out"


def test_record_files_and_snapshots_hold_no_raw_mark(ran: Path) -> None:
    # before: `tail -f out/watchers/f.jsonl` reordered the record (U+202E raw in `line`), and
    # the snapshot held the label's U+202E and U+2028 raw
    files = [*sorted((ran / "watchers").glob("*.jsonl")),
             *sorted((ran / "state").glob("*.status.json"))]
    assert len(files) == 4
    for path in files:
        data = path.read_bytes()
        assert not [m for m in MARK_BYTES if m in data], (path.name, data[:400])
    lines = [r["line"] for r in read_records(ran / "watchers" / "f.jsonl") if r["kind"] == "match"]
    assert lines[0] == "ERROR a \u202eevil\u202c b \u2066iso\u2069 c \u200f d \u061c e \u2028 f"
    status = json.loads((ran / "state" / "f.status.json").read_bytes())
    assert status["label"].startswith("lab\u202eel ")  # the same value, only escaped


def test_a_hostile_file_name_is_sanitized_in_every_record_and_snapshot(ran: Path) -> None:
    # before: "path": "…/d\u202eir\u001b[31mRED\u001b]0;title\u0007/app…" in match, start
    # and error records and the snapshot's `source`; `jq -r .path` drove the terminal
    records = read_records(ran / "watchers" / "f.jsonl")
    paths = [r["path"] for r in records if "path" in r]
    assert {r["kind"] for r in records if "path" in r} >= {"start", "match"}
    status = json.loads((ran / "state" / "f.status.json").read_bytes())
    for text in [*paths, status["source"], status["label"]]:
        assert not any(c in text for c in "\x1b\x07\x9b"), text
    # each control shown as its escape (`jq -r` prints the text `\u001b`), none dropped: a
    # file name is not a line (`/tmp/x\r/var/log/a.log` was shown as `/var/log/a.log`)
    assert paths[-1].endswith("/d\u202eir\\u001b[31mRED\\u001b]0;title\\u0007/app\u2066x"
                              "\\u001b]8;;http:evil\\u0007link\\u001b]8;;\\u0007\\u009b2J.log")


@pytest.mark.parametrize("mark", MARKS)
def test_plain_text_refuses_a_mark(mark: str) -> None:
    line = f"ERROR {mark} x".encode()
    assert plain_text(line, 1000) is None
    assert plain_texts([b"ERROR ok", line], [8, len(line)], 1000)[2] == [1]


@given(st.text())
def test_a_record_line_is_one_line_without_raw_marks(text: str) -> None:
    out = dumps({"kind": "match", "line": text, text: 1} if text.isidentifier() else
                {"kind": "match", "line": text})
    assert out.count(b"\n") == 1 and not [m for m in MARK_BYTES if m in out]
    assert json.loads(out)["line"] == text.encode("utf-8", "replace").decode() or "\ufffd" in (
        json.loads(out)["line"])


@given(st.text())
def test_escape_marks_keeps_json_meaning(text: str) -> None:
    data = json.dumps({"k": text, text: [text]}, ensure_ascii=False).encode("utf-8", "replace")
    if "\ufffd" in data.decode() and any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        return  # (a lone surrogate: not UTF-8, not what the snapshot writer hands it)
    out = jsonl.escape_marks(data)
    assert not [m for m in MARK_BYTES if m in out]
    assert json.loads(out) == json.loads(data)
