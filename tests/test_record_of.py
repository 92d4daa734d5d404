"""Telling, after a crash, whether a recorded match is the file's line at its offset: the
record's text may be sanitized, redacted or clipped (a pure function, by table and Hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchrun.match.redact import redact_line, redactor
from watchrun.match.sanitize import clip, raw_text, sanitize
from watchrun.output.recorded import is_record_of

KEY = "AKIAIOSFODNN7EXAMPLE"


@pytest.mark.parametrize(("text", "line", "same"), [
    ("GET /a 500", "GET /a 500", True),
    ("GET /a 500", "GET /a 501", False),
    ("", "", False),  # nothing recorded: nothing to find
    (f"key={'[REDACTED:aws-access-key-id]'} ok", f"key={KEY} ok", True),
    ("key=[REDACTED:aws-access-key-id] ok", "key= ok", False),  # a secret is never empty
    ("key=[REDACTED:aws-access-key-id] ok", f"key={KEY} no", False),
    ("a" * 64, "a" * 64 + "b" * 100, True),  # clipped at maxLineBytes: a prefix
    ("a" * 10, "a" * 10 + "b", False),  # short: never taken for clipped
    ("[REDACTED:x] " + "a" * 60, f"{KEY} " + "a" * 70, True),
    ("a" * 60 + " [REDAC", "a" * 60 + f" {KEY}", True),  # a token cut by the clipping
])
def test_table(text: str, line: str, same: bool) -> None:
    assert is_record_of(text, line) is same


lines = st.text(st.characters(codec="utf-8"), max_size=120).map(lambda t: t.replace("\n", ""))


@given(lines, st.sampled_from(["", KEY, "ghp_" + "a" * 36]), lines, st.integers(0, 2))
def test_what_the_pipeline_records_of_a_line_is_found(before: str, secret: str,
                                                      after: str, pad: int) -> None:
    """The record's text, its raw form and the text clipped at the smallest maxLineBytes."""
    data = (before + secret + after + "x" * 100 * pad).encode("utf-8", "surrogatepass")
    decoded = raw_text(data)
    text, raw, _ = redact_line(redactor(), sanitize(decoded)[0], decoded)
    for recorded in (text, raw, clip(text, 256)[0]):
        if recorded:
            assert is_record_of(recorded, decoded)
