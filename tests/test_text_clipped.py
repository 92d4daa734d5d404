"""A line within `maxLineBytes` whose text came out longer (each byte that is not UTF-8 is a
3-byte U+FFFD) is recorded with its text clipped (`truncated`, `omittedBytes: 0`, `raw` whole):
nothing of the line was left out, so no surface says it was cut. The echo, `matches` and a
woken agent said "the rest was not kept", and `status`'s `truncated` (with
`watchrun_truncated_total`, "matched lines cut at maxLineBytes") counted it beside a `linesCut`
of 0."""

from __future__ import annotations

import json
import re
from pathlib import Path

from inproc import inproc
from test_once import once

from watchrun.agents.prompt import cut_mark
from watchrun.match.redact import redactor

CLIPPED = "ERROR " + "\ufffd" * 200  # (206 bytes in the file, 606 of text)
CUT = "ERROR " + "x" * 300  # (over 256 bytes: 50 left out)
CLIP_MARK = " [text clipped: the line was matched whole]"


def test_a_line_whose_text_alone_was_clipped_is_not_said_to_be_cut(tmp_path: Path) -> None:
    (tmp_path / "clip.log").write_bytes(b"ERROR " + b"\xff" * 200 + b"\nINFO ok\n")
    (tmp_path / "cut.log").write_bytes(CUT.encode() + b"\n")
    config = {"limits": {"maxLineBytes": 256}, "watchers": [
        {"id": "clip", "path": "clip.log", "pattern": "ERROR", "gate": {"maxMatches": 5}},
        {"id": "cut", "path": "cut.log", "pattern": "ERROR", "gate": {"maxMatches": 5}}]}
    run = once(tmp_path, config)
    assert run.rc == 3, run.out + run.err  # (the cut line: "could not look at every line")
    assert "1 line was longer than limits.maxLineBytes" in run.out
    echoed = {m[1]: ln for ln in run.err.splitlines() if (m := re.search(r"\[(\w+)\] match ", ln))}
    assert len(echoed) == 2 and "[cut: the rest was not kept]" not in run.err
    assert echoed["clip"].endswith(CLIP_MARK) and "clip.log:1: ERROR \ufffd" in echoed["clip"]
    assert echoed["cut"].endswith(" [cut: 50 more bytes not kept]")
    (rec,) = [json.loads(x) for x in (tmp_path / ".watchrun" / "watchers" / "clip.jsonl")
              .read_text().splitlines() if '"match"' in x]
    assert (rec["truncated"], rec["omittedBytes"], rec["raw"]) == (True, 0, CLIPPED)
    assert rec["line"] == CLIPPED[: 6 + (256 - 6) // 3]  # (the text, to 256 bytes)
    shown = inproc(tmp_path, "matches", "clip", "-c", "watch.yaml").stdout.splitlines()
    assert len(shown) == 1 and shown[0].endswith(rec["line"] + CLIP_MARK)
    assert inproc(tmp_path, "matches", "cut", "-c", "watch.yaml").stdout.rstrip().endswith(
        " [cut: 50 more bytes not kept]")
    counts = {}
    for wid in ("clip", "cut"):
        doc = json.loads(inproc(tmp_path, "status", wid, "--json", "-c", "watch.yaml").stdout)
        counts[wid] = (doc["matchCount"], doc["truncated"], doc["linesCut"], doc["bytesCut"])
    assert counts == {"clip": (1, 0, 0, 0), "cut": (1, 1, 1, 50)}


def test_a_woken_agent_is_told_the_text_was_clipped_not_the_line_cut() -> None:
    clipped = CLIPPED[: 6 + (256 - 6) // 3]
    told = cut_mark(clipped, 0, 256, redactor())
    assert told.endswith(" [… text clipped at limits.maxLineBytes: the line was matched "
                         "whole …]") and len(told.encode()) <= 256
    assert cut_mark("ERROR x", 40, 256, redactor()).endswith(
        " [… 40 bytes of this line cut: over limits.maxLineBytes …]")
