"""A line a `\\r` redrew (a progress bar, a test runner's status drawn over) is shown whole in a
once run's verdict, `\\r` escaped, so the evidence holds what matched; its record keeps the last
segment drawn (what a terminal shows)."""

from __future__ import annotations

import json
from pathlib import Path

from liverunner import read_records
from test_once import gated, once

SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
"""A GitHub token, as `output.redact` knows them."""


def _jsonl(folder: Path, wid: str) -> list[dict[str, object]]:
    return read_records(folder / ".watchrun" / "watchers" / f"{wid}.jsonl")


def test_the_evidence_of_a_redrawn_line_holds_what_matched(tmp_path: Path) -> None:
    """`FAILED test_x` then a progress line drawn over it: the verdict offered "run 1:1: three"
    as the evidence of "1 match of /ERROR/", a line without ERROR in it."""
    cr = gated("cr", "printf 'one\\rERROR two\\rthree\\r\\n'", "ERROR", maxMatches=0)
    r = once(tmp_path, {"watchers": [cr]}, "--quiet")
    assert r.rc == 1, r.out + r.err
    assert "  - 1 match of /ERROR/ (at most 0 allowed)\n    run 1:1: one\\rERROR two\\rthree\n" \
        in r.out, r.out
    (match,) = [x for x in _jsonl(tmp_path, "cr") if x["kind"] == "match"]
    assert (match["line"], match["raw"]) == ("three", "one\rERROR two\rthree\r")  # (as before)
    (v,) = json.loads(once(tmp_path, {"watchers": [cr]}, "--json").out)["verdicts"]
    assert v["first"][0]["line"] == "one\\rERROR two\\rthree"


def test_a_crlf_line_is_no_redraw_and_a_redrawn_secret_stays_redacted(tmp_path: Path) -> None:
    (tmp_path / "app.log").write_bytes(b"ERROR one\r\nERROR " + SECRET.encode() + b"\rok\r\n")
    r = once(tmp_path, {"output": {"redact": True}, "watchers": [
        {"id": "log", "path": "app.log", "pattern": "ERROR", "gate": {"maxMatches": 0}}]})
    assert r.rc == 1, r.out + r.err
    assert "    app.log:1: ERROR one\n    app.log:2: ERROR [REDACTED:" in r.out, r.out
    assert "\\rok\n" in r.out and SECRET not in r.out + r.err


def test_with_output_redact_the_echoed_output_is_redacted_too(tmp_path: Path) -> None:
    """A CI log leaves the machine: with `output.redact` the command's echoed output hid
    nothing (explorer output, 1d), while its records were redacted. Without it, the echo is
    what the command printed (docs/security.md, out of scope)."""
    cmd = {"id": "c", "command": f"echo token {SECRET}; echo password=hunter2secret",
           "pattern": "ERROR"}
    shown = once(tmp_path, {"output": {"redact": True}, "watchers": [cmd]})
    assert shown.rc == 0, shown.out + shown.err
    assert shown.out.startswith("token [REDACTED:github-token]\npassword=[REDACTED:password]\n")
    assert SECRET not in shown.out and "hunter2" not in shown.out
    plain = once(tmp_path, {"watchers": [cmd]})
    assert plain.out.startswith(f"token {SECRET}\npassword=hunter2secret\n")
