"""Telling, after a crash, whether a recorded match is the file's line at its offset: the
record's text may be sanitized, redacted or clipped (a pure function, by table and Hypothesis)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchrun.match.redact import redact_line, redactor
from watchrun.match.sanitize import clip, raw_text, sanitize
from watchrun.output.recorded import Epoch, Mark, is_record_of, recorded_since
from watchrun.sources.resume import Recorded

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


def test_the_mark_of_an_inode_is_its_newest_record(tmp_path: Path) -> None:
    """A copy made while the runner was down got the inode number of a generation deleted
    before; both were read after the checkpoint. The mark of that inode is the copy's line (the
    newest record), not the deleted generation's further one: after a crash the copy is found
    read up to it (the furthest offset was kept, the copy's line was not found there, and the
    copy was recorded again)."""
    jsonl = tmp_path / "w.jsonl"
    recs = [{"seq": 5, "kind": "match", "inode": 7, "offset": 40, "line": "L7", "lineNo": 9},
            {"seq": 6, "kind": "rotate", "inode": 8, "oldInode": 7},
            {"seq": 7, "kind": "match", "inode": 8, "offset": 0, "line": "L8", "lineNo": 1},
            {"seq": 8, "kind": "match", "inode": 7, "offset": 0, "line": "L10", "lineNo": 1}]
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in recs))
    epochs, ended, _ = recorded_since(jsonl, 5)
    assert epochs[7] == [Epoch(0, Mark(0, "L10", 1))] and ended == {7}


def test_a_rotate_record_names_the_generation_number_its_epoch_is_of(tmp_path: Path) -> None:
    """`inodeGen` of a `rotate` record is kept with the epoch it begins (absent: not known)."""
    jsonl = tmp_path / "w.jsonl"
    recs = [{"seq": 5, "kind": "rotate", "inode": 8, "oldInode": 7, "inodeGen": 41},
            {"seq": 6, "kind": "match", "inode": 8, "offset": 0, "line": "L1", "lineNo": 1},
            {"seq": 7, "kind": "rotate", "inode": 9, "oldInode": 8}]
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in recs))
    epochs, _, _ = recorded_since(jsonl, 5)
    assert epochs[8] == [Epoch(), Epoch(5, Mark(0, "L1", 1), 41)]
    assert epochs[9] == [Epoch(), Epoch(7, Mark(), None)]


@pytest.mark.parametrize(("recorded_gen", "opened_gen", "skipped"), [
    (41, 41, True),     # the same generation: its recorded lines are not read again
    (41, 42, False),    # a new file got the inode number: read from its first line
    (None, 42, True),   # not known (a record from before the number was kept): as before
    (41, None, True),   # not known of the file opened (tmpfs): the fingerprints' word stands
])
def test_records_past_a_checkpoint_stand_only_for_the_generation_they_name(
        recorded_gen: int | None, opened_gen: int | None, skipped: bool) -> None:
    """After a crash, a generation opened afresh after a `rotate` record into its inode is
    skipped up to the last line recorded from that inode, unless the record named another
    generation number: a new file that got the number and the same first lines."""
    recorded = Recorded({8: [Epoch(), Epoch(5, Mark(40, "L2", 2), recorded_gen)]})
    marks = recorded.marks(8, opened_gen, None, renewed=True)
    assert marks == ([Mark(40, "L2", 2)] if skipped else [])


def test_a_copy_given_a_deleted_generations_inode_number_keeps_its_records() -> None:
    """A copytruncate copy got the inode number of a generation deleted before it (ext4 hands
    it out again); its records follow the last `rotate` record into that number, which names
    the deleted generation's number. After a crash its checkpoint (since = that record's seq)
    still finds them, so its lines are not recorded twice (found by the generations model:
    the copy's first line came twice)."""
    from watchrun.sources.identity import Checkpoint

    recorded = Recorded({8: [Epoch(), Epoch(5, Mark(0, "L14", 1), 41)]})
    copy = Checkpoint(dev=1, inode=8, fingerprint="", offset=0, line_no=1, path="app.log.9",
                      fingerprint_len=0, size=4, seq=3, since=5, inode_gen=42)
    assert recorded.last(copy) == Mark(0, "L14", 1)
    assert recorded.marks(8, 42, copy, renewed=False) == [Mark(0, "L14", 1)]
    other = Checkpoint(dev=1, inode=8, fingerprint="", offset=0, line_no=1, path="app.log",
                       fingerprint_len=0, size=4, seq=3, since=0, inode_gen=42)
    assert recorded.last(other) is None  # a generation of its own: nothing recorded of it
